"""What a session answers through (go-mysql's `Handler` / `ReplicationHandler`): the wire part
(`wire/`) reads packets and runs the command switch, knowing nothing of what it answers;
`sql/` answers queries (`QueryHandler`), `dump/` registrations and binlog dumps
(`ReplicationHandler`). Also the values that cross: results, the error an ERR packet carries,
and the connection a dump writes its packets to."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from cdc.protocol.resultset import Column
from cdc.protocol.sql_error import SqlError as SqlError  # the server's parts raise it from here

if TYPE_CHECKING:
    from dumper.server.sessions import SessionState


@dataclass(slots=True)
class OkResult:
    affected: int = 0


@dataclass(slots=True)
class RowsResult:
    columns: list[Column]
    # A list, or an iterator read while sending: it may raise SqlError part way through and
    # yield None for work that makes no row (the session skips it, counting it as work).
    rows: Iterable[Sequence[object] | None] = field(default_factory=list)


class RowStream(Protocol):
    """A result read from elsewhere while it is sent (snapshot reads from the DNs): `open()`
    gives the column definitions (objects with `encode()`), `rows()` the text rows, encoded,
    in lists (a batch is framed and sent in one pass); `open(binary=True)`: rows to be sent in
    the binary protocol (a FLOAT's text then has the digits of its every bit). Both may raise
    SqlError; `rows()` cleans up when closed early."""

    async def open(self, binary: bool = False) -> Sequence[ColumnPacket]: ...

    def rows(self) -> AsyncIterator[list[bytes]]: ...

    def close(self) -> None:
        """Release what `open()` took, when the rows are never read (an error, a kill)."""
        ...


class ColumnPacket(Protocol):
    """A column definition: its packet, and the type and flags its binary values follow."""

    def encode(self) -> bytes: ...

    @property
    def type(self) -> int: ...

    @property
    def flags(self) -> int: ...


@dataclass(slots=True)
class StreamedRows:
    stream: RowStream


@dataclass(slots=True)
class Pending:
    """A result that needs a wait first (a point of the global binlog resolved off the loop:
    START TRANSACTION READ ONLY AS OF …); the session awaits `result`, which may raise
    SqlError."""

    result: Awaitable[OkResult | RowsResult | StreamedRows]


Result = OkResult | RowsResult | StreamedRows | Pending


async def settled(result: Result) -> OkResult | RowsResult | StreamedRows:
    """`result`, its wait done."""
    return await result.result if isinstance(result, Pending) else result


class QueryHandler(Protocol):
    """COM_QUERY and the prepared statements' text (one per session: it keeps its variables)."""

    def split(self, text: str) -> list[str]:
        """The statements of one query text (comments stripped; maybe none)."""
        ...

    def check(self, statement: str) -> None:
        """SqlError if `statement` does not parse (COM_STMT_PREPARE reports it at once)."""
        ...

    def execute(self, statement: str) -> Result:
        """Parse and answer one statement; SqlError is the client's ERR."""
        ...

    async def describe(self, statement: str) -> Sequence[ColumnPacket]:
        """The result columns `statement` will have, when they are known without answering it
        (COM_STMT_PREPARE announces them); empty otherwise. SqlError as `execute` would."""
        ...


class DumpConnection(Protocol):
    """The connection as a dump uses it: packets out (framed with consecutive sequence ids, or
    framed already by a batch shared by several dumps), raw bytes in (acknowledgements)."""

    @property
    def seq(self) -> int: ...

    @property
    def deprecate_eof(self) -> bool: ...

    def send(self, payload: bytes) -> None: ...

    def send_framed(self, data: bytes | bytearray, seq: int) -> None: ...

    async def flush(self) -> None: ...

    async def read_some(self, n: int) -> bytes:
        """What the client sent, up to `n` bytes; b"" when it closed the connection."""
        ...


class ReplicationHandler(Protocol):
    """COM_REGISTER_SLAVE and COM_BINLOG_DUMP(_GTID) (one per session)."""

    def register_replica(self, body: bytes) -> None:
        """Record a replica's registration; SqlError when refused or malformed."""
        ...

    async def dump(self, body: bytes, conn: DumpConnection, *, by_gtid: bool) -> None:
        """Serve a binlog dump until it ends (its errors are sent on `conn`); SqlError when it
        is refused before it starts."""
        ...

    def close(self) -> None:
        """The session ended (its registration, if any, goes)."""
        ...


@dataclass(slots=True, frozen=True)
class Handlers:
    queries: QueryHandler
    replication: ReplicationHandler


# Builds a new session's handlers (the wire calls it once per connection).
HandlerFactory = Callable[["SessionState"], Handlers]
