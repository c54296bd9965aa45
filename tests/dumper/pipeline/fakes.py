"""Fakes of the pipeline's own interfaces (`SourceFactory`, `Source`, `PipelineMetadata`) and
fragments made of recorded MariaDB row events: the leader's orchestration runs with a real
MergeJoint, encoder and BinlogWriter (in a temp dir), and no DN or GMS."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdc.binlog.events import cts_mark_text, parse_cts
from cdc.binlog.reader import read_file
from cdc.cn_protocol.schema import STORAGE_CHANGE
from cdc.config import Config, DumperConfig, NodeConfig, PipelineConfig
from cdc.keys import Checkpoint, GlobalKey, Kind, SortKey, global_key, stream_name
from merge_source import Fragment, FragmentKind, NameMap, SourceProcessDied, Statement, Watermark
from topology import FileEntry, SchemaRecord, TopologyRecord

Item = Fragment | Watermark


def _recorded_statements() -> list[Statement]:
    """The statements of one recorded CN branch (a TABLE_MAP and its rows): real events for
    the encoder, reused by every fake transaction."""
    from merge_source.processor import SourceProcessor
    from tests.merge_source.test_recorded import DN, feed_all

    for f in feed_all(SourceProcessor(DN, wait_for_start=True)).fragments():
        if f.kind is FragmentKind.DATA and f.statements:
            return f.statements
    raise AssertionError("no recorded data fragment")


STATEMENTS = _recorded_statements()


def branch(dn: int, tso: int, participants: tuple[int, ...], seq: int | None = None) -> Fragment:
    """`dn`'s branch of the CN transaction committed at `tso` (txn id = tso)."""
    key = SortKey(tso, Kind.BRANCH, seq if seq is not None else tso)
    return Fragment(key, dn, tso, participants, FragmentKind.DATA, list(STATEMENTS))


def storage_change(dn: int, tso: int, added: int, dns: list[int]) -> Fragment:
    content = {"dns": [{"id": d, "host": "127.0.0.1", "port": 4000 + d} for d in dns]}
    content["added"] = [added]
    marker = {"type": STORAGE_CHANGE, "content": json.dumps(content), "id": tso}
    key = SortKey(tso, Kind.BRANCH, tso)
    return Fragment(key, dn, tso, (dn,), FragmentKind.INSTRUCTION, markers=[marker])


def mark(dn: int, tso: int, seq: int | None = None) -> Watermark:
    """Nothing at or below (tso, BRANCH, seq) comes from `dn` any more; re-read from `seq`."""
    seq = seq if seq is not None else tso
    cp = Checkpoint(stream_name(dn), "binlog.000001", seq, tso)
    return Watermark(dn, SortKey(tso, Kind.BRANCH, seq), cp)


class FakeSource:
    """Puts its script's batches into the queue, dropping what sorts at or below its resume
    key like a MergeSource; then idles, or dies like a killed worker process."""

    def __init__(self, dn: int, queue: asyncio.Queue, resume: GlobalKey, script: Script):
        self.name, self.error, self.dn = f"dn{dn}", None, dn
        self.queue, self.resume, self.script = queue, resume, script

    async def run(self) -> None:
        for batch in self.script.batches:
            kept = [
                i for i in batch if type(i) is Watermark or global_key(self.dn, i.key) > self.resume
            ]
            await self.queue.put(kept)
            # A moment between batches, as between a DN's events: MergeJoint takes each batch
            # on its own (batches drained together keep only their last checkpoint).
            await asyncio.sleep(0.01)
        if self.script.die:
            self.script.die = False  # once: the restarted one lives
            raise SourceProcessDied(f"{self.name}: worker process killed")
        await asyncio.Event().wait()

    def status(self) -> dict[str, Any]:
        return {"state": "up"}


@dataclass
class Script:
    batches: list[list[Item]]
    die: bool = False


@dataclass
class Made:
    node: NodeConfig
    cp: Checkpoint | None
    written: GlobalKey | None
    resume_after: GlobalKey | None
    names: NameMap | None


class FakeFactory:
    """`SourceFactory` whose sources play `scripts[dn]`; records every `make`."""

    def __init__(self, scripts: dict[int, Script]):
        self.scripts = scripts
        self.made: list[Made] = []

    async def start(self) -> None:
        pass

    def prepare(self) -> None:
        pass

    async def aclose(self) -> None:
        pass

    def make(self, node, cp, queue, written, resume_after=None, names=None) -> FakeSource:
        self.made.append(Made(node, cp, written, resume_after, names))
        resume = max(resume_after or GlobalKey(0, 0, 0, 0), written or GlobalKey(0, 0, 0, 0))
        return FakeSource(node.id, queue, resume, self.scripts[node.id])


SERVER_UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


@dataclass
class FakeMetadata:
    """`PipelineMetadata` in memory; `history` survives a pipeline restart, as the GMS does."""

    records: list[TopologyRecord] = field(default_factory=list)
    history: list[tuple[GlobalKey, Checkpoint]] = field(default_factory=list)
    entries: list[FileEntry] = field(default_factory=list)

    def prepare(self) -> None:
        pass

    def server_uuid(self) -> str:
        return SERVER_UUID

    def topology(self) -> list[TopologyRecord]:
        return list(self.records)

    def record_topology(self, record: TopologyRecord) -> None:
        self.records.append(record)

    def record_schema(self, record: SchemaRecord) -> None:
        pass

    def resume_checkpoint(self, stream: str, written: GlobalKey | None) -> Checkpoint | None:
        kept = [cp for wm, cp in self.history if cp.stream == stream and written and wm <= written]
        return kept[-1] if kept else None

    def names_at(self, dn_id: int, tso: int) -> NameMap | None:
        return None

    def save_checkpoints(self, ready: list[tuple[GlobalKey, Checkpoint]], entry: FileEntry) -> None:
        self.history += ready
        self.entries.append(entry)

    def close(self) -> None:
        pass


def config(binlog_dir: Path, dns: tuple[int, ...] = (1, 2)) -> Config:
    return Config(
        dn=[NodeConfig(id=d, port=4000 + d, name=f"dn{d}") for d in dns],
        dumper=DumperConfig(binlog_dir=str(binlog_dir)),
        pipeline=PipelineConfig(fsync="never", checkpoint_interval_ms=20),
    )


def written_tsos(binlog_dir: Path) -> list[int]:
    """The TSO of every transaction in the binlog files, in file order (their CTS marks, read
    as events: a regex over the bytes would read on into a CRC that starts with a digit)."""
    out: list[int] = []
    for path in sorted(binlog_dir.glob("binlog.[0-9]*")):
        _, reader = read_file(path)
        for raw in reader:
            text = cts_mark_text(raw.data)
            if text is not None:
                out.append(parse_cts(text))
    return out
