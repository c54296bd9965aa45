"""Record REAL MariaDB binlog bytes into fixtures/: a throwaway mariadbd with binlog ON (ROW,
FULL image, annotate, CRC32, FULL row metadata) runs DDL, DML of all column types and XA
transactions; its binlog files are copied next to this script. Run:

    .venv/bin/python -m tests.cdc.binlog.record_fixtures
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from tests.cdc.binlog import fixture_data as fd
from tests.cdc.binlog.throwaway_mariadb import start

FIXTURES = Path(__file__).parent / "fixtures"

BINLOG_ARGS = [
    "--server-id=1",
    "--binlog-format=ROW",
    "--binlog-row-image=FULL",
    "--binlog-annotate-row-events=ON",
    "--binlog-checksum=CRC32",
    "--binlog-row-metadata=FULL",
]


def script() -> list[str]:
    """Statement batches, each run by one `mariadb` client session."""
    tz = "SET time_zone = '+00:00'; SET sql_mode = '';"
    rows = ";\n".join(fd.insert_sql(i) for i in range(len(fd.ROWS)))
    return [
        "CREATE DATABASE fx DEFAULT CHARSET utf8mb4;",
        fd.CREATE_ALL_TYPES + ";",
        fd.SMALL_TABLE + ";",
        f"{tz}\n{rows};",
        # A multi-statement transaction with UPDATE/DELETE and a TraceId comment.
        "BEGIN;\n"
        "/*CDC trace=1.1 cn=7 */ INSERT INTO fx.acct VALUES (1, 100, 'a'), (2, 200, NULL);\n"
        "/*CDC trace=1.2 cn=7 */ UPDATE fx.acct SET bal = bal + 1, note = 'upd' WHERE id = 1;\n"
        "/*CDC trace=1.3 cn=7 */ DELETE FROM fx.acct WHERE id = 2;\n"
        "COMMIT;",
        # XA committed (prepare, then commit from the same session).
        "XA START 'cdc-1', 'dn1', 1;\n"
        "/*CDC trace=2.1 cn=7 */ INSERT INTO fx.acct VALUES (10, 1000, 'xa');\n"
        "XA END 'cdc-1', 'dn1', 1;\n"
        "XA PREPARE 'cdc-1', 'dn1', 1;\n"
        "XA COMMIT 'cdc-1', 'dn1', 1;",
        # XA rolled back after prepare.
        "XA START 'cdc-2', 'dn1', 1;\n"
        "/*CDC trace=3.1 cn=7 */ INSERT INTO fx.acct VALUES (11, 1100, 'rb');\n"
        "XA END 'cdc-2', 'dn1', 1;\n"
        "XA PREPARE 'cdc-2', 'dn1', 1;\n"
        "XA ROLLBACK 'cdc-2', 'dn1', 1;",
        "FLUSH BINARY LOGS;",
        "/*CDC trace=4.1 cn=7 */ UPDATE fx.acct SET bal = 0 WHERE id = 10;",
    ]


def record(out_dir: Path = FIXTURES) -> list[Path]:
    with tempfile.TemporaryDirectory(prefix="cdc-fixtures-") as tmp:
        datadir = Path(tmp) / "data"
        server = start(datadir, [f"--log-bin={datadir}/binlog", *BINLOG_ARGS])
        try:
            for batch in script():
                server.sql(batch)
        finally:
            server.stop()  # a clean shutdown ends the last file with STOP
        out_dir.mkdir(parents=True, exist_ok=True)
        copied = []
        for src in sorted(datadir.glob("binlog.[0-9]*")):
            dst = out_dir / f"mariadb-10.11-{src.name}"
            shutil.copyfile(src, dst)
            copied.append(dst)
        return copied


if __name__ == "__main__":
    for p in record(Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURES):
        print(p, p.stat().st_size)
