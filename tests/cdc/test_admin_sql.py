"""cdc.admin_sql's connections: PyMySQL's default ("preferred") TLS context, made without the CA
bundle it never reads."""

from __future__ import annotations

import ssl

import pymysql.connections

from cdc.admin_sql import _Connection, preferred_tls_context

SETTINGS = (
    "protocol",
    "check_hostname",
    "verify_mode",
    "verify_flags",
    "options",
    "minimum_version",
    "maximum_version",
    "post_handshake_auth",
)


def test_the_preferred_tls_context_is_pymysqls_without_its_ca_bundle():
    ours = preferred_tls_context()
    theirs = pymysql.connections.Connection._create_ssl_ctx(None, {})
    for name in SETTINGS:
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.get_ciphers() == theirs.get_ciphers()
    assert ours.verify_mode == ssl.CERT_NONE  # why the CA bundle is never read
    assert ours.get_ca_certs() == []


def test_explicit_tls_options_get_pymysqls_own_context():
    conn = _Connection.__new__(_Connection)  # not connected: only its context maker is asked
    ctx = ssl.create_default_context()
    assert conn._create_ssl_ctx(ctx) is ctx  # PyMySQL's: an SSLContext passed is used as given
    assert conn._create_ssl_ctx({"verify_mode": True}).verify_mode == ssl.CERT_REQUIRED
    ours = conn._create_ssl_ctx({})
    assert ours.verify_mode == ssl.CERT_NONE and ours.get_ca_certs() == []
