"""REST calls: `http_json`, and `HTTPStatusError` for an error status."""

from __future__ import annotations

import json
import urllib.error
import urllib.request


class HTTPStatusError(RuntimeError):
    """An error status from a REST call (`http_json`): `status` is the HTTP code."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def http_json(
    method: str,
    url: str,
    body: dict | None = None,
    token: str | None = None,
    *,
    timeout: float = 30.0,
) -> dict:
    """One REST call; raises RuntimeError with the server's message on an error status."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        raise HTTPStatusError(f"{method} {url}: {e.code} {e.read().decode()[:500]}", e.code) from e
