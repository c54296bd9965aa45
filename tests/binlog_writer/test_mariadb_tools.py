"""Files written by BinlogWriter are read by `mariadb-binlog --verify-binlog-checksum`, decode to
the values we encoded, and apply to a real MariaDB server giving the expected tables."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from binlog_writer import BinlogWriter, FsyncPolicy
from tests.binlog_writer.gen import DB, FIXTURE, build_script
from tests.cdc.binlog import fixture_data as fd

pytestmark = pytest.mark.skipif(
    not shutil.which("mariadb-binlog"), reason="mariadb-binlog not installed"
)


def mariadb_binlog(*files: Path, decode: bool = True) -> str:
    args = ["mariadb-binlog", "--no-defaults", "--verify-binlog-checksum"]
    if decode:
        args += ["-vv", "--base64-output=decode-rows"]
    res = subprocess.run(args + [str(f) for f in files], capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr.decode(errors="replace")
    assert b"ERROR" not in res.stderr, res.stderr.decode(errors="replace")
    return res.stdout.decode("utf-8", errors="replace")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("out")
    script = build_script()
    # Small max size so that size-based rotation happens (a txn is never split).
    with BinlogWriter(out, max_file_size=400_000, fsync=FsyncPolicy.never(), server_id=77) as w:
        positions = [w.append_transaction(txn) for txn in script.txns[:5]]
        w.rotate()  # on demand
        positions += [w.append_transaction(txn) for txn in script.txns[5:]]
    files = [out / name for name in w.files()]
    return script, files, positions


def row_blocks(text: str, table: str) -> list[list[str]]:
    """`### INSERT INTO `db`.`table`` blocks of mariadb-binlog -vv output as lists of @N= lines."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if (
            line.startswith("### INSERT INTO")
            or line.startswith("### UPDATE")
            or line.startswith("### DELETE")
        ):
            current = [] if f"`{table}`" in line else None
            if current is not None:
                blocks.append(current)
        elif current is not None and line.startswith("###   @"):
            current.append(line[4:].strip())
    return blocks


def test_files_layout(written):
    script, files, positions = written
    assert len(files) >= 3  # on-demand rotation + size rotation
    for f in files:
        data = f.read_bytes()
        assert data[:4] == b"\xfebin"
    # A transaction never spans files: every position's start/end lies in its own file.
    for p in positions:
        assert p.end <= (files[0].parent / p.file).stat().st_size
    assert (files[0].parent / "binlog.index").read_text().splitlines() == [
        f"./{f.name}" for f in files
    ]


def test_mariadb_binlog_reads_every_file(written):
    _, files, _ = written
    text = mariadb_binlog(*files)
    assert "Rotate to binlog.000002  pos: 4" in text
    assert text.count("Ignorable event type 29") >= len(written[0].txns)
    assert "\tStop" in mariadb_binlog(files[-1], decode=False)  # clean close writes STOP


def test_decoded_values_match_what_mariadb_itself_logged(written):
    """Our all_types row images decode, in mariadb-binlog, exactly like MariaDB's own ones."""
    _, files, _ = written
    ours = row_blocks(mariadb_binlog(*files), "all_types")
    theirs = row_blocks(mariadb_binlog(FIXTURE), "all_types")
    assert len(theirs) == 3
    # INSERT x3, then UPDATE (WHERE + SET images) and DELETE.
    assert ours[:3] == theirs
    first = ours[0]
    for expected in (
        "@1=1 ",
        "@14=-12345678.90 ",
        "@15=12345678901234567890.0123456789 ",
        "@17='héllo' ",
        "@30='2024:02:29' ",
        "@32='-00:00:01.500' ",
        "@36='1000-01-01 00:00:00.000001' ",
        "@38=1700000000.1234 ",
        "@39=2155 ",
        "@41=b'101010101010' ",
    ):
        assert any(line.startswith(expected) for line in first), expected
    assert all(line.split(" ")[0].endswith("=NULL") for line in ours[2][1:])


def test_big_rows_and_many_tables_decode(written):
    _, files, _ = written
    text = mariadb_binlog(*files)
    for k in range(12):
        assert len(row_blocks(text, f"t{k}")) == 6
    big = row_blocks(text, "big")
    assert len(big) == 2
    assert re.match(r"@2='.*' /\* LONGBLOB", big[1][1])


def test_apply_to_real_mariadb(written, mariadb_server):
    script, files, _ = written
    dump = subprocess.run(
        ["mariadb-binlog", "--no-defaults", *[str(f) for f in files]],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    res = subprocess.run(mariadb_server.client_args(), input=dump, capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr.decode(errors="replace")
    setup = [
        "CREATE DATABASE exp DEFAULT CHARSET utf8mb4",
        f"CREATE TABLE exp.all_types LIKE {DB}.all_types",
    ]
    mariadb_server.sql(";\n".join(setup + script.expected_sql) + ";")
    tables = ["all_types", "big", *[f"t{k}" for k in range(12)]]
    for table in tables:
        q = "SET time_zone = '+00:00'; SELECT * FROM {db}.`" + table + "` ORDER BY 1"
        got = mariadb_server.sql(q.format(db=DB))
        want = mariadb_server.sql(q.format(db="exp"))
        assert got == want, table
        assert got.strip(), table
    assert mariadb_server.sql(f"SELECT COUNT(*) FROM {DB}.all_types").strip() == str(
        len(fd.ROWS) - 1
    )
    assert (
        mariadb_server.sql(f"SELECT i, vc FROM {DB}.all_types WHERE id = 1").strip()
        == "42\tchanged"
    )
