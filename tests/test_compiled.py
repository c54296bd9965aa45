"""The compiled hot loops (cdc/compiled.py): never stale, and the same source passes the
MergeSource's recorded-binlog, spill, sorter and wire tests, the merger's, the leader's encoder tests, the
writer's stamping tests and the snapshot read's row tests as plain Python too. With
CDC_REQUIRE_COMPILED=1 (CI) a module that is not compiled fails here; without it the fallback to
plain Python is what a user without a compiler gets, and the tests that need a compiled module
say so by skipping."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

from cdc.compiled import (
    COMPILED_MODULES,
    PURE_ENV,
    REQUIRE_ENV,
    ROOT,
    cimported,
    is_compiled,
    required,
    source_path,
)

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
    "tests/dumper/streams/test_split.py",
    "tests/binlog_writer/test_recovery.py",
    "tests/binlog_writer/test_stream.py",
    "tests/binlog_writer/test_batch.py",
    "tests/cdc/binlog/test_fastpath.py",
    "tests/dumper/test_framing.py",
    "tests/read_path/test_page_rows.py",
    "tests/read_path/test_key_rows.py",
    "tests/read_path/test_image_text.py",
    "tests/cdc/binlog/test_pxd_constants.py",
]


def _python(code: str, switch: str, on: bool, check: bool = False):
    """`code` run by a new Python in the checkout, the environment switch `switch` set to 1 or
    unset (whatever this process was started with)."""
    env = {k: v for k, v in os.environ.items() if k != switch}
    if on:
        env[switch] = "1"
    return subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=check
    )


def _compiled_in_a_new_process(pure: bool) -> list[str]:
    """The modules of COMPILED_MODULES that a new process imports compiled, with the switch to
    plain Python on or off."""
    code = (
        "from cdc.compiled import COMPILED_MODULES, is_compiled\n"
        "print([m for m in COMPILED_MODULES if is_compiled(m)])"
    )
    return ast.literal_eval(_python(code, PURE_ENV, pure, check=True).stdout.strip())


def test_every_module_is_compiled_where_required():
    plain = [m for m in COMPILED_MODULES if m not in _compiled_in_a_new_process(pure=False)]
    if plain and not required():
        pytest.skip(f"running as plain Python: {plain} ({REQUIRE_ENV}=1 makes this a failure)")
    assert plain == [], f"not compiled: {plain}; run `make setup` and read its warnings"


def test_a_compiled_module_is_not_older_than_its_source():
    for module in COMPILED_MODULES:
        py = source_path(module)
        sources = [py, *[p for p in [py.with_suffix(".pxd")] if p.exists()]]  # C types of a .py
        sources += cimported(sources[-1])  # the C declarations it compiles in
        built = list(py.parent.glob(py.stem + ".*.so"))
        assert built or not required(), f"{module} has no compiled .so: run `make setup`"
        for so in built:
            for src in sources:
                assert so.stat().st_mtime >= src.stat().st_mtime, (
                    f"{so} is older than {src.name}: run `make setup` to compile it again"
                )


def test_the_switch_gives_plain_python():
    assert _compiled_in_a_new_process(pure=True) == []
    print({m: is_compiled(m) for m in COMPILED_MODULES})  # this process: compiled if built


@pytest.mark.parametrize("strict", [False, True])
def test_a_build_without_cython_falls_back_unless_compiled_is_required(strict):
    """setup.py where Cython cannot be imported: a warning and no extension for a user, the
    build's end (an error naming the switch) under CDC_REQUIRE_COMPILED=1."""
    code = (
        "import runpy, sys\n"
        "sys.modules['Cython'] = None  # import Cython fails\n"
        "sys.argv = ['setup.py', '--version']\n"
        "runpy.run_path('setup.py', run_name='__main__')\n"
    )
    out = _python(code, REQUIRE_ENV, strict)
    if strict:
        assert out.returncode != 0, out.stdout + out.stderr
        assert f"{REQUIRE_ENV}=1 requires every module" in out.stderr
    else:
        assert out.returncode == 0, out.stdout + out.stderr
        assert "WARNING: Cython is not installed; the pure-Python modules run" in out.stderr
        assert out.stdout.strip(), "setup() ran: it printed the version"


def test_the_pure_python_path_passes_the_offline_tests_of_compiled_modules():
    env = {**os.environ, PURE_ENV: "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *PURE_TESTS]
    out = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
