"""`cdc locate` with `[dumper] streams` > 1 (cdc_cli/commands/locate.py): a TSO is looked up in
every stream (where each stream is at that TSO), a position in the stream named; on files
written here, one directory per stream."""

from __future__ import annotations

import pytest

from binlog_writer import BinlogWriter, FsyncPolicy
from cdc.binlog.events import XidEvent, cts_mark
from cdc.binlog.query import QueryEvent
from cdc.streams import stream_dir
from cdc_cli.main import main
from tests.dumper.pipeline.fakes import config


@pytest.fixture
def streams_config(tmp_path):
    """Two streams: stream 0 holds TSOs 10, 20, 30; stream 1 holds 15 and 25."""
    cfg = config(tmp_path / "binlog")
    cfg.dumper.streams = 2
    for stream, tsos in ((0, (10, 20, 30)), (1, (15, 25))):
        writer = BinlogWriter(stream_dir(cfg.dumper, stream), fsync=FsyncPolicy.never())
        for tso in tsos:
            writer.append_transaction(
                [QueryEvent(b"BEGIN"), QueryEvent(b"x" * 40), XidEvent(tso), cts_mark(tso)]
            )
        writer.close()
    path = tmp_path / "cdc.toml"
    cfg.dump(path)
    return str(path)


def locate(config_path: str, capsys, *args: str) -> list[str]:
    assert main(["locate", "--config", config_path, *args]) == 0
    return capsys.readouterr().out.strip().splitlines()


def test_a_tso_in_every_stream_and_in_one(streams_config, capsys):
    zero, one = locate(streams_config, capsys, "--tso", "12")
    assert zero.startswith("stream 0: binlog.000001:") and "tso=20 " in zero
    assert one.startswith("stream 1: binlog.000001:") and "tso=15 " in one
    zero, one = locate(streams_config, capsys, "--tso", "26")
    assert "tso=30 " in zero and one.startswith("stream 1: - (no transaction at or after TSO 26")
    (only,) = locate(streams_config, capsys, "--tso", "12", "--stream", "1")
    assert "tso=15 " in only and not only.startswith("stream")
    where = only.split()[0]
    assert locate(streams_config, capsys, "--pos", where, "--stream", "1") == [only]


@pytest.mark.parametrize(
    "args, error",
    [
        (["--pos", "binlog.000001:4"], "name the stream"),
        (["--tso", "1", "--stream", "2"], "streams is 2"),
        (["--tso", "31"], "stream 0: no transaction at or after TSO 31"),
    ],
)
def test_what_cannot_be_located(streams_config, capsys, args, error):
    assert main(["locate", "--config", streams_config, *args]) == 1
    assert error in capsys.readouterr().err
