"""An idle stream's progress (docs/streams.md, "The restart protocol, per stream"): a batch is
written only to the streams it has a part for; the others are told the merge's progress at the
next checkpoint round (and before a sync), not once per batch, and a pipeline restart forgets a
progress not yet told (a stream restarted since may not hold its part of it)."""

from __future__ import annotations

from cdc.binlog.constants import EventType
from cdc.pauses import Pauses
from dumper.pipeline import LeaderStats
from dumper.pipeline.binlog_output import gtid_layout
from dumper.streams import StreamOutput
from merge_source.classifier import table_name
from tests.dumper.streams.test_stream_process import CLUSTER_UUID, config
from tests.dumper.test_txn_encoder import transactions  # noqa: F401 (a fixture)


def on_stream_0(cfg, txns) -> None:
    tables = {
        table_name(bytes(e))
        for t in txns
        for st in t.statements
        for e in st.events
        if e[4] == EventType.TABLE_MAP
    }
    cfg.dumper.stream_tables = {f"{db.decode()}.{t.decode()}": 0 for db, t in tables}


async def test_an_idle_stream_is_told_the_progress_per_round_not_per_batch(tmp_path, transactions):  # noqa: F811
    cfg = config(tmp_path)
    on_stream_0(cfg, transactions)
    output = StreamOutput(
        cfg, tmp_path / "state", CLUSTER_UUID, gtid_layout(cfg, CLUSTER_UUID), Pauses()
    )
    idle = output.streams.processes[1]
    first, rest = transactions[:3], transactions[3:5]
    try:
        await output.prepare()
        assert output.ends == [None, None]
        stats = LeaderStats()
        await output.write(first, stats, None)
        await output.write(rest, stats, None)
        assert stats.transactions == len(first) + len(rest)
        assert await idle.resume_key() is None  # nothing was written to it
        output.checkpoint_round(rest[-1].tso)
        assert await idle.resume_key() == rest[-1].key
        await output.sync(stats)  # (and durable: its progress file)

        # A restart forgets what it had not told: a stream restarted meanwhile holds only
        # what its files hold.
        more = transactions[5:6] or transactions[:1]
        await output.write(more, stats, None)
        await output.prepare()
        output.checkpoint_round(0)
        assert await idle.resume_key() == rest[-1].key
    finally:
        await output.aclose(True)
