"""mariadb-binlog (MariaDB 10.11) on the real pipeline output: the files directly (checksums
verified, rows decoded by logical name), the same text read from the dumper, and `--raw` copies
identical to the files. (tests/dumper/test_mariadb_binlog.py covers the edge cases on generated
files: rotation, --stop-never, errors.)"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.e2e.global_binlog import read_global_binlog

pytestmark = pytest.mark.skipif(
    shutil.which("mariadb-binlog") is None, reason="mariadb-binlog missing"
)
DECODE = ["-vv", "--base64-output=decode-rows"]


def run(*args: str) -> str:
    res = subprocess.run(["mariadb-binlog", *args], capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr.decode(errors="replace")
    return res.stdout.decode(errors="replace")  # BLOB values are printed as raw bytes


def remote(pipeline) -> list[str]:
    return [
        "--read-from-remote-server",
        f"--host={pipeline.host}",
        f"--port={pipeline.port}",
        f"--user={pipeline.user}",
        f"--password={pipeline.password}",
    ]


def row_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("### ")]


def test_files_verify_and_decode_by_logical_name(pipeline):
    text = run("--verify-binlog-checksum", *DECODE, str(pipeline.binlog_dir / "binlog.000001"))
    txns = read_global_binlog(pipeline.binlog_dir)
    rows = [(db, t, kind, r) for txn in txns for db, t, kind, rs in txn.changes for r in rs]
    transfers = sum(1 for db, t, kind, _ in rows if (db, t, kind) == ("bank", "accounts", "update"))
    assert text.count("### UPDATE `bank`.`accounts`") == transfers > 0
    assert text.count("### INSERT INTO `shop`.`orders`") == sum(
        1 for db, t, kind, _ in rows if (db, t, kind) == ("shop", "orders", "write")
    )
    assert "_p`." not in text and "__cdc" not in text  # no physical or private names
    assert text.count("\tXid = ") == sum(1 for t in txns if t.changes)
    assert text.count("Ignorable event type 29") == len(txns)  # one CTS mark per transaction


def test_remote_text_equals_the_files(pipeline):
    local = run(*DECODE, str(pipeline.binlog_dir / "binlog.000001"))
    served = run(*remote(pipeline), *DECODE, "--to-last-log", "binlog.000001")
    assert row_lines(served) == row_lines(local)
    # Event positions too (remote output has one more "# at 4": the fake ROTATE's).
    assert positions(served) == positions(local)


def positions(text: str) -> list[str]:
    return list(dict.fromkeys(line for line in text.splitlines() if line.startswith("# at ")))


def test_remote_raw_copies_the_files_byte_for_byte(pipeline, tmp_path):
    run(*remote(pipeline), "--raw", f"--result-file={tmp_path}/", "--to-last-log", "binlog.000001")
    original = bytearray((pipeline.binlog_dir / "binlog.000001").read_bytes())
    original[4 + 17] &= ~0x01  # the active file's in-use flag is cleared in the FDE sent
    assert (tmp_path / "binlog.000001").read_bytes() == bytes(original)
