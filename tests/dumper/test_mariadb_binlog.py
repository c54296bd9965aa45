"""mariadb-binlog --read-from-remote-server against the Dumper: text decoding of every file, --raw
copies identical to the served files (but the FDE in-use flag), and --stop-never following growth."""

from __future__ import annotations

import subprocess
import time

from tests.dumper.binlog_gen import T1
from tests.dumper.helpers import PASSWORD, USER, wait_for


def _cmd(port: int, *args: str) -> list[str]:
    return [
        "mariadb-binlog",
        "--read-from-remote-server",
        "--host=127.0.0.1",
        f"--port={port}",
        f"--user={USER}",
        f"--password={PASSWORD}",
        *args,
    ]


def test_text_all_files(server, binlogs):
    out = subprocess.run(
        _cmd(server.port, "-vv", "--base64-output=decode-rows", "--to-last-log", "binlog.000001"),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "CREATE TABLE t1" in text
    assert text.count("### INSERT INTO `gbl`.`t1`") == 4
    assert text.count("### UPDATE `gbl`.`t1`") == 1
    assert text.count("### DELETE FROM `gbl`.`t1`") == 1
    assert "Rotate to binlog.000002" in text
    assert "@2='bb'" in text


def test_raw_copies_are_byte_identical(server, binlogs, tmp_path):
    out_dir = tmp_path / "raw"
    out_dir.mkdir()
    res = subprocess.run(
        _cmd(server.port, "--raw", f"--result-file={out_dir}/", "--to-last-log", "binlog.000001"),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in out_dir.iterdir()) == binlogs.files
    for name in binlogs.files:
        served = bytearray((binlogs.dir / name).read_bytes())
        served[4 + 17] &= ~0x01  # the master clears LOG_EVENT_BINLOG_IN_USE_F (offset 21)
        assert (out_dir / name).read_bytes() == bytes(served), name


def test_stop_never_receives_appended_event(server, binlogs, tmp_path):
    out_file = tmp_path / "stream.txt"
    with open(out_file, "w") as out:
        proc = subprocess.Popen(
            _cmd(
                server.port, "--stop-never", "-vv", "--base64-output=decode-rows", "binlog.000002"
            ),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: "@2='bb'" in out_file.read_text(), 15, "existing events")
        time.sleep(0.3)
        assert proc.poll() is None  # blocking: still connected at the end of the active file
        binlogs.active.txn(T1, 9, insert=[(42, "appended")])
        binlogs.active.flush(binlogs.dir / "binlog.000002")
        server.notify()
        wait_for(lambda: "@2='appended'" in out_file.read_text(), 15, "appended event")
    finally:
        proc.kill()
        proc.wait(10)
