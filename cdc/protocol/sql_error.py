"""The error a MySQL server answers a statement with (an ERR packet: code, SQLSTATE, message).
Here, in the protocol, because two stages raise it: the dumper's server (its parser and answers)
and the read path (a SELECT over a logical table refused or failed part way)."""

from __future__ import annotations


class SqlError(Exception):
    """A statement we cannot parse, do not support or refuse: an ERR packet (1064 by default)."""

    def __init__(self, message: str, code: int = 1064, sql_state: str = "42000") -> None:
        super().__init__(message)
        self.code = code
        self.sql_state = sql_state
        self.message = message
