"""TLS on the dumper port: the MySQL SSL-request upgrade, with the mariadb client and PyMySQL."""

from __future__ import annotations

import ssl
import subprocess

import pymysql
import pytest

from cdc.config import ConfigError
from tests.dumper.helpers import PASSWORD, USER, ServerThread


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(d / "key.pem"),
            "-out",
            str(d / "cert.pem"),
        ],
        check=True,
        capture_output=True,
    )
    return d / "cert.pem", d / "key.pem"


def mariadb(port: int, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            "mariadb",
            "-h127.0.0.1",
            f"-P{port}",
            f"-u{USER}",
            f"-p{PASSWORD}",
            *extra,
            "-e",
            "SHOW MASTER STATUS",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_tls_upgrade_with_mariadb_client_and_pymysql(binlogs, certificate):
    cert, key = certificate
    with ServerThread(binlogs.dir, tls_cert=str(cert), tls_key=str(key)) as s:
        res = mariadb(s.port, "--ssl", f"--ssl-ca={cert}", "--ssl-verify-server-cert")
        assert res.returncode == 0, res.stderr
        assert "binlog.000002" in res.stdout
        conn = pymysql.connect(
            host="127.0.0.1",
            port=s.port,
            user=USER,
            password=PASSWORD,
            ssl={"ca": str(cert)},
            ssl_verify_identity=False,
        )
        try:
            assert isinstance(conn._sock, ssl.SSLSocket)  # really encrypted
            with conn.cursor() as cur:
                cur.execute("SELECT @@version")
                assert cur.fetchone()[0].startswith("5.7")
        finally:
            conn.close()
        assert mariadb(s.port, "--skip-ssl").returncode == 0  # plain clients still welcome


def test_ssl_client_refused_clearly_without_tls(server):
    res = mariadb(server.port, "--ssl", "--ssl-verify-server-cert")
    assert res.returncode != 0 and "SSL" in res.stderr


def test_bad_certificate_is_a_config_error(binlogs, tmp_path):
    (tmp_path / "bad.pem").write_text("not a certificate")
    with pytest.raises(ConfigError, match="tls_cert"):
        ServerThread(binlogs.dir, tls_cert=str(tmp_path / "bad.pem"))


def test_client_hello_in_the_same_segment_as_the_ssl_request(binlogs, certificate):
    """A client whose ClientHello arrives together with its SSL request (one TCP segment, as
    on a loaded machine): the server must hand those bytes to TLS, not lose them in the
    plaintext reader (asyncio's start_tls did: the handshake hung until the timeout)."""
    import socket
    import struct

    cert, key = certificate
    with ServerThread(binlogs.dir, tls_cert=str(cert), tls_key=str(key)) as s:
        sock = socket.create_connection(("127.0.0.1", s.port), timeout=5)
        try:
            header = sock.recv(4, socket.MSG_WAITALL)  # the greeting: skip it
            sock.recv(int.from_bytes(header[:3], "little"), socket.MSG_WAITALL)
            caps = 0x0200 | 0x0800 | 0x8000 | 0x80000  # PROTOCOL_41, SSL, SECURE_CONN, PLUGIN_AUTH
            request = struct.pack("<IIB23x", caps, 1 << 24, 45)
            context = ssl.create_default_context(cafile=str(cert))
            incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            tls = context.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
            with pytest.raises(ssl.SSLWantReadError):
                tls.do_handshake()
            sock.sendall(len(request).to_bytes(3, "little") + b"\x01" + request + outgoing.read())
            while True:  # a server that lost the ClientHello never answers: recv times out
                try:
                    tls.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    sock.sendall(outgoing.read())
                    data = sock.recv(65536)
                    assert data, "the server closed the connection during the TLS handshake"
                    incoming.write(data)
            assert tls.version() is not None
        finally:
            sock.close()
