"""The modules that Cython compiles when it can, and a switch to run them as plain Python.

`setup.py` compiles every module in COMPILED_MODULES (it reads this tuple; add yours here). They
are plain typed Python: the same file runs uncompiled when Cython or a C compiler is missing.
Compiled, their annotations are enforced (a `bytes` parameter refuses a bytearray), so keep them
exact. `CDC_PURE_PYTHON=1` in the environment makes this process import the .py files even where
a compiled .so sits next to them (tests run the pure path this way); a package holding compiled
modules imports `cdc` first, which installs that switch before any of them loads.
`CDC_REQUIRE_COMPILED=1` (CI: `.ci/run`) turns the fallback off: the build fails when a module
does not compile, and tests/test_compiled.py fails when one is not compiled.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
import sys
from pathlib import Path

COMPILED_MODULES = (
    # The values a MergeSource emits (statements, fragments, watermarks): cdef classes with typed
    # fields (fragment.pxd), built by their constructors and read in C by the modules below.
    "merge_source.fragment",
    "merge_source.scan",
    "merge_source.group",
    "merge_source.classifier",
    "merge_source.sorter",
    "merge_source.processor",
    "merge_source.renamer",  # NameMap.rename: once per TABLE_MAP released
    # The wire between the processes (the leader's decode: its offsets and per-event split in C,
    # wire.pxd), the leader's merge (the fields of those values read in C; compiled when they
    # were plain objects, it ran no faster than the interpreter), its encoder and the writer's
    # stamping.
    "merge_source.wire",
    "merge_joint.merger",
    "dumper.pipeline.txn_encoder",
    # The multi-stream split's per-transaction routing (docs/streams.md: flat as streams grow).
    "dumper.pipeline.stream_split",
    "cdc.binlog.fastpath",
    # The dump stream's split into events (every DumpClient: the MergeSource's DN reads).
    "cdc.protocol.dump_stream",
    # The server's dump loop: the events of a batch framed as packets (one pass, no per-event
    # object), what a consumer costs the server process.
    "dumper.server.dump.framing",
    # A snapshot read's rows (docs/snapshot-reads.md): each DN page's rows split into key and
    # data, and the rows framed as packets a batch at a time (the read's per-row cost).
    "read_path.page_rows",
    "read_path.key_rows",
    "dumper.server.wire.row_packets",
    # A snapshot read's scan of the global binlog: the values of a changed row located, none
    # decoded (its key is, and its before-image only if a chunk emits it).
    "read_path.image_walk",
    # A before-image a chunk emits, spelled from its bytes straight into a text row.
    "read_path.image_text",
)
# C libraries a compiled module calls directly (cdc/binlog/zcrc.pxd, which it cimports, declares
# what it uses): zlib's crc32 from C costs a fraction of the Python call per event.
# Without their headers such a module fails to compile (and its package runs as Python).
C_LIBRARIES = {"cdc.binlog.fastpath": ("z",), "cdc.protocol.dump_stream": ("z",)}
PURE_ENV = "CDC_PURE_PYTHON"
REQUIRE_ENV = "CDC_REQUIRE_COMPILED"
ROOT = Path(__file__).resolve().parent.parent
# `from cdc.binlog cimport constants, header` (modules of declarations only) or
# `from merge_source.fragment cimport Fragment` (a compiled module's types).
_CIMPORT = re.compile(r"^from ([\w.]+) cimport (.+)$", re.M)


def source_path(module: str) -> Path:
    return ROOT / (module.replace(".", "/") + ".py")


def cimported(pxd: Path) -> list[Path]:
    """The .pxd files that a module's .pxd cimports: a compiled module is as old as the newest
    of them (setup.py regenerates its C, which Cython's own dependency scan misses for what an
    augmenting .pxd cimports; tests/test_compiled.py checks the .so against them)."""
    if pxd.suffix != ".pxd" or not pxd.exists():
        return []
    found = []
    for module, names in _CIMPORT.findall(pxd.read_text()):
        path = ROOT / module.replace(".", "/")
        if not (ROOT / module.split(".")[0]).is_dir():
            continue  # Cython's own (`from libc.string cimport memcpy`): not ours to track
        if path.with_suffix(".pxd").exists():
            found.append(path.with_suffix(".pxd"))
        else:  # a package: the names are its modules
            found += [path / f"{name.strip()}.pxd" for name in names.split(",")]
    return found


def required() -> bool:
    """Whether every module must be compiled (no fallback to plain Python): REQUIRE_ENV=1."""
    return os.environ.get(REQUIRE_ENV) == "1"


def is_compiled(module: str) -> bool:
    """Whether `module`, imported in this process, is the compiled one."""
    __import__(module)
    return not str(sys.modules[module].__file__).endswith(".py")


class _PureFinder:
    """Finds the .py of a listed module, so that it wins over the .so beside it."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name not in COMPILED_MODULES:
            return None
        loader = importlib.machinery.SourceFileLoader(name, str(source_path(name)))
        return importlib.util.spec_from_loader(name, loader)


def install() -> None:
    if os.environ.get(PURE_ENV) == "1" and not any(
        isinstance(f, _PureFinder) for f in sys.meta_path
    ):
        sys.meta_path.insert(0, _PureFinder())
