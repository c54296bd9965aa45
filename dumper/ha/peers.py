"""How the members of an HA group reach each other's files: a follower dumps the leader's (or,
taking over, another follower's copy: `stream_tail`) as a follower, with a server_id of its
own; the leader's dump server counts the acknowledgements of those server_ids (`AckGate`)."""

from __future__ import annotations

from collections.abc import Callable

from cdc.config import DumperConfig
from cdc.protocol import DumpSettings
from dumper.server import AckGate
from topology import Lease

FOLLOWER_SERVER_ID_BASE = 9900  # dump clients of followers register as base + dumper id


def follower_ack_gate(
    d: DumperConfig, active: Callable[[], bool], sure: Callable[[], bool] = lambda: True
) -> AckGate | None:
    """The gate of a leader's dump server: the acknowledgements of dumper `d.id`'s followers
    (None: `serve_acknowledged_only` is off, or there are no followers)."""
    if not (d.serve_acknowledged_only and len(d.peers) > 1):
        return None
    return AckGate(
        (FOLLOWER_SERVER_ID_BASE + p.id for p in d.peers if p.id != d.id),
        live_ms=d.lease_ms,
        wait_ms=d.ack_wait_ms,
        active=active,
        sure=sure,
    )


def leader_dump_settings(
    d: DumperConfig, lease: Lease, *, non_blocking: bool = False, address: str = ""
) -> DumpSettings:
    """The dump of the leader's files by follower `d.id` (its copy, or a re-seed of it): a
    follower's server_id, so the leader's ack gate never holds it back. `address`: where
    (default: the lease's; a stream's copy dumps from the leader's stream port)."""
    name = f"leader dumper {lease.holder}"
    return peer_dump_settings(d, address or lease.address, name, non_blocking=non_blocking)


def peer_dump_settings(
    d: DumperConfig, address: str, name: str, *, non_blocking: bool = False
) -> DumpSettings:
    """A dump by dumper `d.id` of another member's files at `address` (the leader's, or a
    follower's copy: `stream_tail`), as a follower: its server_id."""
    host, _, port = address.rpartition(":")
    return DumpSettings(
        host,
        int(port),
        d.peer_user,
        d.peer_password,
        server_id=FOLLOWER_SERVER_ID_BASE + d.id,
        name=name,
        heartbeat_period=0.5,
        idle_timeout=max(2.0, d.lease_ms / 1000),
        reconnect=False,
        keep_rotate=True,
        non_blocking=non_blocking,
    )
