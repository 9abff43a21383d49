"""The arena's rate limits: per client address, per registering address and per token, in
moving windows (the `limits` library, in this process's memory: each arena process keeps its
own counts, so N processes behind one address admit up to N times a limit)."""

from __future__ import annotations

import math
import time

from limits import RateLimitItem, parse
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from rtplan.arena._errors import ArenaError


def check_rate(value: str) -> str:
    """A rate such as "600/minute" or "20 per hour" (`limits.parse`'s notation).

    Raises:
        ValueError: it is no rate.
    """
    try:
        parse(value)
    except ValueError:
        raise ValueError(f"{value!r} is no rate: write e.g. 600/minute or 20/hour") from None
    return value


class RateLimits:
    """Counts requests and refuses those over a limit with `rate_limited` (429).

    Args:
        per_address: every request of one client address.
        registrations: registrations (`POST /v1/agents`) of one client address.
        per_token: calls with one agent version's token (its runs and episodes).
    """

    def __init__(self, *, per_address: str, registrations: str, per_token: str) -> None:
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._items = {
            "address": parse(per_address),
            "registration": parse(registrations),
            "token": parse(per_token),
        }

    def hit(self, kind: str, who: str) -> None:
        """Counts one request of `kind` ("address", "registration" or "token") by `who`.

        Raises:
            ArenaError: rate_limited, with `retry_after` seconds, when over the limit.
        """
        item = self._items[kind]
        if self._limiter.hit(item, kind, who):
            return
        reset = self._limiter.get_window_stats(item, kind, who).reset_time
        raise RateLimited(kind, item, max(1, math.ceil(reset - time.time())))


class RateLimited(ArenaError):
    """A request over a rate limit: `retry_after` seconds until one more is admitted."""

    def __init__(self, kind: str, item: RateLimitItem, retry_after: int) -> None:
        what = {"address": "requests from this address", "registration": "registrations from "
                "this address", "token": "calls with this token"}[kind]  # fmt: skip
        super().__init__(
            "rate_limited", f"more {what} than {item} allow: try again in {retry_after} s"
        )
        self.retry_after = retry_after
