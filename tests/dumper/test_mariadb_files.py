"""The sender is agnostic of the file flavour: real MariaDB 10.11 binlog files (from the shared
cluster's DN) are listed, described by SHOW BINLOG EVENTS and copied byte for byte by
mariadb-binlog --raw."""

from __future__ import annotations

import shutil
import subprocess

from tests.dumper.helpers import PASSWORD, USER, ServerThread


def test_serves_real_mariadb_binlogs(cluster, tmp_path):
    dn = cluster.dn(1)
    conn = dn.connect()
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS dumper_src")
        cur.execute("CREATE TABLE IF NOT EXISTS dumper_src.t (id INT PRIMARY KEY, v TEXT)")
        cur.execute("REPLACE INTO dumper_src.t VALUES (1, 'x'), (2, REPEAT('y', 3000))")
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW BINARY LOGS")
        names = [r[0] for r in cur.fetchall()][:-1]  # closed files only
    conn.close()
    src = dn.home / "binlog"
    served = tmp_path / "mariadb"
    served.mkdir()
    for name in names:
        shutil.copy(src / name, served / name)
    (served / "binlog.index").write_text("".join(f"./{n}\n" for n in names))
    with ServerThread(served) as srv:
        import pymysql

        c = pymysql.connect(host="127.0.0.1", port=srv.port, user=USER, password=PASSWORD)
        with c.cursor() as cur:
            for name in names:
                cur.execute(f"SHOW BINLOG EVENTS IN '{name}'")
                rows = cur.fetchall()
                assert rows[0][2] == "Format_desc" and "Server ver: 10.11" in rows[0][5]
                assert all("undecodable" not in r[5] for r in rows), rows
            cur.execute(f"SHOW BINLOG EVENTS IN '{names[-1]}'")
            infos = [r[5] for r in cur.fetchall()]
        assert any("dumper_src.t" in i for i in infos)
        out = tmp_path / "raw"
        out.mkdir()
        res = subprocess.run(
            [
                "mariadb-binlog", "--read-from-remote-server", "--host=127.0.0.1",
                f"--port={srv.port}", f"--user={USER}", f"--password={PASSWORD}", "--raw",
                f"--result-file={out}/", "--to-last-log", names[0],
            ],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr
        for name in names:
            assert (out / name).read_bytes() == (served / name).read_bytes(), name
