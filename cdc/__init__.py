"""The foundation the stages share: configuration, keys, the binlog codec (`binlog`), the MySQL
protocol client (`protocol`) and the CN protocol the dumper runs (`cn_protocol`).

Imports no stage package, nor cdc_equipment/, bench/ or cdc_cli/ (tests/test_layout.py).
"""

__version__ = "0.1.0"

from cdc import compiled as _compiled  # noqa: E402

_compiled.install()  # CDC_PURE_PYTHON=1: the .py of compiled modules, before any loads
