"""`append_batch`: several transactions in one call land exactly as one `append_encoded` each,
rotations between the same transactions included."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlog_writer import BinlogWriter, FsyncPolicy
from tests.binlog_writer.test_recovery import readable
from tests.binlog_writer.test_stream import raw, without_times


def files(directory: Path) -> list[list[bytes]]:
    return [without_times(f) for f in sorted(directory.glob("binlog.0*"))]


@pytest.mark.parametrize("max_file_size", [1 << 20, 1200, 300])
@pytest.mark.parametrize("fsync", [FsyncPolicy.per_txn(), FsyncPolicy.never()])
def test_a_batch_is_the_same_files_as_one_append_per_transaction(
    tmp_path: Path, max_file_size: int, fsync
):
    one = BinlogWriter(tmp_path / "one", fsync=fsync, max_file_size=max_file_size)
    many = BinlogWriter(tmp_path / "many", fsync=fsync, max_file_size=max_file_size)
    for batch in ([0], [1, 2, 3], list(range(4, 20)), [20, 21]):
        buf, ends = bytearray(), []
        for i in batch:
            one.append_encoded(bytearray().join(raw(i)))
            buf += b"".join(raw(i))
            ends.append(len(buf))
        landed = many.append_batch(buf, ends)
        assert landed[0][1] == 0 and [i for _, i in landed] == sorted({i for _, i in landed})
        assert many.position == one.position and many.file == one.file
    one.close(), many.close()
    assert files(tmp_path / "one") == files(tmp_path / "many")
    assert len(files(tmp_path / "many")) > (1 if max_file_size < 1 << 20 else 0)
    for f in (tmp_path / "many").glob("binlog.0*"):
        assert readable(f)


def test_a_batch_must_end_with_its_transactions(tmp_path: Path):
    w = BinlogWriter(tmp_path, fsync=FsyncPolicy.never())
    buf = bytearray().join(raw(0))
    with pytest.raises(ValueError, match="ends"):
        w.append_batch(buf, [len(buf) - 1])
    with pytest.raises(ValueError, match="terminator"):  # the last event is no CTS mark
        w.append_batch(buf[: -len(raw(0)[-1])], [len(buf) - len(raw(0)[-1])])


@pytest.mark.parametrize("fsync", [FsyncPolicy.never(), FsyncPolicy.parse("interval:1000")])
def test_a_batch_a_buffer_long_is_written_at_once_as_buffering_would(tmp_path: Path, fsync):
    """A batch at least the writer's buffer long, nothing pending: written as it is (not
    copied into the pending buffer first), the same file as with a buffer it fits in."""
    direct = BinlogWriter(tmp_path / "direct", fsync=fsync, buffer_size=200)
    buffered = BinlogWriter(tmp_path / "buffered", fsync=fsync, buffer_size=1 << 20)
    for batch in ([0], [1, 2, 3], list(range(4, 20))):
        buf, ends = bytearray(), []
        for i in batch:
            buf += b"".join(raw(i))
            ends.append(len(buf))
        assert len(buf) >= 200 or batch == [0]
        for w in (direct, buffered):
            w.append_batch(bytearray(buf), ends)
        # what a full buffer would have been: in the file now, without a flush
        on_disk = sum(f.stat().st_size for f in (tmp_path / "direct").glob("binlog.0*"))
        assert on_disk == direct.position or len(buf) < 200
    direct.close(), buffered.close()
    assert files(tmp_path / "direct") == files(tmp_path / "buffered")
