"""API keys: a key file (re-read when it changes) and one token, checked in constant time."""

from __future__ import annotations

import enum
import hashlib
import hmac
import ipaddress
import logging
import os
import stat
import threading
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "ApiKeys",
    "KeyFileError",
    "Verdict",
    "check_key",
    "exposure_refusal",
    "exposure_warning",
    "first_key",
    "is_loopback",
    "read_key_file",
]

log = logging.getLogger("rtplan.keys")

#: The shortest key accepted: 16 visible ASCII characters are at least ~95 bits when drawn at
#: random (`python -c 'import secrets; print(secrets.token_urlsafe(32))'`: 43 characters).
MIN_KEY_CHARS = 16


class KeyFileError(ValueError):
    """A key file that cannot serve: unreadable, writable by anyone, a bad line, or no key.
    The message names the file and the line, never a key."""


class Verdict(enum.Enum):
    """What a presented key is worth (`ApiKeys.verdict`)."""

    OPEN = "open"  # no key is configured: the call is open
    GRANTED = "granted"  # a configured key
    MISSING = "missing"  # keys are configured and none was presented (HTTP 401)
    WRONG = "wrong"  # a key that is none of them (HTTP 403)


def check_key(key: str, where: str = "the key") -> str:
    """`key` if it can be a key: at least `MIN_KEY_CHARS` visible ASCII characters (what an
    `Authorization: Bearer` header carries as it is), no space.

    Raises:
        ValueError: it cannot; the message says why and names `where`, never the key.
    """
    if len(key) < MIN_KEY_CHARS or not all("!" <= c <= "~" for c in key):
        raise ValueError(
            f"{where} must be at least {MIN_KEY_CHARS} visible ASCII characters, no spaces "
            f"(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return key


def read_key_file(path: Path | str) -> tuple[str, ...]:
    """The keys of the file at `path`: one a line, blank lines and `#` comments left out.

    A file anyone may write is refused (anyone on the machine could add a key). Its readers
    are not checked: compose mounts a secret with the mode it has on the host and Kubernetes
    with its volume's `defaultMode`, and the service's user must read it there.

    Raises:
        KeyFileError: unreadable, writable by anyone, a line that is no key (`check_key`),
            or no key at all (an empty file would lock everyone out, or be taken for none).
    """
    path = Path(path)
    try:
        with path.open("rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            raw = f.read()
    except OSError as e:
        reason = os.strerror(e.errno) if e.errno else str(e)
        raise KeyFileError(f"cannot read the API key file {path} ({reason})") from None
    if not stat.S_ISREG(mode):
        raise KeyFileError(f"the API key file {path} is not a file")
    if mode & stat.S_IWOTH:
        raise KeyFileError(
            f"the API key file {path} is writable by anyone (anyone could add a key): "
            f"chmod o-w {path}"
        )
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise KeyFileError(f"the API key file {path} is not ASCII text") from None
    keys = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            keys.append(check_key(line, f"line {number} of the API key file {path}"))
        except ValueError as e:
            raise KeyFileError(str(e)) from None
    if not keys:
        raise KeyFileError(
            f"the API key file {path} holds no key (one a line; blank lines and # comments "
            "are left out)"
        )
    return tuple(keys)


def first_key(path: Path | str) -> str:
    """The key a client presents from a key file: its first (`read_key_file`'s rules)."""
    return read_key_file(path)[0]


def _digest(key: str) -> bytes:
    # Equal-length digests: the comparison takes the same time whatever the key's length.
    return hashlib.sha256(key.encode()).digest()


class ApiKeys:
    """The keys that open a service's guarded calls: one token (a setting) and the lines of
    an API key file, which is read again whenever it changes (its inode, size or mtime), so
    keys rotate without a restart.

    A file that can no longer serve (deleted, emptied, a bad line) opens nothing until it is
    fixed: its old keys are dropped, a WARNING says why once (never a key), and the token
    still works. Neither `repr` nor any message shows a key.

    Args:
        token: a single key, e.g. the env server's agent token; None: none.
        key_file: the API key file; None: none.

    Raises:
        KeyFileError: `key_file` cannot serve at construction (a service refuses to start).
    """

    def __init__(self, *, token: str | None = None, key_file: Path | str | None = None) -> None:
        self._token = None if token is None else _digest(token)
        self._file = None if key_file is None else Path(key_file)
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int, int] | None = None
        self._file_keys: tuple[bytes, ...] = ()
        self._broken: str | None = None
        if self._file is not None:
            self._file_keys = tuple(map(_digest, read_key_file(self._file)))
            self._seen = self._stamp()

    @property
    def required(self) -> bool:
        """Whether any key is configured (a call without one is refused)."""
        return self._token is not None or self._file is not None

    @property
    def key_file(self) -> Path | None:
        return self._file

    def __repr__(self) -> str:
        return f"ApiKeys(token={'set' if self._token else None}, key_file={self._file})"

    def _stamp(self) -> tuple[int, int, int, int] | None:
        try:
            s = self._file.stat()  # follows links: a Kubernetes secret swaps its ..data link
        except OSError:
            return None
        return s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns

    def _keys(self) -> Iterable[bytes]:
        if self._file is None:
            return () if self._token is None else (self._token,)
        with self._lock:
            stamp = self._stamp()
            if stamp is None or stamp != self._seen:
                self._reload(stamp)
            keys = self._file_keys
        return keys if self._token is None else (*keys, self._token)

    def _reload(self, stamp: tuple[int, int, int, int] | None) -> None:
        self._seen = stamp
        try:
            keys = read_key_file(self._file)
        except KeyFileError as e:
            if self._broken != str(e):
                log.warning("%s: none of its keys opens anything until it is fixed", e)
            self._broken, self._file_keys = str(e), ()
            return
        log.info("API key file %s read again: %d key(s)", self._file, len(keys))
        self._broken, self._file_keys = None, tuple(map(_digest, keys))

    def verdict(self, presented: str | None) -> Verdict:
        """What `presented` (a bearer key, None or "" when none was given) opens: compared
        with every key in constant time (a match found early does not end the loop)."""
        if not self.required:
            return Verdict.OPEN
        if not presented:
            return Verdict.MISSING
        given = _digest(presented)
        found = False
        for key in self._keys():
            found |= hmac.compare_digest(given, key)
        return Verdict.GRANTED if found else Verdict.WRONG


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps a service on this machine: 127.0.0.0/8, ::1 (an IPv4-mapped
    ::ffff:127.x too) and "localhost". Anything else, "" (every interface), 0.0.0.0, ::, a
    LAN address or another name, reaches further."""
    host = host.strip().strip("[]").lower()
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def exposure_refusal(
    service: str,
    host: str,
    keys: ApiKeys,
    *,
    open_on_purpose: bool,
    guarded: str,
    token_variable: str,
) -> str | None:
    """The one line a service prints when it refuses to start: it binds `host`, which is not
    loopback, with no key and without `--open`; None where it may start.

    Args:
        service: its name in the line ("env server").
        guarded: what a key guards, as "anyone who reaches it could ..." ends ("create
            sessions").
        token_variable: the environment variable of its single key (no flag: `ps` shows flags).
    """
    if keys.required or open_on_purpose or is_loopback(host):
        return None
    return (
        f"{service}: refusing to serve {host}, which is not loopback, with no key (anyone who "
        f"reaches it could {guarded}): give keys with --api-key-file FILE (one a line) or "
        f"{token_variable}, or pass --open to serve it open on purpose"
    )


def exposure_warning(service: str, host: str, guarded: str) -> str:
    """The WARNING of a service that serves a non-loopback `host` open (`--open`, no key)."""
    return f"{service} serves {host} open (--open, no key): anyone who reaches it can {guarded}"
