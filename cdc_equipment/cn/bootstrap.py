"""`cdc cn init`: the GMS catalogue, the private tables on every DN, and the CdcStart marker."""

from __future__ import annotations

import json
from dataclasses import dataclass

from cdc.cn_protocol import schema
from cdc.cn_protocol.catalogue_store import CatalogueStore
from cdc.cn_protocol.dn_pool import connect
from cdc.config import Config
from cdc_equipment.cn.compute_node import ComputeNode

CDC_START_KEY = "cdc_start"


@dataclass(slots=True)
class InitResult:
    cdc_start_tso: int
    created: bool  # False: the cluster was already initialised (nothing written)


async def init(config: Config) -> InitResult:
    """Idempotent: creates what is missing; writes CdcStart only the first time."""
    store = CatalogueStore(lambda: connect(config.gms), config.cn.catalogue_database)
    await store.ensure_schema()
    await store.save_dns(config.dn)
    existing = await store.get_state(CDC_START_KEY)
    if existing is not None:
        return InitResult(int(json.loads(existing)["tso"]), False)
    catalogue = await store.load()
    if not catalogue.dns:
        await store.add_storage([n.id for n in config.dn])
    for dn in catalogue.dns or [n.id for n in config.dn]:
        node = next(n for n in config.dn if n.id == dn)
        conn = await connect(node)
        try:
            async with conn.cursor() as cur:
                for sql in schema.PRIVATE_TABLES:
                    await cur.execute(sql)
        finally:
            conn.close()
    cn = ComputeNode(config)
    await cn.start(recover=False)
    try:
        tso = await cn.write_instruction(schema.CDC_START, cn.topology())
    finally:
        await cn.close()
    await store.set_state(CDC_START_KEY, json.dumps({"tso": tso}))
    return InitResult(tso, True)
