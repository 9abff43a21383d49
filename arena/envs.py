"""The env servers an arena plays on, reached over their public REST API only.

The arena creates each ranked episode's session with `POST /v1/sessions` (an outside agent's
session, sealed, recorded) and reads how it went with `GET /v1/sessions/{id}`, as any client
may: it never imports the env server's code (the `arena-over-the-wire` import contract), so
the env servers can be other processes, machines or Kubernetes pods.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: Seconds one REST call to an env server may take.
CALL_TIMEOUT_S = 10.0


class EnvUnavailable(Exception):
    """No env server could be reached, or each refused for now (full, down, erroring)."""


class EnvRefused(Exception):
    """An env server refused a request for good (a 4xx other than 429): `status`, `detail`."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail


@dataclass
class EnvServer:
    """One env server: its REST base URL, and its Env API's address once learned."""

    url: str
    grpc: str | None = None
    #: The Env API's address as agents reach it (`--env URL=HOST:PORT`), where the URL's host
    #: is a name only the arena resolves (a container's, a pod's); None: the URL's host.
    public_grpc: str | None = field(default=None, compare=False)
    #: The URL people's browsers reach it at (`--env URL=http://HOST:PORT`), for the pages'
    #: links to its lobby, replays and live views; None: the URL.
    public_url: str | None = field(default=None, compare=False)
    #: Ranked episodes this arena has playing on it now (placement: fewest first).
    playing: int = field(default=0, compare=False)

    @property
    def host(self) -> str:
        return urllib.parse.urlsplit(self.url).hostname or "127.0.0.1"

    @property
    def shown_url(self) -> str:
        """The URL a person's browser opens (the public one where given)."""
        return self.public_url or self.url


def _url(url: str) -> str:
    url = url.strip().rstrip("/")
    parts = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an env server's URL (http://HOST:PORT)")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def _normal(item: str) -> str:
    """`URL[=HOST:PORT][=http://HOST:PORT]` with each part normalized, in that order."""
    url, *extras = item.strip().split("=")
    grpc = public = None
    for extra in extras:
        if "://" in extra:
            if public is not None:
                raise ValueError(f"{item.strip()!r} names two public URLs")
            public = _url(extra)
        else:
            if grpc is not None:
                raise ValueError(f"{item.strip()!r} names two Env API addresses")
            grpc = _public(extra)
    return "=".join(x for x in (_url(url), grpc, public) if x is not None)


def _split(item: str) -> EnvServer:
    """A normalized `--env` item as an `EnvServer`."""
    url, *extras = item.split("=")
    grpc = next((x for x in extras if "://" not in x), None)
    public = next((x for x in extras if "://" in x), None)
    return EnvServer(url, public_grpc=grpc, public_url=public)


def _public(address: str) -> str:
    parts = urllib.parse.urlsplit(f"//{address.strip()}")
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or not port or parts.path or parts.username:
        raise ValueError(f"{address!r} is not an Env API address for agents (HOST:PORT)")
    return parts.netloc


def parse_urls(value: str | Sequence[str]) -> list[str]:
    """Env server URLs from a comma-separated string or a list (`HOST:PORT` means http), each
    followed, where agents or people reach it by another name than the arena (a container's,
    a pod's), by `=HOST:PORT`, its Env API's address for agents, and `=http://HOST:PORT`, its
    URL for people's browsers (`http://env-server:8000=localhost:50052=http://localhost:8000`)."""
    items = value.split(",") if isinstance(value, str) else list(value)
    return [_normal(u) for u in items if u.strip()]


class EnvServers:
    """The env servers of an arena.

    Args:
        urls: their REST base URLs (`http://HOST:PORT`), each followed by `=HOST:PORT`, its Env
            API's address for agents, and `=http://HOST:PORT`, its URL for browsers, where
            they reach it by another name than the arena (`parse_urls`).
        key: the key an env server asks of whoever creates sessions (its agent token or one
            of its API keys), or None where they ask none.
    """

    def __init__(self, urls: Sequence[str], key: str | None = None) -> None:
        self.servers = [_split(item) for item in parse_urls(urls)]
        self._key = key

    def __bool__(self) -> bool:
        return bool(self.servers)

    def by_url(self, url: str) -> EnvServer:
        found = next((s for s in self.servers if s.url == url), None)
        return found if found is not None else EnvServer(url)

    def shown(self, url: str) -> str:
        """The URL a person's browser opens for env server `url` (an episode's record)."""
        return self.by_url(url).shown_url

    async def create(self, body: dict[str, Any]) -> tuple[EnvServer, dict[str, Any]]:
        """Creates a session on the env server with the fewest ranked episodes playing, else
        the next.

        Returns:
            (the server, POST /v1/sessions' answer: id, token, grpc_port, session).

        Raises:
            EnvUnavailable: none could be reached or each refused for now (429, 5xx).
            EnvRefused: a server refused the body itself (a 4xx other than 429).
        """
        reasons = []
        for server in sorted(self.servers, key=lambda s: s.playing):
            try:
                answer = await self._call(server.url, "POST", "/v1/sessions", body)
            except EnvUnavailable as e:
                reasons.append(f"{server.url}: {e}")
                continue
            server.grpc = server.public_grpc or f"{server.host}:{answer['grpc_port']}"
            return server, answer
        raise EnvUnavailable("; ".join(reasons) or "the arena has no env server (--env)")

    async def session(self, url: str, session_id: str) -> dict[str, Any] | None:
        """GET /v1/sessions/{id} on env server `url` (None: it has no such session).

        Raises:
            EnvUnavailable: the server cannot be reached, or failed.
        """
        try:
            return await self._call(url, "GET", f"/v1/sessions/{session_id}")
        except EnvRefused as e:
            if e.status == 404:
                return None
            raise EnvUnavailable(str(e)) from None

    async def _call(
        self, url: str, method: str, path: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        return await asyncio.to_thread(self._call_blocking, url, method, path, body)

    def _call_blocking(
        self, url: str, method: str, path: str, body: dict[str, Any] | None
    ) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self._key is not None and method == "POST":
            request.add_header("Authorization", f"Bearer {self._key}")
        try:
            with urllib.request.urlopen(request, timeout=CALL_TIMEOUT_S) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as e:
            detail = _detail(e)
            if e.code == 429 or e.code >= 500:
                raise EnvUnavailable(f"{e.code}: {detail}") from None
            raise EnvRefused(e.code, detail) from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = getattr(e, "reason", e)
            raise EnvUnavailable(f"unreachable ({reason})") from None


def _detail(error: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(error.read())
        return str(body.get("detail") or body)
    except (ValueError, OSError, AttributeError):
        return error.reason or "no detail"
