"""Shared foundation of the global binlog server: configuration, codec, protocol helpers, the
local MariaDB cluster tooling and the reference compute node. Imports no stage package, nor
bench/ or cli/ (tests/test_layout.py)."""

__version__ = "0.1.0"

from cdc import compiled as _compiled  # noqa: E402

_compiled.install()  # CDC_PURE_PYTHON=1: the .py of compiled modules, before any loads
