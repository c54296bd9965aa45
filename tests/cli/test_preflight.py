"""`cdc preflight` and `cdc start`'s refusal, against real mariadbd servers (a throw-away
cluster of its own: the tests set wrong settings on its DN and put them back): a cluster set up
as the local cluster sets it up passes; a DN set to STATEMENT, a MINIMAL row image, a duplicate
server_id, a user without grants each fail with the setting named and exit 1, and `cdc start`
refuses in the same words; a DN that cannot be reached is reported but is no refusal."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from pathlib import Path

import pymysql
import pytest

from cdc.config import Config, NodeConfig, load
from cdc_cli.commands.preflight import PreflightRefused, refuse_wrong_settings
from cdc_cli.main import main
from cdc_equipment.local_cluster.testing import free_base_port, throwaway_cluster
from dumper.preflight import NodeFacts, judge, preflight


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    cluster = throwaway_cluster(
        tmp_path_factory.mktemp("preflight") / "cluster", dns=2, spare_dns=0
    )
    try:
        yield cluster
    finally:
        cluster.down()


def sql(node: NodeConfig, *statements: str, user: str = "root", password: str = "") -> None:
    conn = pymysql.connect(host=node.host, port=node.port, user=user, password=password)
    try:
        with conn.cursor() as cur:
            for s in statements:
                cur.execute(s)
    finally:
        conn.close()


def fresh_binlog(node: NodeConfig) -> None:
    """A new binlog file and none before it: what the next tests read starts here."""
    conn = pymysql.connect(host=node.host, port=node.port, user="root")
    try:
        with conn.cursor() as cur:
            cur.execute("FLUSH BINARY LOGS")
            cur.execute("SHOW MASTER STATUS")
            cur.execute(f"PURGE BINARY LOGS TO '{cur.fetchone()[0]}'")
    finally:
        conn.close()


@contextlib.contextmanager
def global_set(node: NodeConfig, name: str, value):
    conn = pymysql.connect(host=node.host, port=node.port, user="root")
    with conn.cursor() as cur:
        cur.execute(f"SELECT @@global.{name}")
        (old,) = cur.fetchone()
        cur.execute(f"SET GLOBAL {name} = %s", (value,))
    try:
        yield
    finally:
        with conn.cursor() as cur:
            cur.execute(f"SET GLOBAL {name} = %s", (old,))
        conn.close()


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_a_cluster_set_up_right_passes(small, capsys):
    rc, out, _ = run(capsys, "preflight", "--config", str(small.config_file))
    assert rc == 0, out
    assert out.strip().endswith("0 problem(s), 0 unreachable, 0 warning(s): all good")
    rc, out, _ = run(capsys, "preflight", "--config", str(small.config_file), "--json")
    report = json.loads(out)
    assert rc == 0 and report["ok"] and len(report["nodes"]) == 3
    assert all(n["variables"]["binlog_format"] == "ROW" for n in report["nodes"])


@pytest.mark.parametrize(
    "name, value, words",
    [
        ("binlog_format", "STATEMENT", "binlog_format is STATEMENT, must be ROW"),
        ("binlog_format", "MIXED", "binlog_format is MIXED, must be ROW"),
        ("binlog_row_image", "MINIMAL", "binlog_row_image is MINIMAL, must be FULL"),
        ("binlog_row_metadata", "MINIMAL", "binlog_row_metadata is MINIMAL, must be FULL"),
        ("binlog_checksum", "NONE", "binlog_checksum is NONE, must be CRC32"),
    ],
)
def test_a_wrong_binlog_setting_fails_and_start_refuses(small, capsys, name, value, words):
    cfg = load(small.config_file)
    dn = cfg.dn[0]
    with global_set(dn, name, value):
        rc, out, _ = run(capsys, "preflight", "--config", str(small.config_file))
        assert rc == 1
        (line,) = [x for x in out.splitlines() if words in x]
        assert line.startswith(f"{dn.name} ({dn.address}): ")
        assert f"fix: '{name}=" in line and "SET GLOBAL" in line
        # `cdc start` refuses before it starts anything, with the same line.
        rc, _, err = run(capsys, "start", "--config", str(small.config_file))
        assert rc == 1
        assert "refusing to start" in err and line in err
    assert not (Path(cfg.dumper.binlog_dir)).exists()  # nothing was started


def test_a_duplicate_server_id_fails(small, capsys):
    cfg = load(small.config_file)
    with global_set(cfg.dn[1], "server_id", cfg.gms.server_id):
        rc, out, _ = run(capsys, "preflight", "--config", str(small.config_file))
    assert rc == 1
    assert f"server_id is {cfg.gms.server_id} on each, must be unique" in out
    assert "gms (" in out and f"{cfg.dn[1].name} (" in out
    # ... and one equal to the server_id the pipeline's own dump of a DN registers as.
    dump_id = cfg.pipeline.dump_server_id_base + cfg.dn[0].id
    with global_set(cfg.dn[1], "server_id", dump_id):
        rc, out, _ = run(capsys, "preflight", "--config", str(small.config_file))
    assert rc == 1 and f"server_id is {dump_id}, the server_id the pipeline's dump" in out


def test_a_user_without_grants_fails_naming_each_grant(small, capsys, tmp_path):
    cfg = load(small.config_file)
    dn = cfg.dn[0]
    sql(
        dn,
        "CREATE USER IF NOT EXISTS weak@'%' IDENTIFIED BY 'w'",
        "GRANT REPLICATION SLAVE ON *.* TO weak@'%'",
    )
    try:
        weak = dataclasses.replace(dn, user="weak", password="w")
        mine = dataclasses.replace(cfg, dn=[weak, *cfg.dn[1:]])
        report = preflight(mine)
        lines = [p.line() for p in report.failures]
        assert all(line.startswith(f"{dn.name} (") for line in lines), lines
        for grant in (
            "GRANT BINLOG MONITOR ON *.* TO 'weak'@'%';",
            "GRANT SELECT ON *.* TO 'weak'@'%';",
            "GRANT INSERT ON `__cdc__`.* TO 'weak'@'%';",
            "GRANT UPDATE ON `__cdc__`.* TO 'weak'@'%';",
            "GRANT DELETE ON `__cdc__`.* TO 'weak'@'%';",
        ):
            assert any(line.endswith(grant) for line in lines), (grant, lines)
        (warning,) = [p for p in report.problems if p.severity == "warn"]
        assert warning.line().startswith("warning: ") and "CONNECTION ADMIN" in warning.line()
        assert not any("REPLICATION SLAVE" in line for line in lines)
        with pytest.raises(PreflightRefused, match="GRANT BINLOG MONITOR"):
            refuse_wrong_settings(mine)
        # Granted as docs/deploy.md says: nothing left.
        sql(
            dn,
            "GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO weak@'%'",
            "GRANT SELECT, INSERT, UPDATE, DELETE ON `__cdc__`.* TO weak@'%'",
            "GRANT CONNECTION ADMIN ON *.* TO weak@'%'",
        )
        assert preflight(mine).problems == []
        # A wrong password is a refused login, a wrong setting: not a node to wait for.
        bad = dataclasses.replace(cfg, dn=[dataclasses.replace(weak, password="x"), *cfg.dn[1:]])
        (problem,) = preflight(bad).failures
        assert problem.setting == "login" and "1045" in problem.found
    finally:
        sql(dn, "DROP USER IF EXISTS weak@'%'")


def test_an_unreachable_dn_is_reported_but_no_refusal(small, capsys):
    cfg = load(small.config_file)
    gone = dataclasses.replace(cfg.dn[1], port=free_base_port(0))  # nothing listens there
    mine = dataclasses.replace(cfg, dn=[cfg.dn[0], gone])
    report = preflight(mine, connect_timeout=1.0)
    assert not report.ok and not report.failures
    (problem,) = report.unreachable
    assert problem.node == f"{gone.name} ({gone.address})" and "not possible" in problem.found
    refuse_wrong_settings(mine)  # `cdc start` would start and wait for it


def facts(name: str, role: str, server_id: int, offset_ms: float, **variables: str) -> NodeFacts:
    return NodeFacts(
        name,
        role,
        "127.0.0.1:1",
        variables={"server_id": str(server_id), **variables},
        global_privileges={"ALL PRIVILEGES"},
        clock_offset_ms=offset_ms,
        rtt_ms=2.0,
    )


def test_clock_skew_beyond_the_threshold_fails():
    """(Pure: the servers here share this machine's clock.) The GMS's clock is the TSO's;
    each DN is compared with it, the GMS with this machine's; a round trip's half is slack."""
    ok = {
        "log_bin": "ON",
        "binlog_format": "ROW",
        "binlog_row_image": "FULL",
        "binlog_row_metadata": "FULL",
        "binlog_checksum": "CRC32",
    }
    cfg = Config()
    nodes = [facts("gms", "gms", 1000, 300.0), facts("dn1", "dn", 1, 900.0, **ok)]
    assert judge(cfg, nodes) == []
    nodes = [facts("gms", "gms", 1000, 1500.0), facts("dn1", "dn", 1, 2600.0, **ok)]
    problems = judge(cfg, nodes)
    assert [p.setting for p in problems] == ["clock", "clock"]
    assert "+1500 ms from this machine's" in problems[0].line()
    assert "+1100 ms from the GMS's" in problems[1].line()
    assert judge(cfg, nodes, max_skew_ms=5000) == []


def test_cn_conformance_passes_the_reference_cn_and_names_writes_outside_the_protocol(
    small, capsys
):
    """`--cn-conformance` on the DN binlogs: the reference CN's traffic conforms; a plain
    write, another program's XA, an XA COMMIT ONE PHASE, a CN branch without its commit record
    or without a TraceId are each named with their position. (Last: it leaves such writes.)"""
    config = str(small.config_file)
    for node in load(small.config_file).dn:  # (the checksum test left a file without CRCs)
        fresh_binlog(node)
    assert main(["cn", "init", "--config", config]) == 0
    assert (
        main(["workload", "transfer", "--config", config, "--threads", "2", "--duration", "1"]) == 0
    )
    capsys.readouterr()
    rc, out, _ = run(capsys, "preflight", "--config", config, "--cn-conformance", "--files", "1")
    assert rc == 0, out
    assert out.count(": conforms (") == 2 and "0 finding(s), 0 DN(s) unchecked: all good" in out
    cfg = load(small.config_file)
    dn = cfg.dn[0]
    conn = pymysql.connect(host=dn.host, port=dn.port, user="root", autocommit=True)
    with conn.cursor() as cur:
        cur.execute("SHOW TABLES FROM bank_p")
        table = f"bank_p.{cur.fetchone()[0]}"
        change = f"UPDATE {table} SET balance = balance + 1 LIMIT 1"
        cur.execute(change)  # a plain write
        for statement in ("XA START 'other-1'", change, "XA END 'other-1'"):
            cur.execute(statement)
        cur.execute("XA COMMIT 'other-1' ONE PHASE")  # (a plain write in the binlog too)
        for statement in ("XA START 'other-2'", change, "XA END 'other-2'", "XA PREPARE 'other-2'"):
            cur.execute(statement)
        cur.execute("XA COMMIT 'other-2'")
        xid = "'cdc-77','1',1"
        for statement in (f"XA START {xid}", f"/*CDC trace=1.1 cn=1 */ {change}", change):
            cur.execute(statement)
        for statement in (f"XA END {xid}", f"XA PREPARE {xid}", f"XA COMMIT {xid}"):
            cur.execute(statement)
    conn.close()
    rc, out, _ = run(capsys, "preflight", "--config", config, "--cn-conformance", "--files", "1")
    assert rc == 1
    mine = [line for line in out.splitlines() if line.startswith(f"{dn.name} (")]
    rules = [
        line.split("CN protocol: ", 1)[1].split(" at ")[0]
        for line in mine
        if "CN protocol: " in line
    ]
    assert rules == [
        "plain write",
        "plain write",
        "foreign XA",
        "no TraceId",
        "no commit record",
    ], out
    assert all(f"{table}" in line for line in mine[:4]), out
    assert "txn 77 (prepared at binlog." in out and "5 finding(s)" in out
    assert sum(": conforms (" in line for line in out.splitlines()) == 1  # dn2's


def test_a_dn_turned_to_statement_under_a_running_pipeline_stops_it_loudly(small, capsys):
    """The whole pipeline (`cdc start --background`, which passes preflight on this cluster):
    a DN set to STATEMENT and written to stops it, the DN and the statement named in its log,
    `cdc status` shows the crash, and the statement is nowhere in the global binlog."""
    config = str(small.config_file)
    cfg = load(small.config_file)
    dn = cfg.dn[1]
    rc, out, err = run(capsys, "start", "--config", config, "--background")
    assert rc == 0 and "started" in out, out + err
    log = Path(cfg.dumper.binlog_dir).parent / "pipeline" / "pipeline.log"
    try:
        conn = pymysql.connect(host=dn.host, port=dn.port, user="root", autocommit=True)
        with conn.cursor() as cur:
            cur.execute("SHOW TABLES FROM bank_p")
            table = f"bank_p.{cur.fetchone()[0]}"
            cur.execute("SET GLOBAL binlog_format = 'STATEMENT'")
        wrong = pymysql.connect(host=dn.host, port=dn.port, user="root", autocommit=True)
        statement = f"UPDATE {table} SET balance = balance + 0 WHERE id < 0 /* the STATEMENT */"
        with wrong.cursor() as cur:
            cur.execute(statement)
        wrong.close()
        deadline = time.monotonic() + 60
        while "logged as a statement" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        text = log.read_text()
        assert f"{dn.name}: MergeSource stopped: binlog." in text and "the STATEMENT" in text
        while True:  # the supervisor restarts it; it stops on the same event again
            rc, out, _ = run(capsys, "status", "--config", config)
            if "restarted" in out:
                break
            assert time.monotonic() < deadline, out
            time.sleep(0.5)
        binlog = b"".join(p.read_bytes() for p in Path(cfg.dumper.binlog_dir).glob("binlog.0*"))
        assert b"the STATEMENT" not in binlog and b"balance + 0" not in binlog
    finally:
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL binlog_format = 'ROW'")
        conn.close()
        run(capsys, "stop", "--config", config)
