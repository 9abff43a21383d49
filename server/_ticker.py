"""A drift-free frame ticker: tick n fires at start + n * period on the monotonic clock."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable


@dataclasses.dataclass(frozen=True)
class Tick:
    """One tick as it happened."""

    index: int
    scheduled: float  # monotonic s
    fired: float  # monotonic s when the waiter resumed

    @property
    def lag(self) -> float:
        """Seconds the tick fired after its scheduled time (>= 0)."""
        return max(0.0, self.fired - self.scheduled)


class Ticker:
    """Fixed-rate ticks anchored at `start`, never at the previous tick.

    A tick that fires late is counted and its lag recorded; the next tick is still scheduled at
    start + (n+1) * period, so lateness never accumulates into drift (and a tick whose time has
    already passed fires at once: the frames catch up rather than being skipped).
    """

    def __init__(
        self,
        period: float,
        *,
        start: float | None = None,
        late_after: float = 0.005,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """
        Args:
            period: seconds between ticks (> 0).
            start: monotonic time of tick 0; now when None.
            late_after: a tick that fires more than this many seconds after its scheduled
                time counts as late.
            clock: the monotonic clock (tests may inject one, with its `sleep`).
            sleep: sleeps that many seconds of `clock`.
        """
        if not period > 0:
            raise ValueError(f"period must be > 0 s, got {period}")
        self.period = float(period)
        self._clock = clock
        self._sleep = sleep
        self.start = clock() if start is None else float(start)
        self.late_after = float(late_after)
        self.ticks = 0
        self.late_ticks = 0
        self.max_lag = 0.0
        self.total_lag = 0.0

    def scheduled(self, n: int) -> float:
        """Monotonic time of tick `n`."""
        return self.start + n * self.period

    async def wait(self, n: int) -> Tick:
        """Sleeps until tick `n` is due, then records how late it fired."""
        target = self.scheduled(n)
        while (remaining := target - self._clock()) > 0:
            await self._sleep(remaining)
        tick = Tick(n, target, self._clock())
        self.ticks += 1
        self.total_lag += tick.lag
        self.max_lag = max(self.max_lag, tick.lag)
        if tick.lag > self.late_after:
            self.late_ticks += 1
        return tick


async def sleep_until(t: float) -> None:
    """Sleeps until the monotonic time `t`."""
    while (remaining := t - time.monotonic()) > 0:
        await asyncio.sleep(remaining)
