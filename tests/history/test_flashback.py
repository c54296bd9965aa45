"""`cdc flashback` on a real pipeline (`cdc start`, 2 DNs): a bad UPDATE and a bad DELETE of
fb.items, made while other rows of it change, are undone through the CN; the table then equals
its read as of the range's start (a snapshot read pinned there, docs/snapshot-reads.md) except
the keys reported as conflicts, which keep their later values. The SQL output (`mariadb`) and
the binlog output (`mariadb-binlog | mariadb`) applied to a MariaDB server holding the table as
of the range's end give that same table. Points in every form resolve to the same boundary, and
bad points exit non-zero naming what is wrong."""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import re
import shutil
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pymysql
import pytest

from cdc.config import Config, DumperUser
from cdc.protocol import auth
from cdc_equipment.cn import ComputeNode
from cdc_equipment.local_cluster.testing import free_base_port, throwaway_cluster, throwaway_server
from tests.compat.conftest import cdc_start, wait_until_written

pytestmark = pytest.mark.skipif(
    not shutil.which("mariadb-binlog"), reason="mariadb-binlog not installed"
)

READER = ("fbreader", "fbpw")
ROWS = 200
BAD_UPDATE = range(1, 41)
BAD_DELETE = range(41, 71)
TRAFFIC = range(101, ROWS + 1)  # the other rows, changed all along
LATER = 5  # a bad row changed again after the range: a conflict
DDL = (
    "CREATE TABLE fb.items (id BIGINT NOT NULL PRIMARY KEY, v INT NOT NULL, "
    "note VARCHAR(40) NULL, at DATETIME(6) NULL, price DECIMAL(10,2) NULL, "
    "ts TIMESTAMP(3) NULL, d DATE NULL, t TIME(2) NULL, e ENUM('a','b','c') NULL, "
    "b BLOB NULL, f FLOAT NULL)"
)
COLUMNS = "id, v, note, at, price, ts, d, t, e, b, f"


def _row(i: int) -> str:
    """Row i's values: every kind of literal flashback spells (strings not ASCII, in hex)."""
    return (
        f"({i}, {i * 10}, 'row {i}', '2026-11-29 06:00:{i % 60:02d}.{i:06d}', {i}.25, "
        f"'2026-11-29 06:{i % 60:02d}:00.123', '2026-01-{1 + i % 28:02d}', '-{i}:01:02.50', "
        f"'{'abc'[i % 3]}', X'c3a900ff{i % 256:02x}', {i}.5)"
    )


def _cn_run(cfg: Config, *statements: str) -> int:
    """The statements in one CN transaction; its commit TSO."""

    async def go() -> int:
        cn = ComputeNode(cfg)
        await cn.start(recover=False)
        try:

            async def body(tx):
                for sql in statements:
                    await tx.execute(sql)

            _, tso = await cn.run_transaction(body)
            return tso
        finally:
            await cn.close()

    return asyncio.run(go())


async def _setup(cfg: Config) -> None:
    cn = ComputeNode(cfg)
    await cn.start()
    warnings.simplefilter("ignore", pymysql.Warning)
    try:
        await cn.execute_ddl(DDL, shard_key="id", partitions=4)
        values = ", ".join(_row(i) for i in range(1, ROWS + 1))
        await cn.run_transaction(
            lambda tx: tx.execute(f"INSERT INTO fb.items ({COLUMNS}) VALUES {values}")
        )
        await cn.flush_logs()  # a second file: the first can play a purged one
    finally:
        await cn.close()


def _flush_logs(cfg: Config) -> None:
    async def go() -> None:
        cn = ComputeNode(cfg)
        await cn.start(recover=False)
        try:
            await cn.flush_logs()
        finally:
            await cn.close()

    asyncio.run(go())


class Traffic:
    """CN updates of the TRAFFIC rows, in a thread, until stopped."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            asyncio.run(self._loop())
        except BaseException as exc:
            self.errors.append(exc)

    async def _loop(self) -> None:
        cn = ComputeNode(self.cfg)
        await cn.start(recover=False)
        rng = random.Random(42)
        try:
            while not self.stop.is_set():
                a, b = rng.sample(TRAFFIC, 2)
                await cn.run_transaction(lambda tx, a=a, b=b: _two(tx, a, b))
                await asyncio.sleep(0.01)
        finally:
            await cn.close()

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(60)
        assert not self.errors, self.errors


async def _two(tx, a: int, b: int) -> None:
    await tx.execute(f"UPDATE fb.items SET v = v + 1 WHERE id = {a}")
    await tx.execute(f"UPDATE fb.items SET note = CONCAT('t', v) WHERE id = {b}")


def _rows(conn) -> dict[int, tuple]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT {COLUMNS} FROM fb.items ORDER BY id")
        return {r[0]: tuple(r) for r in cur.fetchall()}


def _cn_rows(cfg: Config) -> dict[int, tuple]:
    async def go():
        cn = ComputeNode(cfg)
        await cn.start(recover=False)
        try:
            async with cn.transaction() as tx:
                res = await tx.execute(f"SELECT {COLUMNS} FROM fb.items")
            return {r[0]: tuple(r) for r in res.rows}
        finally:
            await cn.close()

    return asyncio.run(go())


def cdc(directory: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "cdc_cli.main",
            "flashback",
            "--config",
            str(directory / "cdc.toml"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _pin(cfg: Config) -> tuple[pymysql.Connection, str]:
    """A snapshot read of the dumper pinned now (docs/snapshot-reads.md), and where: the
    position SHOW MASTER STATUS gives inside it, as a point."""
    conn = pymysql.connect(
        host="127.0.0.1",
        port=cfg.dumper.port,
        user=READER[0],
        password=READER[1],
        read_timeout=120,
    )
    with conn.cursor() as cur:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        cur.execute("SHOW MASTER STATUS")
        file, pos = cur.fetchone()[:2]
    return conn, f"'{file}':{pos}"


@pytest.fixture(scope="module", params=["mysql", "mariadb"])
def undone(tmp_path_factory, request):
    """The whole story, once: traffic, a pinned read at the start, the bad statements, a
    later change of a bad row, `cdc flashback --apply` with both outputs written."""
    directory = tmp_path_factory.mktemp("flashback")
    cluster = throwaway_cluster(directory / "cluster", dns=2, spare_dns=0)
    try:
        cfg = cluster.config()
        cfg.dumper.binlog_dir = str(directory / "binlog")
        cfg.dumper.port = free_base_port(0)
        if request.param == "mariadb":  # MariaDB GTIDs (domain-server-n), no BEGIN events
            cfg.dumper.flavor = "mariadb"
            cfg.dumper.version = "10.11.19-MariaDB-cdc-log"
            cfg.dumper.gtid_domain_id = 3
        cfg.dumper.users = [
            *cfg.dumper.users,
            DumperUser(READER[0], auth.native_hash(READER[1]), select=True),
        ]
        binlog = Path(cfg.dumper.binlog_dir)
        log = directory / "pipeline.log"
        with cdc_start(cfg, directory):
            asyncio.run(asyncio.wait_for(_setup(cfg), 180))
            traffic = Traffic(cfg)
            time.sleep(1.5)
            pinned, start = _pin(cfg)
            time.sleep(0.5)
            ids = ", ".join(map(str, BAD_UPDATE))
            _cn_run(
                cfg,
                "UPDATE fb.items SET v = -1, note = 'bad', price = NULL, ts = NULL, "
                f"d = '2000-01-01', t = '00:00:00', e = 'c', b = X'00', f = 0.25 WHERE id IN ({ids})",
            )
            time.sleep(0.3)
            ids = ", ".join(map(str, BAD_DELETE))
            end_tso = _cn_run(cfg, f"DELETE FROM fb.items WHERE id IN ({ids})")
            wait_until_written(binlog, end_tso, log)
            time.sleep(0.5)
            # The range's end: a second read pinned there (traffic goes on after it).
            pinned_end, end = _pin(cfg)
            _flush_logs(cfg)  # the range's files can all be archived (never the last one)
            later_tso = _cn_run(cfg, f"UPDATE fb.items SET v = 555 WHERE id = {LATER}")
            time.sleep(1.0)
            traffic.finish()
            last = _cn_run(cfg, "UPDATE fb.items SET note = 'last' WHERE id = 100")
            wait_until_written(binlog, last, log)
            as_of_start = _rows(pinned)  # the snapshot read pinned at the range's start
            pinned.close()
            as_of_end = _rows(pinned_end)
            pinned_end.close()
            before = _cn_rows(cfg)  # the table at the range's end and after: what flashback meets
            out = cdc(
                directory,
                "fb.items",
                "--from",
                start,
                "--to",
                end,
                "--apply",
                "--sql",
                str(directory / "undo.sql"),
                "--binlog",
                str(directory / "undo.bin"),
            )
            assert out.returncode == 0, out.stderr
            after = _cn_rows(cfg)
            yield {
                "cfg": cfg,
                "directory": directory,
                "binlog": binlog,
                "start": start,
                "end_tso": end_tso,
                "later_tso": later_tso,
                "as_of_start": as_of_start,
                "end": end,
                "as_of_end": as_of_end,
                "before": before,
                "after": after,
                "stderr": out.stderr,
            }
    finally:
        cluster.down()


def _conflict_keys(stderr: str) -> set[int]:
    keys = set()
    for line in stderr.splitlines():
        if line.startswith("conflict: fb.items key ("):
            keys.add(int(line.split("key (")[1].split(",")[0]))
    return keys


def test_bad_update_and_delete_are_undone_except_conflicts(undone):
    conflicts = _conflict_keys(undone["stderr"])
    assert LATER in conflicts, undone["stderr"]
    assert conflicts - {LATER} <= set(TRAFFIC), conflicts  # no bad row but the one changed later
    start, before, after = undone["as_of_start"], undone["before"], undone["after"]
    assert len(start) == ROWS
    assert all(before[i][2] == "bad" for i in BAD_UPDATE if i != LATER)
    assert not any(i in before for i in BAD_DELETE)
    at_end = undone["as_of_end"]
    changed_after = {k for k in range(1, ROWS + 1) if at_end.get(k) != before.get(k)}
    assert LATER in changed_after and 100 in changed_after
    for key in range(1, ROWS + 1):
        if key in conflicts:
            assert after.get(key) == before.get(key), key  # never overwritten
        elif key in changed_after:  # changed after the range only: not flashback's to touch
            assert after.get(key) == before.get(key), key
        else:  # the range undone: as of its start
            assert after.get(key) == start.get(key), (key, after.get(key), start.get(key))
    for key in [*BAD_UPDATE, *BAD_DELETE]:
        if key != LATER:
            assert after[key] == start[key]
    assert after[LATER][1] == 555
    assert "applied" in undone["stderr"]


def _scratch(undone):
    server = throwaway_server(undone["directory"] / "scratch", server_id=911, name="fbscratch")
    return server


def _load(server, rows: dict[int, tuple]) -> None:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS fb")
            cur.execute("CREATE DATABASE fb")
            cur.execute(DDL)
            for r in rows.values():
                cur.execute(
                    f"INSERT INTO fb.items ({COLUMNS}) VALUES ({', '.join(['%s'] * len(r))})", r
                )
        conn.commit()
    finally:
        conn.close()


def _client(server) -> list[str]:
    return ["mariadb", "--no-defaults", "-h", server.host, "-P", str(server.port), "-u", "root"]


def test_sql_and_binlog_outputs_give_the_same_table(undone):
    server = _scratch(undone)
    try:
        _load(server, undone["before"])
        sql = (undone["directory"] / "undo.sql").read_bytes()
        res = subprocess.run(_client(server), input=sql, capture_output=True, timeout=120)
        assert res.returncode == 0, res.stderr.decode()
        conn = server.connect()
        by_sql = _rows(conn)
        conn.close()
        _load(server, undone["before"])
        dump = subprocess.run(
            [
                "mariadb-binlog",
                "--no-defaults",
                "--verify-binlog-checksum",
                str(undone["directory"] / "undo.bin"),
            ],
            capture_output=True,
            timeout=120,
        )
        assert dump.returncode == 0, dump.stderr.decode()
        res = subprocess.run(_client(server), input=dump.stdout, capture_output=True, timeout=120)
        assert res.returncode == 0, res.stderr.decode()
        conn = server.connect()
        by_binlog = _rows(conn)
        conn.close()
    finally:
        server.stop()
    assert by_sql == by_binlog
    assert by_sql == undone["after"]


def test_points_in_every_form_name_the_same_boundary(undone):
    from history import RetainedFiles, resolve

    files = RetainedFiles(undone["binlog"])
    by_tso = resolve(f"TSO {undone['end_tso']}", files)
    assert by_tso.tso == undone["end_tso"]
    end = resolve(undone["end"], files)
    assert end.tso >= undone["end_tso"]
    assert resolve(f"TSO {end.tso}", files) == end
    assert resolve(f"GTID '{by_tso.gtid}'", files) == by_tso
    assert resolve(f"'{by_tso.file}':{by_tso.pos}", files) == by_tso
    assert resolve(f"TSO {undone['later_tso'] - 1}", files).tso < undone["later_tso"]
    assert resolve(f"TSO {undone['later_tso']}", files).tso == undone["later_tso"]
    # A time: after the last transaction of its millisecond (the TSO's physical part).
    ms = undone["end_tso"] >> 22
    when = dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")
    at = resolve(f"TIMESTAMP '{when}'", files)
    assert at.tso >= undone["end_tso"] and at.tso >> 22 == ms
    assert resolve(f"TSO {((ms + 1) << 22) - 1}", files) == at
    start = resolve(undone["start"], files)
    file, pos = undone["start"].split(":")
    assert (start.file, start.pos) == (file.strip("'"), int(pos))


def test_bad_points_exit_non_zero_with_a_clear_message(undone, tmp_path):
    directory = undone["directory"]
    start = undone["start"]
    cases = [
        (("--from", "12345"), "ambiguous"),
        (("--from", "TSO x"), "malformed"),
        (("--from", "TIMESTAMP '2999-01-01 00:00:00'"), "in the future"),
        (("--from", start, "--to", f"TSO {undone['end_tso'] << 1}"), "in the future"),
        (("--from", "'binlog.000999':4"), "not written yet"),
    ]
    by_tso = None
    from history import RetainedFiles, resolve

    by_tso = resolve(f"TSO {undone['end_tso']}", RetainedFiles(undone["binlog"]))
    cases.append((("--from", f"'{by_tso.file}':{by_tso.pos + 1}"), "inside the transaction"))
    unwritten = re.sub(r"\d+$", "999999", by_tso.gtid)
    cases.append((("--from", f"GTID '{unwritten}'"), "not written yet"))
    cases.append((("--from", f"'{by_tso.file}':{by_tso.pos}", "--to", start), "before its start"))
    for args, says in cases:
        out = cdc(directory, "fb.items", *args)
        assert out.returncode == 1, (args, out.stdout, out.stderr)
        assert says in out.stderr, (args, out.stderr)
        assert "Traceback" not in out.stderr
    # Before the oldest file: a copy of the files without the first one (as if purged).
    copy = tmp_path / "binlog"
    shutil.copytree(undone["binlog"], copy)
    names = (copy / "binlog.index").read_text().split()
    if len(names) < 2:
        pytest.skip("one binlog file only")
    (copy / names[0].removeprefix("./")).unlink()
    (copy / "binlog.index").write_text("\n".join(names[1:]) + "\n")
    first = names[0].removeprefix("./")
    for point, says in ((f"'{first}':4", "was purged"), ("TSO 1", "before the oldest retained")):
        out = cdc(directory, "fb.items", "--dir", str(copy), "--from", point)
        assert out.returncode == 1, out.stderr
        assert says in out.stderr and "oldest readable point" in out.stderr, out.stderr


def test_force_undoes_the_conflicts_too(undone):
    """The plan with --force holds the conflicting keys' changes; without, none of them."""
    from history import RetainedFiles, chosen, plan, resolve

    files = RetainedFiles(undone["binlog"])
    start, end = resolve(undone["start"], files), resolve(undone["end"], files)
    want = chosen("fb.items")
    skipped, forced = plan(files, start, end, want), plan(files, start, end, want, force=True)
    assert skipped.conflicts == forced.conflicts and skipped.conflicts
    conflict_keys = {c.key for c in skipped.conflicts}

    def keys(p):
        return {k for t in p.undo for c in t.changes for r in c.rows for k in r.keys(c.shape)}

    assert not keys(skipped) & conflict_keys
    assert conflict_keys <= keys(forced)
    assert forced.rows > skipped.rows
    assert [t.tso for t in forced.undo] == sorted((t.tso for t in forced.undo), reverse=True)
    assert plan(files, start, end, chosen("nodb")).undo == []


def test_sql_to_stdout_up_to_the_newest_transaction(undone):
    """Without --to the range ends after the newest transaction written (here: the undo's own);
    without --binlog or --apply the SQL goes to stdout, the summary to stderr."""
    from history import RetainedFiles

    files = RetainedFiles(undone["binlog"])
    newest = files.newest()
    assert files.end_point() == resolve_text(files, f"'{newest.file}':{newest.end}")
    out = cdc(undone["directory"], "fb", "--from", undone["start"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("-- flashback of")
    assert f"{files.end_point()}]" in out.stdout.splitlines()[0]
    assert "BEGIN;" in out.stdout and "conflicts" in out.stderr
    # The same from the dumper over the MySQL protocol (its served files copied first).
    port = undone["cfg"].dumper.port
    remote = cdc(
        undone["directory"], "fb", "--from", undone["start"], "--server", f"127.0.0.1:{port}"
    )
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout == out.stdout
    bad = cdc(undone["directory"], "fb", "--from", undone["start"], "--server", "127.0.0.1:1")
    assert bad.returncode == 1 and "copying the global binlog from 127.0.0.1:1" in bad.stderr


def resolve_text(files, text):
    from history import resolve

    return resolve(text, files)


def _copies(undone, tmp_path) -> tuple[Path, Path, Path, list[str]]:
    """Two byte-identical copies of the files: one as it is, one purged by the server's own
    purge into an archive directory (every file but the last, so the range is archived)."""
    from dumper.server.store.binlog_files import BinlogFiles, check_archive

    plain, live, archive = tmp_path / "plain", tmp_path / "live", tmp_path / "archive"
    shutil.copytree(undone["binlog"], plain)
    shutil.copytree(plain, live)
    files = BinlogFiles(live, archive=check_archive(archive))
    gone = files.purge(files.names()[:-1])
    assert gone and files.names() == [(plain / "binlog.index").read_text().split()[-1][2:]]
    assert sorted(p.name for p in archive.iterdir()) == gone
    return plain, live, archive, gone


def test_points_and_flashback_reach_into_the_archive(undone, tmp_path):
    """Points of every form in archived files resolve as before the purge; `cdc flashback`
    over a range in archived files (its conflict scan crossing into the live file) prints the
    same SQL and conflicts; pruned from the archive, the oldest point named is the archive's."""
    from history import PointBeforeOldest, RetainedFiles, resolve

    plain, live, archive, gone = _copies(undone, tmp_path)
    whole, archived = RetainedFiles(plain), RetainedFiles(live, archive=archive)
    assert archived.names == whole.names
    start, end = resolve(undone["start"], whole), resolve(undone["end"], whole)
    assert start.file in gone and end.file in gone
    later = resolve(f"TSO {undone['later_tso']}", whole)
    assert later.file not in gone  # the conflict is in the live file
    ms = undone["end_tso"] >> 22
    when = dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")
    for text in (
        undone["start"],
        undone["end"],
        f"TSO {undone['end_tso']}",
        f"TIMESTAMP '{when}'",
        f"GTID '{end.gtid}'",
        f"GTID '{start.gtid}'",
        f"TSO {undone['later_tso']}",
        "TSO 1",
    ):
        assert resolve(text, archived) == resolve(text, whole), text
    assert archived.end_point() == whole.end_point()

    # --force: the fixture's undo changed every bad row again since (all conflicts now).
    args = ("fb.items", "--from", undone["start"], "--to", undone["end"], "--sql", "-", "--force")
    want = cdc(undone["directory"], *args, "--dir", str(plain))
    got = cdc(undone["directory"], *args, "--dir", str(live), "--archive", str(archive))
    assert want.returncode == 0 and got.returncode == 0, (want.stderr, got.stderr)
    assert got.stdout == want.stdout and "BEGIN;" in got.stdout
    assert got.stderr == want.stderr and LATER in _conflict_keys(got.stderr)
    without = cdc(undone["directory"], *args, "--dir", str(live))  # the archive not given
    assert without.returncode == 1 and "was purged" in without.stderr, without.stderr

    # `cdc locate` with the configured archive finds an archived transaction by all three names.
    cfg = undone["cfg"]
    config = tmp_path / "cdc.toml"
    saved = (cfg.dumper.binlog_dir, cfg.dumper.archive_dir)
    cfg.dumper.binlog_dir, cfg.dumper.archive_dir = str(live), str(archive)
    try:
        cfg.dump(str(config))
    finally:
        cfg.dumper.binlog_dir, cfg.dumper.archive_dir = saved
    found, at = [], resolve(f"TSO {undone['end_tso']}", whole)  # after that transaction
    assert at.file in gone
    for args in (
        ("--tso", str(undone["end_tso"])),
        ("--gtid", at.gtid),
        ("--pos", f"{at.file}:{at.pos - 1}"),
    ):
        res = subprocess.run(
            [sys.executable, "-m", "cdc_cli.main", "locate", "--config", str(config), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 0, res.stderr
        found.append(res.stdout.strip())
    assert found[0].startswith(f"{at.file}:") and f"end={at.pos} " in found[0], found
    assert found == [found[0]] * 3, found

    # The operator prunes the archive's oldest file: the oldest point is the next archived one.
    (archive / gone[0]).unlink()
    pruned = RetainedFiles(live, archive=archive)
    with pytest.raises(PointBeforeOldest) as before:
        resolve("TSO 1", pruned)
    says = f"before the oldest retained file {gone[1]} (archived in {archive})"
    assert says in str(before.value), before.value
    assert f"the oldest readable point is '{gone[1]}':" in str(before.value)
    out = cdc(
        undone["directory"], "fb.items", "--from", "TSO 1", "--dir", str(live),
        "--archive", str(archive),
    )  # fmt: skip
    assert out.returncode == 1 and says in out.stderr, out.stderr
