"""How the dumper starts a child process of its own (the server process, a stream's process):
`python -c "from <module> import main"`, then the child's spec, pickled and length-prefixed, as
the first bytes on its stdin. The pipe then stays open: its end tells the child that the parent
is gone."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import struct
import sys
from typing import Any

SPEC_LEN = struct.Struct("<Q")


async def spawn(module: str, spec: dict[str, Any], pass_fds=()) -> asyncio.subprocess.Process:
    """`module.main()` in a new interpreter, stdin and stdout piped, `spec` sent first."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        # Not `-m module`: its package imports it first, and runpy then warns that it runs a
        # module already imported.
        "-c",
        f"import sys; from {module} import main; sys.exit(main())",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        pass_fds=pass_fds,
    )
    assert proc.stdin is not None
    blob = pickle.dumps(spec)
    proc.stdin.write(SPEC_LEN.pack(len(blob)) + blob)
    return proc


async def stop_child(proc: asyncio.subprocess.Process | None, timeout_s: float) -> None:
    """Close the child's stdin (its cue to stop) and wait for it; killed past `timeout_s`."""
    if proc is None or proc.returncode is not None:
        return
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        await asyncio.wait_for(proc.wait(), timeout_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


def read_spec(fd: int = 0) -> dict[str, Any] | None:
    """In the child: the spec from our own parent (stdin, unbuffered: what follows on the pipe
    stays there for the child to read), or None if the parent went before sending all of it."""
    head = _read_exact(fd, SPEC_LEN.size)
    blob = _read_exact(fd, SPEC_LEN.unpack(head)[0]) if head is not None else None
    return pickle.loads(blob) if blob is not None else None


def _read_exact(fd: int, n: int) -> bytes | None:
    blob = b""
    while len(blob) < n:
        chunk = os.read(fd, n - len(blob))
        if not chunk:
            return None
        blob += chunk
    return blob
