"""`cdc locate` on the compat pipeline's files: a transaction found by its TSO, its GTID and a
position inside it is the same one, and matches what our codec reads from the files."""

from __future__ import annotations

import pytest

from cdc_cli.main import main
from tests.e2e.global_binlog import read_global_binlog


def locate(pipeline, capsys, *args: str) -> str:
    assert main(["locate", "--config", str(pipeline.config_path), *args]) == 0
    return capsys.readouterr().out.strip()


def test_tso_gtid_and_position_name_the_same_transaction(pipeline, capsys):
    txns = [t for t in read_global_binlog(pipeline.binlog_dir) if "::L" not in t.mark.decode()]
    for txn in (txns[1], txns[len(txns) // 2], txns[-1]):
        by_tso = locate(pipeline, capsys, "--tso", str(txn.tso))
        where, _, rest = by_tso.partition(" ")
        assert f"gtid={','.join(txn.gtids)} tso={txn.tso} mark={txn.mark.decode()}" in rest
        assert locate(pipeline, capsys, "--gtid", txn.gtids[0]) == by_tso
        file, pos = where.split(":")
        assert locate(pipeline, capsys, "--pos", f"{file}:{int(pos) + 20}") == by_tso


def test_unknown_names_are_errors(pipeline, capsys):
    uuid = read_global_binlog(pipeline.binlog_dir)[0].gtids[0].split(":")[0]
    for args in (["--gtid", f"{uuid}:999999999"], ["--pos", "binlog.000009:4"], ["--pos", "x"]):
        assert main(["locate", "--config", str(pipeline.config_path), *args]) == 1
        assert "cdc: error:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["locate", "--config", str(pipeline.config_path)])
