"""A full file system (a small tmpfs of its own): the write that fails leaves the writer at the
end of its last whole transaction (`abandon`), a new writer cuts the torn tail and appends at
that very byte once there is room, and every file still reads with checksums verified."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from binlog_writer import BinlogWriter, FsyncPolicy
from cdc.binlog.constants import HEADER_LEN, EventType
from cdc.binlog.reader import read_file
from cdc.pauses import is_disk_full
from tests.binlog_writer.test_recovery import readable, txn

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("mount") is None, reason="mounts a tmpfs: needs root"
)


@pytest.fixture
def small_fs(tmp_path: Path):
    path = tmp_path / "fs"
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.parametrize("fsync", ["txn", "interval:100"])
def test_full_then_grown_continues_at_the_same_byte(small_fs: Path, fsync: str):
    w = BinlogWriter(small_fs, fsync=FsyncPolicy.parse(fsync), max_file_size=64 << 10)
    written = 0
    with pytest.raises(OSError) as failed:
        for i in range(1_000_000):
            w.append_transaction(txn(i))
            w.flush()  # what the leader does after each batch
            written = i + 1
    assert is_disk_full(failed.value) and failed.value.errno == errno.ENOSPC
    w.abandon()
    file, end = w.file, w.position
    assert w.closed
    subprocess.run(["mount", "-o", "remount,size=2m", str(small_fs)], check=True)

    w2 = BinlogWriter(small_fs, fsync=FsyncPolicy.parse(fsync), max_file_size=64 << 10)
    assert (w2.file, w2.position) == (file, end)  # the torn tail cut, nothing before it
    at = w2.append_transaction(txn(written))
    assert (at.file, at.start) == (file, end)
    w2.close()

    xids = []
    for name in w2.files():
        path = small_fs / name
        assert readable(path), name
        _, reader = read_file(path)
        xids += [
            int.from_bytes(ev.data[HEADER_LEN : HEADER_LEN + 8], "little")
            for ev in reader
            if ev.type_code == EventType.XID
        ]
    assert xids == list(range(written + 1))  # every transaction once, none torn
