"""A stream's TCP link (dumper/streams/link.py): the handshake logs in only a merge and a
stream that hold the same secret and mean the same stream; a refused one fails on both ends."""

from __future__ import annotations

import asyncio

import pytest

from cdc.config import host_port
from dumper.streams.link import LinkRefused, accept, connect

UUID = "6c6b0e1e-0000-4000-8000-00000000cdc1"
SECRET = "the secret of the stream link"


async def login(stream_of_listener: int, secret_of_merge: str, stream_of_merge: int = 1):
    """Both ends' results: the listener's (the Login or its error) and the merge's."""
    accepted: asyncio.Future = asyncio.get_running_loop().create_future()

    async def on_link(reader, writer) -> None:
        try:
            accepted.set_result(await accept(reader, writer, stream_of_listener, SECRET))
        except LinkRefused as exc:
            accepted.set_result(exc)
        finally:
            writer.close()

    server = await asyncio.start_server(on_link, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        try:
            _, writer = await connect("127.0.0.1", port, stream_of_merge, UUID, secret_of_merge)
            writer.close()
            merge: object = "linked"
        except LinkRefused as exc:
            merge = exc
        return await accepted, merge
    finally:
        server.close()


async def test_the_same_secret_and_stream_link():
    listener, merge = await login(1, SECRET)
    assert merge == "linked"
    assert listener.stream == 1 and listener.cluster_uuid == UUID


async def test_another_secret_is_refused_on_both_ends():
    listener, merge = await login(1, "not the secret of the link")
    assert isinstance(listener, LinkRefused) and "wrong proof" in str(listener)
    assert isinstance(merge, LinkRefused) and "refused the login" in str(merge)


async def test_another_stream_is_refused_by_the_merge():
    listener, merge = await login(0, SECRET, stream_of_merge=1)
    assert isinstance(merge, LinkRefused) and "it serves stream 0" in str(merge)
    assert isinstance(listener, LinkRefused)  # (the merge closed the link)


@pytest.mark.parametrize(
    "text, parsed", [("10.0.0.2:7000", ("10.0.0.2", 7000)), ("[::1]:7000", ("::1", 7000))]
)
def test_host_port(text, parsed):
    assert host_port(text) == parsed
