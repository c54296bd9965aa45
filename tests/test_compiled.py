"""The compiled hot loops (cdc/compiled.py): never stale, and the same source passes the
MergeSource's recorded-binlog, spill, sorter and wire tests, the merger's, the leader's encoder tests, the
writer's stamping tests and the snapshot read's row tests as plain Python too."""

from __future__ import annotations

import os
import subprocess
import sys

from cdc.compiled import COMPILED_MODULES, PURE_ENV, ROOT, cimported, is_compiled, source_path

PURE_TESTS = [
    "tests/merge_source/test_recorded.py",
    "tests/merge_source/test_spill.py",
    "tests/merge_source/test_sorter.py",
    "tests/merge_source/test_scan.py",
    "tests/merge_source/test_wire.py",
    "tests/merge_source/test_dn_restart.py",
    "tests/merge_source/test_fast_paths.py",
    "tests/merge_joint/test_merger.py",
    "tests/dumper/test_txn_encoder.py",
    "tests/binlog_writer/test_recovery.py",
    "tests/binlog_writer/test_stream.py",
    "tests/binlog_writer/test_batch.py",
    "tests/cdc/binlog/test_fastpath.py",
    "tests/dumper/test_framing.py",
    "tests/dumper/snapshot/test_page_rows.py",
    "tests/dumper/snapshot/test_image_text.py",
    "tests/cdc/binlog/test_pxd_constants.py",
]


def test_a_compiled_module_is_not_older_than_its_source():
    for module in COMPILED_MODULES:
        py = source_path(module)
        sources = [py, *[p for p in [py.with_suffix(".pxd")] if p.exists()]]  # C types of a .py
        sources += cimported(sources[-1])  # the C declarations it compiles in
        for so in py.parent.glob(py.stem + ".*.so"):
            for src in sources:
                assert so.stat().st_mtime >= src.stat().st_mtime, (
                    f"{so} is older than {src.name}: run `make setup` to compile it again"
                )


def test_the_switch_gives_plain_python():
    env = {**os.environ, PURE_ENV: "1"}
    code = (
        "from cdc.compiled import COMPILED_MODULES, is_compiled\n"
        "print([m for m in COMPILED_MODULES if is_compiled(m)])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
    print({m: is_compiled(m) for m in COMPILED_MODULES})  # this process: compiled if built


def test_the_pure_python_path_passes_the_offline_tests_of_compiled_modules():
    env = {**os.environ, PURE_ENV: "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *PURE_TESTS]
    out = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
