"""Transactions encoded one after the other into one buffer: what a writer appends in one call
(`BinlogWriter.append_batch`) or a stream is sent in one frame (`dumper.streams`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dumper.pipeline.txn_encoder import TransactionEncoder
    from merge_joint import Transaction


class EncodedBatch:
    """Transactions encoded one after the other into one buffer, for `BinlogWriter.append_batch`."""

    __slots__ = ("buf", "ends", "tsos", "gtids", "events")

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.buf = bytearray()
        self.ends: list[int] = []  # where each transaction ends in `buf`
        self.tsos: list[int] = []  # its commit TSO
        self.gtids: list[int] = []  # where the GTID events are in `buf` (the writer numbers them)
        self.events = 0

    def add(self, encoder: TransactionEncoder, txn: Transaction) -> None:
        """`txn` encoded at the end of the batch (nothing if it has no event to write)."""
        count = encoder.encode_into(txn, self.buf, self.gtids)
        if count:
            self.ends.append(len(self.buf))
            self.tsos.append(txn.tso)
            self.events += count

    def add_run(self, encoder: TransactionEncoder, txns: list[Transaction], start: int, stop: int):
        """`add` of txns[start:stop], none of them spilled, in one compiled loop
        (`TransactionEncoder.encode_run`; INSTRUCTION transactions have nothing to add)."""
        self.events += encoder.encode_run(
            txns, start, stop, self.buf, self.ends, self.tsos, self.gtids
        )
