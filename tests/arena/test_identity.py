"""Agent tokens (arena/identity.py): their shape, their hash computed by hand, their checks."""

from __future__ import annotations

import hashlib
import re

import pytest

from rtplan.arena import identity
from rtplan.arena.identity import StoredToken, matches, new_token, token_id


def test_a_token_is_a_public_id_and_a_secret_and_the_store_keeps_a_salted_scrypt_hash():
    token, stored = new_token()
    prefix, public, secret = token.split("_", 2)
    assert prefix == "rta" and public == stored.token_id == token_id(token)
    assert re.fullmatch(r"[0-9a-f]{16}", public) and len(secret) == 43  # 32 bytes, base64
    assert len(stored.salt) == 16 and stored.scheme == "scrypt:16384:8:1"
    by_hand = hashlib.scrypt(secret.encode(), salt=stored.salt, n=16384, r=8, p=1, dklen=32)
    assert stored.digest == by_hand
    assert secret.encode() not in stored.digest + stored.salt
    assert matches(token, stored)


def test_every_token_and_salt_is_new():
    made = [new_token() for _ in range(3)]
    assert len({t for t, _ in made}) == len({s.salt for _, s in made}) == 3
    assert len({s.token_id for _, s in made}) == 3


def test_a_wrong_secret_another_id_or_no_token_shape_does_not_match():
    token, stored = new_token()
    other, _ = new_token()
    last = "A" if token[-1] != "A" else "B"
    assert not matches(token[:-1] + last, stored)  # one character of the secret changed
    assert not matches(other, stored)
    secret = token.split("_", 2)[2]
    assert not matches(f"rta_{'0' * 16}_{secret}", stored)  # its secret under another id
    for malformed in ("", "rta", token + " ", f"Bearer {token}", f"rtx_{token[4:]}"):
        assert not matches(malformed, stored) and token_id(malformed) is None


def test_a_token_hashed_under_an_older_cost_still_checks():
    """The scheme is stored with each hash, so raising the cost later keeps old tokens valid."""
    salt = bytes(range(16))
    digest = hashlib.scrypt(b"s" * 43, salt=salt, n=1024, r=8, p=1, dklen=32)
    stored = StoredToken("ab" * 8, salt, digest, scheme="scrypt:1024:8:1")
    assert matches(f"rta_{'ab' * 8}_{'s' * 43}", stored)
    assert not matches(f"rta_{'ab' * 8}_{'t' * 43}", stored)
    with pytest.raises(ValueError, match="unknown token hash scheme"):
        matches(f"rta_{'ab' * 8}_{'s' * 43}", StoredToken("ab" * 8, salt, digest, "md5:1:1:1"))


def test_names_that_travel_in_urls():
    pattern = re.compile(identity.NAME_PATTERN)
    assert all(pattern.match(n) for n in ("alice", "A.1", "my_bot-2", "7"))
    assert not any(pattern.match(n) for n in ("", "-x", ".x", "a/b", "a b", "é"))
