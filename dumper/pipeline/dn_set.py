"""Which DNs the pipeline merges, from the topology history in the GMS: the storage DNs of the
newest record, when a DN joined (its StorageChange), and the address of a DN that joins while
the pipeline runs."""

from __future__ import annotations

from typing import Any

from cdc.config import NodeConfig
from dumper.pipeline.output import LeaderError
from topology import TopologyRecord


def storage_dns(records: list[TopologyRecord]) -> set[int] | None:
    """The storage DNs after the newest topology record (None before the first one)."""
    for rec in reversed(records):
        content = rec.content.get("after", rec.content) if rec.kind == "MetaChange" else rec.content
        if "dns" in content:
            return {int(d["id"]) for d in content["dns"]}
    return None


def joined_at(records: list[TopologyRecord], dn: int) -> int | None:
    """TSO of the StorageChange that added `dn`, if any."""
    for rec in records:
        if rec.kind == "StorageChange" and dn in rec.content.get("added", []):
            return rec.tso
    return None


def joining_node(nodes: dict[int, NodeConfig], dn: int, entry: dict[str, Any]) -> NodeConfig:
    """The address of `dn`, which a StorageChange adds (`entry`: its part of the marker), with
    the credentials of the DNs the pipeline knows (`nodes`)."""
    template = next(iter(nodes.values()))
    return NodeConfig(
        id=dn,
        host=entry.get("host", template.host),
        port=int(entry.get("port") or 0) or _known_port(nodes.get(dn), dn),
        user=template.user,
        password=template.password,
        name=f"dn{dn}",
    )


def _known_port(node: NodeConfig | None, dn: int) -> int:
    if node is None:
        raise LeaderError(
            f"dn{dn} joined without a port in its StorageChange and is not configured"
        )
    return node.port
