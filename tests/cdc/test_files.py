"""cdc/files.py: a file written atomically is replaced whole and leaves no temporary behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.files import write_atomically


@pytest.mark.parametrize("fsync", [False, True])
def test_replaces_the_file_whole(tmp_path: Path, fsync: bool):
    path = tmp_path / "status.json"
    write_atomically(path, "first", fsync=fsync)
    write_atomically(path, "second", fsync=fsync)
    assert path.read_text() == "second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["status.json"]


def test_a_failed_write_leaves_the_file_as_it_was(tmp_path: Path):
    path = tmp_path / "state.json"
    write_atomically(path, "kept")
    (tmp_path / "state.json.tmp").mkdir()  # the temporary cannot be opened for writing
    with pytest.raises(OSError):
        write_atomically(path, "lost")
    assert path.read_text() == "kept"
