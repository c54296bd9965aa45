"""Password checks of the two auth plugins we accept, against the stored forms in DumperConfig
(`*HEX` native hash; hex SHA256(SHA256(pw)) for caching_sha2 fast auth), and grant texts."""

from __future__ import annotations

import hashlib
import hmac

from cdc.config import DumperUser
from cdc.protocol import auth

sha2_digest = auth.caching_sha2_digest


def verify_native(user: DumperUser, salt: bytes, response: bytes) -> bool:
    return auth.native_verify(user.password_hash, salt, response)


def verify_caching_sha2(user: DumperUser, salt: bytes, response: bytes) -> bool:
    """Fast-auth check: response = SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + salt)."""
    if not user.sha2_digest:
        return False
    stage2 = bytes.fromhex(user.sha2_digest)
    if len(response) != 32:
        return False
    mask = hashlib.sha256(stage2 + salt[:20]).digest()
    stage1 = bytes(a ^ b for a, b in zip(response, mask, strict=True))
    return hmac.compare_digest(hashlib.sha256(stage1).digest(), stage2)


def grants(user: DumperUser) -> list[str]:
    privs = ["SELECT", "SHOW DATABASES", "REPLICATION CLIENT"]
    if user.replication:
        privs += ["REPLICATION SLAVE"]
    if user.admin:
        privs += ["SUPER", "PROCESS", "RELOAD"]
    return [f"GRANT {', '.join(privs)} ON *.* TO '{user.name}'@'%'"]
