"""The served global binlog of a dumper elsewhere, copied over the MySQL protocol into a local
directory (a COM_BINLOG_DUMP from its first file to its current end, as `cdc ha reseed` copies a
leader's: `binlog_writer.BinlogCopier`, whole transactions only), so that points and flashback
read a remote dumper exactly as they read its files. The copy is the whole retained binlog: a
tool's cost, paid once per command."""

from __future__ import annotations

import os
from pathlib import Path

from binlog_writer import BinlogCopier, CopyError, copy_dump
from cdc.protocol import BinlogPosition, DumpClient, DumpError, DumpSettings

from .flashback import FlashbackError

# A dump client's server_id of its own (a server evicts a second dump with the same id).
_SERVER_ID_BASE = 0x7E000000


async def copy_served(
    address: str, user: str, password: str, directory: Path, base: str = "binlog"
) -> None:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise FlashbackError(f"--server {address!r}: expected HOST:PORT")
    copier = BinlogCopier(directory, base=base)
    settings = DumpSettings(
        host,
        int(port),
        user,
        password,
        server_id=_SERVER_ID_BASE + os.getpid() % 0xFFFF,
        name=f"dumper {address}",
        reconnect=False,
        keep_rotate=True,  # the copy's files end as the originals do
        non_blocking=True,  # up to the server's current end, then EOF
    )
    client = DumpClient(settings, BinlogPosition("", 4))
    try:
        await copy_dump(client, copier)
    except (DumpError, CopyError, ConnectionError, OSError) as exc:
        raise FlashbackError(f"copying the global binlog from {address} failed: {exc}") from None
