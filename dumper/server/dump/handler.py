"""The replication side of a session (go-mysql's ReplicationHandler): COM_REGISTER_SLAVE, and
COM_BINLOG_DUMP / COM_BINLOG_DUMP_GTID: where the dump starts (file and position, the client's
GTID set, a MariaDB replica's GTID position and UNTIL), its options from the client's user
variables, the sender, and the client's input during the dump (a follower's acknowledgements)."""

from __future__ import annotations

import asyncio
import logging
import struct
from dataclasses import dataclass, field

from cdc.config import DumperConfig
from cdc.protocol.packets import PacketBuffer, ProtocolError, eof_packet, err_packet, ok_packet
from dumper.server.dump import gtid_start, mariadb_start
from dumper.server.dump.ack_gate import AckGate, parse_ack
from dumper.server.dump.binlog_sender import BinlogSender
from dumper.server.dump.gtid_start import brief, parse_dump_gtid
from dumper.server.dump.request import (
    MIN_HEARTBEAT_PERIOD_S,
    DumpError,
    DumpOptions,
    DumpRequest,
)
from dumper.server.dump.shared_reads import SharedReads
from dumper.server.handlers import DumpConnection, SqlError
from dumper.server.sessions import Registration, SessionState
from dumper.server.store.served import ServedBinlog
from dumper.server.users import require

log = logging.getLogger(__name__)
READ_SIZE = 1 << 16


@dataclass(slots=True)
class DumpContext:
    """What the replication side reads and keeps (server.py builds it once, for every session)."""

    config: DumperConfig
    served: ServedBinlog  # the files, the writer's progress, the GTIDs a dump starts by
    # HA: followers' acknowledgements, which bound what the leader serves other consumers.
    acks: AckGate | None = None
    # Framed batches shared by dumps at the same place (docs/dumper.md "Many consumers").
    shared_reads: SharedReads = field(default_factory=SharedReads)
    # The replicas registered (COM_REGISTER_SLAVE) by connection id, until it ends; SHOW
    # SLAVE HOSTS reads them.
    replicas: dict[int, Registration] = field(default_factory=dict)


class ReplicationAnswers:
    """One session's replication commands (a `ReplicationHandler`)."""

    def __init__(self, ctx: DumpContext, state: SessionState) -> None:
        self.ctx = ctx
        self.state = state
        # Only for reading what a client sends during a dump (commands are read packet by packet)
        self._buf = PacketBuffer(max_payload=ctx.config.max_allowed_packet)

    def register_replica(self, body: bytes) -> None:
        require(self.state.user, "REPLICATION SLAVE")
        try:
            (server_id,) = struct.unpack_from("<I", body, 0)
            pos, fields = 4, []
            for _ in range(3):  # host, user, password: 1-byte lengths
                n = body[pos]
                fields.append(body[pos + 1 : pos + 1 + n].decode("utf-8", "replace"))
                pos += 1 + n
            (port,) = struct.unpack_from("<H", body, pos)
        except (struct.error, IndexError):
            raise SqlError("Malformed COM_REGISTER_SLAVE packet", 1105, "HY000") from None
        self.ctx.replicas[self.state.conn_id] = Registration(
            server_id, fields[0] or self.state.host, fields[1], port, self.ctx.config.server_id
        )

    def close(self) -> None:
        """The session ended: its registration goes."""
        self.ctx.replicas.pop(self.state.conn_id, None)

    def _dump_options(self) -> DumpOptions:
        uv = self.state.user_vars
        declared = uv.get("master_binlog_checksum", uv.get("source_binlog_checksum"))
        checksum = None
        if declared is not None:
            checksum = {"CRC32": True, "NONE": False}.get(str(declared).upper())
        period_ns = uv.get("master_heartbeat_period", uv.get("source_heartbeat_period"))
        try:
            period = float(period_ns) / 1e9 if period_ns is not None else None
        except (ValueError, OverflowError):
            period = None
        if period is None:
            period = self.ctx.config.default_heartbeat_ms / 1000
        if period > 0:  # 0 (or less) = no heartbeats; anything else at least the minimum
            period = max(period, MIN_HEARTBEAT_PERIOD_S)
        return DumpOptions(checksum=checksum, heartbeat_period=max(period, 0.0))

    async def dump(self, body: bytes, conn: DumpConnection, *, by_gtid: bool) -> None:
        require(self.state.user, "REPLICATION SLAVE")
        try:
            if by_gtid:
                request = await self._gtid_dump_request(body)
            elif (
                self.ctx.served.mariadb_gtids is not None
                and "slave_connect_state" in self.state.user_vars
            ):
                request = self._mariadb_gtid_dump_request(body)
            else:
                request = DumpRequest.parse(body)
        except DumpError as exc:
            log.info("dump for %s:%d refused: %s", self.state.host, self.state.port, exc.message)
            raise SqlError(exc.message, exc.code, "HY000") from None
        self.state.command = "Binlog Dump GTID" if by_gtid else "Binlog Dump"
        sender = BinlogSender(
            self.ctx.served.files,
            conn,
            self.ctx.served.notifier,
            server_id=self.ctx.config.server_id,
            poll_interval=self.ctx.config.poll_interval_ms / 1000,
            gate=self.ctx.acks,
            shared=self.ctx.shared_reads,
        )
        watcher = asyncio.create_task(self._watch_input(conn, request.server_id))
        streamer = asyncio.create_task(self._stream(conn, sender, request))
        self.state.dump = sender
        try:
            await asyncio.wait({watcher, streamer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.state.dump = None
            for task in (watcher, streamer):
                task.cancel()
            await asyncio.gather(watcher, streamer, return_exceptions=True)

    async def _gtid_dump_request(self, body: bytes) -> DumpRequest:
        """COM_BINLOG_DUMP_GTID: the file and position of the first transaction the client's
        GTID set lacks (`gtid_start`). In a thread: finding it may read a file's worth of
        bytes, and a set may hold a million intervals; neither may hold up other sessions."""
        state = self.ctx.served.gtid_state

        def start() -> tuple[DumpRequest, str]:
            request, client = parse_dump_gtid(body)
            if state is None:
                raise DumpError(
                    "The replication receiver thread cannot start in AUTO_POSITION mode: this "
                    "server has GTID_MODE = OFF instead of ON. Use file and position."
                )
            file, pos, exclude = gtid_start.dump_start(state, client)
            dump = DumpRequest(file, pos, request.flags, request.server_id, exclude)
            return dump, brief(str(client) or "nothing")

        request, client = await asyncio.to_thread(start)
        log.info(
            "GTID dump for %s:%d: the client has %s; from %s:%d%s",
            self.state.host,
            self.state.port,
            client,
            request.file,
            request.pos,
            ", less the transactions it has after a gap" if request.exclude else "",
        )
        return request

    def _mariadb_gtid_dump_request(self, body: bytes) -> DumpRequest:
        """COM_BINLOG_DUMP of a MariaDB replica in GTID mode (`@slave_connect_state` set; its
        file name and position are ignored, as MariaDB's master does): the file and position
        of the transaction after its GTID (`mariadb_start`)."""
        request = DumpRequest.parse(body)
        uv = self.state.user_vars
        state = self.ctx.served.mariadb_gtids
        assert state is not None
        connect = "" if uv.get("slave_connect_state") is None else str(uv["slave_connect_state"])
        file, pos = mariadb_start.dump_start(
            state,
            connect,
            strict=_flag(uv.get("slave_gtid_strict_mode")),
            ignore_duplicates=_flag(uv.get("slave_gtid_ignore_duplicates")),
        )
        until_text = uv.get("slave_until_gtid")
        until = None if until_text is None else mariadb_start.until(state, connect, str(until_text))
        log.info(
            "MariaDB GTID dump for %s:%d: the replica is at %r; from %s:%d%s",
            self.state.host,
            self.state.port,
            connect,
            file,
            pos,
            "" if until_text is None else f", until {until_text!r}",
        )
        return DumpRequest(file, pos, request.flags, request.server_id, until=until)

    async def _stream(
        self, conn: DumpConnection, sender: BinlogSender, request: DumpRequest
    ) -> None:
        try:
            self.state.info = f"{request.file}:{request.pos}"
            await sender.run(request, self._dump_options())
        except DumpError as exc:
            log.info("dump for %s:%d ended: %s", self.state.host, self.state.port, exc.message)
            conn.send(err_packet(exc.code, exc.message, "HY000"))
            await conn.flush()
            return
        except (ConnectionError, TimeoutError, asyncio.CancelledError):
            # (TimeoutError: the kernel ended a connection whose client went silent,
            # cdc/sockets.py: an ordinary network event, not a failure of ours)
            raise
        except Exception as exc:  # a bug or an unreadable file: tell the client, keep the server
            log.exception("dump for %s:%d failed", self.state.host, self.state.port)
            conn.send(
                err_packet(
                    1236, f"internal error of the binlog server while sending: {exc}", "HY000"
                )
            )
            await conn.flush()
            return
        # Non-blocking dump done: EOF (an OK with 0xFE header for DEPRECATE_EOF clients).
        conn.send(ok_packet(header=0xFE) if conn.deprecate_eof else eof_packet())
        await conn.flush()

    async def _watch_input(self, conn: DumpConnection, server_id: int) -> None:
        """Read what the client sends during a dump so that a disconnect is seen at once: a
        follower's semi-sync style acknowledgements go to the gate, the rest (COM_PING, a
        MariaDB replica's semi-sync ACKs) is dropped."""
        gate = self.ctx.acks
        if gate is None or not gate.is_follower(server_id):
            while await conn.read_some(READ_SIZE):
                pass
            return
        while data := await conn.read_some(READ_SIZE):
            self._buf.feed(data)
            try:
                packets = self._buf.packets()
            except ProtocolError:
                return
            for payload in packets:
                ack = parse_ack(payload)
                if ack is not None:
                    gate.record(server_id, *ack)


def _flag(value: object) -> bool:
    """A replica's `SET @slave_gtid_strict_mode=1` (an int, or text from some clients)."""
    try:
        return int(value or 0) != 0  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return False
