"""The dumper process: the leader pipeline, the status file, the CN heartbeat and the MySQL
protocol server, until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from binlog_writer import BinlogWriter
from cdc import stage_trace
from cdc.admin_sql import retry
from cdc.config import Config
from cdc.files import write_atomically
from cdc.memory_tune import tune_memory
from cdc.pauses import Pauses
from cdc.tasks import cancel_and_wait
from dumper.ha import DnLeaders, GmsLeaseStore, HaNode, ha_status
from dumper.heartbeats import heartbeats
from dumper.metrics import DumperMetrics
from dumper.pipeline import Leader, leader_status
from dumper.role import Role
from dumper.server import (
    BinlogFiles,
    CurrentEventNotifier,
    HistorySchemaProvider,
    ServeProcess,
    Server,
    archive_of,
    check_archive,
)
from dumper.server import serve as serve_binlog
from merge_source import ForkServer
from read_path import SnapshotSource
from topology import gms, migrate, server_uuid

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 15.0


async def _status_loop(
    status: Callable[[], dict],
    path: Path,
    metrics: DumperMetrics | None,
    writer: Callable[[], BinlogWriter | None],
) -> None:
    """The status file every second (`cdc status`), and the same snapshot for the metrics."""
    while True:
        snapshot = status()
        try:
            write_atomically(path, json.dumps(snapshot))
        except OSError as exc:  # a full disk: the metrics still have it, the next turn retries
            log.debug("status file not written: %s", exc)
        if metrics is not None:
            metrics.update(snapshot)
            metrics.attach(writer())
        await asyncio.sleep(1)


def _served_status(
    status: Callable[[], dict],
    server: Server | ServeProcess,
    binlog_dir: Callable[[], Path],
    base: str,
    pauses: Pauses,
) -> dict:
    """The pipeline's status plus what the server knows: its consumers, the binlog's size;
    and what the process waits for (docs/faults.md)."""
    out = status()
    out["pauses"] = pauses.snapshot()
    files = BinlogFiles(binlog_dir(), base).files()
    out["consumers"] = server.consumers()
    out["consumer_holds"] = server.consumer_holds()
    out["server_restarts"] = getattr(server, "restarts", 0)  # a ServeProcess restarts its child
    out["binlog"] = {
        "files": len(files),
        "bytes": sum(f.size for f in files),
        "oldest": files[0].name if files else None,
        "purged_files": server.purged,
    }
    return out


def _ha_status(node: HaNode, state_dir: Path) -> dict:
    status = leader_status(node.leader) if node.leader is not None else {"written_at": time.time()}
    status["ha"] = ha_status(node)
    if node.config.dumper.streams > 1:
        from dumper.streams import with_streams

        status.setdefault("problems", [])
        if node.role == "leader":  # (a follower's streams serve nothing: docs/streams.md)
            with_streams(status, node.config, state_dir)
    return status


def _server_uuid(config: Config, pauses: Pauses) -> str:
    """The cluster's server_uuid from the GMS (made there on the first start; waits for it)."""

    def read() -> str:
        conn = gms.connect(config.gms)
        try:
            migrate(conn, config.pipeline.meta_database)
            return server_uuid(conn, config.pipeline.meta_database)
        finally:
            conn.close()

    return retry(read, "reading server_uuid at start", pauses)


def _role_of(
    config: Config,
) -> Callable[[Config, str, bool, Pauses, Path, ForkServer | None], Role]:
    if config.dumper.peers:
        return _ha_node
    if config.dumper.streams > 1:
        from dumper.streams import stream_merge_role

        return stream_merge_role
    return _plain_leader


def _plain_leader(
    config: Config,
    uuid: str,
    heartbeat: bool,
    pauses: Pauses,
    _state_dir: Path,
    forks: ForkServer | None = None,
) -> Role:
    leader = Leader(config, server_uuid=uuid, pauses=pauses, forks=forks)
    tasks = {"leader": leader.run}
    if heartbeat:
        tasks["heartbeat"] = functools.partial(heartbeats, config, leader.node, pauses)
    return Role(
        tasks,
        status=functools.partial(leader_status, leader),
        binlog_dir=lambda: leader.writer.dir,
        writer=lambda: leader.writer,
        current_notify=lambda: leader.notify,
        merged_tso=leader.merged_tso,
    )


def _ha_node(
    config: Config,
    uuid: str,
    heartbeat: bool,
    pauses: Pauses,
    state_dir: Path,
    forks: ForkServer | None = None,
) -> Role:
    """The CN heartbeat runs only while this node leads (`on_lead`). With several streams each
    term's pipeline is the merge that feeds the stream processes (docs/streams.md, "HA
    followers"); this process's own port then answers `SHOW BINARY STREAMS` only."""
    make, copy_servers = Leader, None
    if config.dumper.streams > 1:
        from dumper.ha.stream_term import StreamCopyServers
        from dumper.streams import stream_leader

        make = functools.partial(stream_leader, state_dir=state_dir)
        copy_servers = StreamCopyServers(config, uuid, lambda: node.current_notify())
    node = HaNode(
        config,
        GmsLeaseStore(config),
        DnLeaders(config, uuid, pauses, make=make, forks=forks),
        on_lead=(lambda: heartbeats(config, node.nodes.get, pauses)) if heartbeat else None,
        pauses=pauses,
        copy_servers=copy_servers,
    )
    single = config.dumper.streams == 1
    return Role(
        {"ha": node.run},
        status=functools.partial(_ha_status, node, state_dir),
        binlog_dir=lambda: node.dir,
        writer=lambda: node.leader.writer if node.leader is not None and single else None,
        current_notify=node.current_notify,
        leading=node.gated,
        sure_until=node.sure_until,
        read_only=node.read_only,
        term=lambda: node.term,
        acks=node.acks,
        merged_tso=lambda: node.leader.merged_tso() if node.leader is not None else 0,
    )


async def _start_server(
    config: Config, role: Role, schema: HistorySchemaProvider, uuid: str
) -> Server | ServeProcess:
    """The protocol server of `role`'s binlog: in a child process (`[dumper] serve_process`,
    the default) or in this one."""
    if config.dumper.archive_dir:  # a clear error now, not in a child that would not start
        check_archive(archive_of(config.dumper, role.binlog_dir()))
    if config.dumper.serve_process:
        return await ServeProcess(
            config,
            role.binlog_dir(),
            current_notify=role.current_notify,
            writer_end=role.writer_end,
            leading=role.leading,
            sure_until=role.sure_until,
            read_only=role.read_only,
            term=role.term,
            merged_tso=role.merged_tso,
            acks=role.acks,
            server_uuid=uuid,
        ).start()
    return await serve_binlog(
        config.dumper,
        role.binlog_dir(),
        notifier=CurrentEventNotifier(role.current_notify, role.visible_end, role.merged_tso),
        schema=schema,
        read_only=role.read_only,
        acks=role.acks,
        server_uuid=uuid,
        snapshot=SnapshotSource(config),
    )


async def serve(
    config: Config,
    state_dir: Path,
    *,
    heartbeat: bool = True,
    own_process: bool = False,
    role: Role | None = None,
    server_uuid: str | None = None,
    pauses: Pauses | None = None,
    forks: ForkServer | None = None,
) -> None:
    """Run everything until SIGTERM/SIGINT (or cancellation). `own_process`: this is the whole
    process (`cdc start`), so a stop that hangs on I/O may end it the hard way. The MySQL
    protocol server runs in a child process (`[dumper] serve_process`, the default), so that
    no client can take this loop's turns from MergeJoint and the writer. `role` and
    `server_uuid`: a stream's process passes its own (`dumper.streams`), and the `pauses` its
    role's tasks report to; by default the role is the plain leader, an HA node, or with
    `[dumper] streams` > 1 the merge process that feeds the streams, and the server_uuid is
    the cluster's. `forks`: the MergeSource fork server `run_service` forked (closed here)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    # Its presence says "this run serves" (below): never a file left by an earlier run.
    (state_dir / "status.json").unlink(missing_ok=True)
    trace = stage_trace.start("leader")  # noqa: F841 (kept alive)
    metrics = None
    if config.dumper.metrics_port:  # first: a port in use stops us before anything runs
        metrics = DumperMetrics()
        metrics.start(config.dumper.host, config.dumper.metrics_port)
    schema = HistorySchemaProvider(lambda: gms.connect(config.gms), config.pipeline.meta_database)
    pauses = pauses or Pauses()  # what this process waits for now (docs/faults.md)
    # the sid of the GTIDs written/served
    uuid = server_uuid or await asyncio.to_thread(_server_uuid, config, pauses)
    # HA: lead or follow as the lease says; else the one leader. Either way one Role.
    if role is None:
        role = _role_of(config)(config, uuid, heartbeat, pauses, state_dir, forks)
    tasks = [asyncio.create_task(run(), name=name) for name, run in role.tasks.items()]
    server = await _start_server(config, role, schema, uuid)
    # The status file only once the server listens: `cdc start --background` returns when it
    # appears, and what follows it (a consumer, a test) connects to the port at once.
    status = functools.partial(
        _served_status, role.status, server, role.binlog_dir, config.dumper.binlog_base, pauses
    )
    tasks.append(
        asyncio.create_task(
            _status_loop(status, state_dir / "status.json", metrics, role.writer), name="status"
        )
    )
    log.info("serving the global binlog on %s:%d", server.host, server.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    stopper = asyncio.create_task(stop.wait(), name="stop")
    try:
        done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
        for t in done:
            if t is not stopper and t.exception() is not None:
                raise t.exception()
    finally:
        # A clean stop closes the writer (synced, in-use flag cleared); if some I/O hangs (a DN
        # that stopped answering), the process still goes: a crash is safe by design.
        watchdog = threading.Timer(SHUTDOWN_GRACE_S, os._exit, (3,))
        watchdog.daemon = True
        if own_process:
            watchdog.start()
        await cancel_and_wait([*tasks, stopper])
        if forks is not None:
            await forks.aclose()
        await server.close()
        if metrics is not None:
            metrics.close()
        # (in own_process mode the watchdog stays armed: asyncio.run() still joins worker
        # threads after this, and a daemon timer does not delay a normal exit)


def run_service(config: Config, state_dir: Path) -> int:
    tune_memory()  # the leader makes a few objects per transaction, like a MergeSource
    # Forked now, while this process has one thread and its imports done: the MergeSource
    # processes' server then costs a fork, not a second Python importing them all again.
    forks = ForkServer.fork_here() if config.pipeline.source_processes else None
    asyncio.run(serve(config, state_dir, own_process=True, forks=forks))
    return 0
