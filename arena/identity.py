"""Agent identity: the names an agent and a version may take, and their tokens (made here,
stored only as a salted scrypt hash, checked in constant time)."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

#: An agent's name and a version's label: a letter or digit, then letters, digits, `.`, `_` or
#: `-` (they travel in URL paths: `/v1/agents/{name}/versions/{version}`).
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
NAME_LEN, VERSION_LEN = 64, 32

#: Every token starts with this, so a log filter or a secret scanner can find one.
PREFIX = "rta"
#: The hash scheme and its cost, stored beside each hash so a later release can raise the cost
#: and still check the tokens made before: scrypt with the scrypt paper's interactive
#: parameters (N=2**14, r=8, p=1: ~16 MiB and ~50 ms on this project's 2-core machine).
SCHEME = "scrypt:16384:8:1"
SALT_BYTES = 16
#: The public part of a token: which version's stored hash to check (hex, not secret).
TOKEN_ID_BYTES = 8
#: The secret part: 32 random bytes (256 bits), URL-safe base64.
SECRET_BYTES = 32

_TOKEN = re.compile(rf"^{PREFIX}_([0-9a-f]{{{2 * TOKEN_ID_BYTES}}})_([A-Za-z0-9_-]{{20,100}})$")


@dataclass(frozen=True)
class StoredToken:
    """What the database keeps of a token: never the token, nor anything it can be read from.

    Attributes:
        token_id: the token's public id (its `rta_<token_id>_` part), unique, indexed.
        salt: random bytes hashed with the secret.
        digest: the scheme's hash of the secret with the salt.
        scheme: the hash and its cost (`SCHEME` when made now).
    """

    token_id: str
    salt: bytes
    digest: bytes
    scheme: str = SCHEME


def new_token() -> tuple[str, StoredToken]:
    """A fresh token (shown once, to its owner) and what to store of it.

    Returns:
        (`rta_<token id>_<secret>`, its `StoredToken`).
    """
    token_id = secrets.token_hex(TOKEN_ID_BYTES)
    secret = secrets.token_urlsafe(SECRET_BYTES)
    salt = secrets.token_bytes(SALT_BYTES)
    return f"{PREFIX}_{token_id}_{secret}", StoredToken(token_id, salt, _digest(secret, salt))


def token_id(token: str) -> str | None:
    """The public id of a well-formed token, or None when `token` has not a token's shape."""
    match = _TOKEN.match(token)
    return match.group(1) if match else None


def matches(token: str, stored: StoredToken) -> bool:
    """Whether `token` is the one `stored` was made from: its id, then its secret's hash
    compared in constant time (`hmac.compare_digest`)."""
    match = _TOKEN.match(token)
    if match is None or match.group(1) != stored.token_id:
        return False
    return hmac.compare_digest(_digest(match.group(2), stored.salt, stored.scheme), stored.digest)


def _digest(secret: str, salt: bytes, scheme: str = SCHEME) -> bytes:
    name, n, r, p = scheme.split(":")
    if name != "scrypt":
        raise ValueError(f"unknown token hash scheme {scheme!r}")
    return hashlib.scrypt(
        secret.encode(), salt=salt, n=int(n), r=int(r), p=int(p), maxmem=64 * 2**20, dklen=32
    )
