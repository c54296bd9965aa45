"""Optional C compilation of the per-event hot loops (issue 11); everything else is pyproject.toml.

The modules listed in `cdc/compiled.py` (COMPILED_MODULES) are ordinary Python files that Cython
compiles unchanged: the same source runs uncompiled when Cython or a C compiler is missing (the
build then warns and goes on), and tests run both (`tests/test_compiled.py`). With
`CDC_REQUIRE_COMPILED=1` (CI sets it) the build fails instead of falling back. To compile a module
of yours: keep it plain typed Python, add its dotted name there, and `make setup` (which rebuilds
when a listed file changes; the .so lands next to the .py and wins the import).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

BUILD_DIR = Path("build/cython")


def _load_compiled():
    """cdc/compiled.py (COMPILED_MODULES, C_LIBRARIES, cimported()), loaded from its file: the
    `cdc` package is not imported during a build. It imports nothing but the standard library."""
    path = Path(__file__).resolve().with_name("cdc") / "compiled.py"
    spec = importlib.util.spec_from_file_location("_cdc_compiled", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


compiled = _load_compiled()


class OptionalBuildExt(build_ext):
    """A failed compilation is a warning: the pure-Python module is used instead.

    The compiled modules of one package call each other in C (`cimport` in their .pxd files:
    merge_source's processor → classifier → group → scan), and a compiled module whose
    cimported one runs as Python fails to import. So a failure takes its whole package back to
    Python, and with it every package that cimports from it (a module may read another
    package's cdef classes in C): the other modules built now are removed again."""

    def run(self) -> None:
        self._failed: set[str] = set()
        try:
            super().run()
        except Exception as exc:  # no compiler, no Python.h: fall back, loudly
            _fall_back(f"C compilation skipped ({exc})")
        failed_packages = _packages_back_to_python({_package(name) for name in self._failed})
        for ext in self.extensions:
            if ext.name not in self._failed and _package(ext.name) in failed_packages:
                path = Path(self.get_ext_fullpath(ext.name))
                if path.exists():
                    path.unlink()
                    _warn(f"{ext.name} removed: a module it depends on did not compile")

    def copy_extensions_to_source(self) -> None:
        """(--inplace) Copy what was built: a failed module has nothing to copy, and its error
        must not stop the copy of the others."""
        built = self.extensions
        self.extensions = [ext for ext in built if ext.name not in self._failed]
        try:
            super().copy_extensions_to_source()
        finally:
            self.extensions = built

    def build_extension(self, ext) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            self._failed.add(ext.name)
            _fall_back(f"{ext.name} not compiled ({exc})", "its pure-Python module runs instead")


def _package(module: str) -> str:
    return module.rsplit(".", 1)[0]


def _packages_back_to_python(failed: set[str]) -> set[str]:
    """`failed` and every package of a compiled module that cimports a compiled module of one of
    them (the codec's declaration-only .pxd files, constants and header, are no such link), until
    none is added."""
    root = Path(compiled.ROOT)
    while True:
        more = set()
        for name in compiled.COMPILED_MODULES:
            for pxd in compiled.cimported(root / (name.replace(".", "/") + ".pxd")):
                module = ".".join(pxd.relative_to(root).with_suffix("").parts)
                if module in compiled.COMPILED_MODULES and _package(module) in failed:
                    more.add(_package(name))
        if not more - failed:
            return failed
        failed |= more


def _warn(message: str) -> None:
    print(f"WARNING: {message}", file=sys.stderr)


def _fall_back(what: str, instead: str = "the pure-Python modules run instead") -> None:
    """`what` failed, so plain Python will run: a warning, or, where every module must compile
    (CDC_REQUIRE_COMPILED=1: CI), the build's end."""
    if compiled.required():
        raise SystemExit(
            f"error: {what}; {compiled.REQUIRE_ENV}=1 requires every module of cdc/compiled.py"
            " compiled (install Cython, a C compiler, the Python and zlib headers: `make setup`)"
        )
    _warn(f"{what}; {instead}")


def extensions() -> list:
    try:
        from Cython.Build import cythonize
    except ImportError:
        _fall_back("Cython is not installed")
        return []
    modules = [(name, name.replace(".", "/") + ".py") for name in compiled.COMPILED_MODULES]
    for _, path in modules:
        _drop_stale_c(Path(path))
    try:
        return cythonize(
            [_extension(name, path) for name, path in modules],
            build_dir=str(BUILD_DIR),
            compiler_directives={"language_level": "3"},
            quiet=True,
        )
    except Exception as exc:
        _fall_back(f"Cython failed ({exc})")
        return []


def _drop_stale_c(py: Path) -> None:
    """Cython's dependency scan misses what an augmenting .pxd cimports (framing.pxd's
    `from cdc.binlog cimport constants`, wire.pxd's `from merge_source.fragment cimport
    Fragment`), so a changed cimported .pxd left the generated C, and the .so, as it was.
    Removing that C makes cythonize write it again."""
    c = BUILD_DIR / py.with_suffix(".c")
    if not c.exists():
        return
    if any(
        p.stat().st_mtime > c.stat().st_mtime
        for p in compiled.cimported(py.with_suffix(".pxd"))
        if p.exists()
    ):
        c.unlink()


def _extension(name: str, path: str):
    from setuptools import Extension

    libraries = list(compiled.C_LIBRARIES.get(name, ()))
    return Extension(name, [path], extra_compile_args=["-O2"], libraries=libraries)


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
