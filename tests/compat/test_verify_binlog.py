"""`cdc verify-binlog` on the real pipeline output: it passes on the global binlog (served by the
dumper, and from the files), and fails, naming the transaction, when the ground truth and the
binlog disagree."""

from __future__ import annotations

import json

import pytest

from cdc_cli.main import main
from cdc_equipment.checks.verify_binlog import BinlogRead, check, read_server
from cdc_equipment.ground_truth import read as read_ground_truth


@pytest.fixture(scope="module")
def binlog(pipeline) -> BinlogRead:
    """The global binlog read once by python-mysql-replication, for the tampering tests."""
    return read_server(pipeline.host, pipeline.port, pipeline.user, pipeline.password)


def run_cli(capsys, *args: str) -> tuple[int, str]:
    code = main(["verify-binlog", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_passes_on_the_served_global_binlog(pipeline, capsys):
    code, out = run_cli(capsys, "--config", str(pipeline.config_path))
    assert code == 0, out
    assert "global binlog OK" in out
    # The summary table names every invariant, and the transfer replay really ran.
    for name in (
        "binlog structure",
        "strict TSO order",
        "every committed txn exactly once",
        "nothing not in the ground truth",
        "transfer total (bank.accounts)",
        "rows match the DDL history",
    ):
        assert f"\n{name}" in out, out
    transfers = next(line for line in out.splitlines() if line.startswith("transfer total"))
    assert f"{pipeline.transfers.committed} transfers" in transfers, out
    accounts, total = pipeline.totals
    assert f"{accounts} accounts, total {total} at the end" in transfers, out


def test_passes_on_the_files(pipeline, capsys):
    code, out = run_cli(
        capsys,
        "--config",
        str(pipeline.config_path),
        "--from-files",
        str(pipeline.binlog_dir),
        "--ground-truth",
        str(pipeline.truth),
    )
    assert code == 0, out
    assert "checksums (mariadb-binlog)" in out and "global binlog OK" in out


def test_fails_on_a_ground_truth_entry_missing_from_the_binlog(pipeline, binlog, tmp_path, capsys):
    entries = read_ground_truth(pipeline.truth)
    last = entries[-1]
    extra = {"tso": last["tso"] + 12345, "txn_id": 987654321, "participants": [1, 2]}
    extra |= {"kind": "txn", "recovered": False}
    tampered = tmp_path / "truth.jsonl"
    tampered.write_text(pipeline.truth.read_text() + json.dumps(extra) + "\n", encoding="utf-8")
    code, out = run_cli(
        capsys, "--config", str(pipeline.config_path), "--ground-truth", str(tampered)
    )
    assert code == 1, out
    assert (
        f"TSO {extra['tso']} (txn 987654321, kind txn, DNs [1, 2]) is not in the global binlog"
        in out
    ), out
    assert "GLOBAL BINLOG INVALID: 1 violation(s)" in out


def test_fails_on_a_binlog_transaction_the_cn_never_committed(pipeline, binlog):
    truth = read_ground_truth(pipeline.truth)
    transfer = next(t for t in binlog.txns if t.changes and t.changes[0].kind == "update")
    report = check(binlog, [e for e in truth if e["tso"] != transfer.tso])
    assert not report.ok
    assert report.violations == [
        f"TSO {transfer.tso} at {transfer.at} (2 rows of bank.accounts) is not a committed CN "
        "transaction of the ground truth"
    ]


def test_fails_on_a_duplicated_or_reordered_transaction(pipeline, binlog):
    truth = read_ground_truth(pipeline.truth)
    txns = list(binlog.txns)
    i = next(i for i, t in enumerate(txns) if i > 0 and t.changes and t.changes[0].kind == "update")
    # The same transaction twice: counted twice and out of order; its replay breaks the history.
    dup = BinlogRead(txns=[*txns[: i + 1], txns[i], *txns[i + 1 :]], first_file="binlog.000001")
    report = check(dup, truth)
    text = report.render()
    assert f"TSO {txns[i].tso} (txn" in text and "appears 2 times" in text, text
    assert "repeats" in text, text
    assert "before-image balance" in text, text


def test_fails_when_a_transfer_changes_the_total(pipeline, binlog):
    truth = read_ground_truth(pipeline.truth)
    txns = list(binlog.txns)
    transfer = next(t for t in txns if t.changes and t.changes[0].kind == "update")
    row = transfer.changes[0].rows[0]
    row["after_values"] = {**row["after_values"], "balance": row["after_values"]["balance"] + 1}
    try:
        report = check(binlog, truth)
    finally:
        row["after_values"]["balance"] -= 1
    assert f"TSO {transfer.tso} at {transfer.at} changes the total by +1" in report.violations


def test_fails_when_a_rows_event_lacks_a_column_of_the_ddl_history(pipeline, binlog):
    """The real TABLE_MAP of a transfer, its last column cut off: the schema check (replaying the
    real CREATE TABLE of bank.accounts) names the transaction, the table and both column sets."""
    truth = read_ground_truth(pipeline.truth)
    transfer = next(t for t in binlog.txns if t.changes and t.changes[0].kind == "update")
    change = transfer.changes[0]
    width, columns = change.width, change.columns
    assert width == len(columns) > 1
    change.width, change.columns = width - 1, columns[:-1]
    try:
        report = check(binlog, truth)
    finally:
        change.width, change.columns = width, columns
    [problem] = report.violations
    assert problem.startswith(f"TSO {transfer.tso} (GTID "), problem
    assert f"update rows of bank.accounts at {change.at}:" in problem, problem
    assert f"the DDL history has {width} columns (id " in problem, problem
    assert f"but the rows event has {width - 1} and its TABLE_MAP {width - 1} (" in problem
