"""Password checks of the two auth plugins we accept, against the stored forms in DumperConfig
(`*HEX` native hash; hex SHA256(SHA256(pw)) for caching_sha2 fast auth), the privileges a
user's flags mean, the refusal of a missing one, and grant texts."""

from __future__ import annotations

import hashlib
import hmac

from cdc.config import DumperUser
from cdc.protocol import auth
from dumper.server.handlers import SqlError

sha2_digest = auth.caching_sha2_digest
ER_ACCESS_DENIED = 1227


def verify_native(user: DumperUser, salt: bytes, response: bytes) -> bool:
    if not user.password_hash and user.sha2_digest:
        return False  # a password known only as its sha2 digest: never "no password"
    return auth.native_verify(user.password_hash, salt, response)


def verify_caching_sha2(user: DumperUser, salt: bytes, response: bytes) -> bool:
    """Fast-auth check: response = SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + salt)."""
    if not user.sha2_digest:
        return False
    stage2 = bytes.fromhex(user.sha2_digest)
    if len(response) != 32:
        return False
    mask = hashlib.sha256(stage2 + salt[:20]).digest()
    stage1 = bytes(a ^ b for a, b in zip(response, mask, strict=True))
    return hmac.compare_digest(hashlib.sha256(stage1).digest(), stage2)


# The one mapping of a [[dumper.users]] entry's flags to MySQL/MariaDB privileges; every check
# (sql/answer_*.py, wire/handshake.py, dump/handler.py) and SHOW GRANTS read it from here
# (docs/dumper.md "Privileges").
# Everyone: SELECT and SHOW DATABASES (variables, schema queries).
BASE = ("SELECT", "SHOW DATABASES")
# `replication`: dump and register (REPLICATION SLAVE), the binlog status statements (REPLICATION
# CLIENT; zongji's startAtEnd and Debezium read SHOW BINARY LOGS) and SHOW BINLOG EVENTS
# (MariaDB's BINLOG MONITOR covers both of the latter).
REPLICATION = ("REPLICATION SLAVE", "REPLICATION CLIENT", "BINLOG MONITOR")
# `admin`: PURGE (SUPER / BINLOG ADMIN), KILL of others and every connection in SHOW PROCESSLIST
# (PROCESS), SHOW GRANTS FOR others, and the spare connection slot (CONNECTION ADMIN).
ADMIN = (
    "SUPER",
    "PROCESS",
    "RELOAD",
    "REPLICATION CLIENT",
    "BINLOG MONITOR",
    "BINLOG ADMIN",
    "CONNECTION ADMIN",
)
# MySQL 5.7's names for SHOW GRANTS (we report a 5.7 version; MariaDB-only names are left out).
_GRANT_ORDER = (*BASE, "REPLICATION SLAVE", "REPLICATION CLIENT", "SUPER", "PROCESS", "RELOAD")


def privileges(user: DumperUser | None) -> frozenset[str]:
    if user is None:
        return frozenset()
    out = set(BASE)
    if user.replication:
        out.update(REPLICATION)
    if user.admin:
        out.update(ADMIN)
    return frozenset(out)


def has_any(user: DumperUser | None, *wanted: str) -> bool:
    return not privileges(user).isdisjoint(wanted)


def denied(*privileges: str) -> SqlError:
    return SqlError(
        "Access denied; you need (at least one of) the "
        f"{', '.join(privileges)} privilege(s) for this operation",
        ER_ACCESS_DENIED,
        "42000",
    )


def require(user: DumperUser | None, *privileges: str) -> None:
    """`denied` unless `user` has one of `privileges`."""
    if not has_any(user, *privileges):
        raise denied(*privileges)


ER_TABLEACCESS_DENIED = 1142


def may_read_rows(user: DumperUser | None, db: str) -> bool:
    """Rows of logical tables (`select` in [[dumper.users]]): the base SELECT covers only the
    variables and the schema, never rows."""
    if user is None or user.select is False:
        return False
    return user.select is True or db.lower() in (d.lower() for d in user.select)


def require_read_rows(user: DumperUser | None, host: str, db: str, table: str) -> None:
    """MySQL's ER_TABLEACCESS_DENIED_ERROR unless `user` may read rows of `db`."""
    if not may_read_rows(user, db):
        name = user.name if user is not None else ""
        raise SqlError(
            f"SELECT command denied to user '{name}'@'{host}' for table `{db}`.`{table}` "
            "(rows need `select` in its [[dumper.users]] entry)",
            ER_TABLEACCESS_DENIED,
            "42000",
        )


def grants(user: DumperUser) -> list[str]:
    have = privileges(user)
    # SELECT on *.* is shown only when it reads rows of every database (`select = true`): the
    # base SELECT (variables, schema) reads no row, and a tool deciding from SHOW GRANTS whether
    # it may snapshot a table must not be told it can.
    privs = [p for p in _GRANT_ORDER if p in have and (p != "SELECT" or user.select is True)]
    out = [f"GRANT {', '.join(privs)} ON *.* TO '{user.name}'@'%'"]
    if isinstance(user.select, list):
        out += [f"GRANT SELECT ON `{db}`.* TO '{user.name}'@'%'" for db in user.select]
    return out
