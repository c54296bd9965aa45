"""What a tool needs from a compute node to write through it, as an interface: the backfill
commits its watermark rows through whichever CN the deployment runs (the reference CN's
`cn.connect` in this project), so no runtime stage depends on a particular CN."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from cdc.cn_protocol.catalogue import Catalogue


class CnTransaction(Protocol):
    """A logical transaction: its statements, then (after a commit) its commit TSO."""

    commit_tso: int | None

    async def execute(self, sql: str, params: Any = None) -> Any: ...

    async def __aenter__(self) -> CnTransaction: ...

    async def __aexit__(self, *exc: object) -> None: ...


class CnClient(Protocol):
    """A started CN: logical DDL, transactions that learn their commit TSO, the catalogue."""

    @property
    def catalogue(self) -> Catalogue: ...

    async def execute_ddl(self, sql: str, *, broadcast: bool = False) -> int | None: ...

    def transaction(self) -> CnTransaction: ...

    async def reload_catalogue(self) -> None: ...


class CnConnector(Protocol):
    """Opens a CN for a short job: `async with connector() as cn: ...`."""

    def __call__(self) -> AbstractAsyncContextManager[CnClient]: ...
