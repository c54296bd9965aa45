"""Password scrambles of `mysql_native_password` and `caching_sha2_password` (both sides)."""

from __future__ import annotations

import hashlib
import hmac

NATIVE = "mysql_native_password"
CACHING_SHA2 = "caching_sha2_password"


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def native_scramble(password: str | bytes, salt: bytes) -> bytes:
    """Client response: SHA1(pw) XOR SHA1(salt + SHA1(SHA1(pw))); empty for an empty password."""
    if not password:
        return b""
    pw = password.encode() if isinstance(password, str) else password
    stage1 = hashlib.sha1(pw).digest()
    return _xor(stage1, hashlib.sha1(salt[:20] + hashlib.sha1(stage1).digest()).digest())


def native_hash(password: str) -> str:
    """The stored form, as MySQL's PASSWORD(): '*' + hex(SHA1(SHA1(pw))), '' for no password."""
    if not password:
        return ""
    return "*" + hashlib.sha1(hashlib.sha1(password.encode()).digest()).hexdigest().upper()


def native_verify(stored_hash: str, salt: bytes, response: bytes) -> bool:
    """Server side: check a client response against the stored `*HEX` hash only."""
    if not stored_hash:
        return response == b""
    if len(response) != 20:
        return False
    stage2 = bytes.fromhex(stored_hash.lstrip("*"))
    stage1 = _xor(response, hashlib.sha1(salt[:20] + stage2).digest())
    return hmac.compare_digest(hashlib.sha1(stage1).digest(), stage2)


def caching_sha2_scramble(password: str | bytes, salt: bytes) -> bytes:
    """Client response: SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + salt)."""
    if not password:
        return b""
    pw = password.encode() if isinstance(password, str) else password
    p1 = hashlib.sha256(pw).digest()
    p2 = hashlib.sha256(p1).digest()
    return _xor(p1, hashlib.sha256(p2 + salt[:20]).digest())


def caching_sha2_digest(password: str) -> str:
    """The stored form for caching_sha2_password fast auth: hex(SHA256(SHA256(pw)))."""
    if not password:
        return ""
    return hashlib.sha256(hashlib.sha256(password.encode()).digest()).hexdigest()
