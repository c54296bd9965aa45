"""The topology a CdcStart / MetaChange marker carries (the catalogue's logical-to-physical map
and the DNs' addresses). Writing markers is the protocol's: `cdc.cn_protocol.markers`."""

from __future__ import annotations

from typing import Any

from cdc_equipment.cn.context import CnContext


def dn_addresses(ctx: CnContext) -> dict[int, dict[str, Any]]:
    return {
        n.id: {"host": n.host, "port": n.port, "server_id": n.server_id, "name": n.name}
        for n in ctx.pools.nodes  # the configured DNs and those learnt from the GMS
    }


def topology(ctx: CnContext) -> dict[str, Any]:
    """The full topology JSON (DN list + logical-to-physical map) as of now."""
    return ctx.catalogue.topology(dn_addresses(ctx))
