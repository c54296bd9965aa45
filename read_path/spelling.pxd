# The C view of spelling.py for image_text (compiled): `from read_path cimport
# spelling`, then `spelling.Spelling.TEXT` in the .py. Only numbers; spelling.py is the
# declaration, and tests/read_path/test_units.py fails if a value here differs from it.

cdef enum Spelling:
    OTHER = 0
    INTEGER = 1
    UNSIGNED = 2
    TEXT = 3
    DATETIME = 4
    DATE = 5
