"""Searches of many requests run as one batch: grouped by game, kind and k, under deadlines."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from rtplan.planner_service._errors import NotStartedError

#: The longest a waiting request sleeps before it looks at its group again.
_POLL_S = 0.05
#: What a group's measured times keep each time its requests are dropped as too late to land.
_DECAY = 0.8


def search_rungs(max_batch: int) -> tuple[int, ...]:
    """The batch sizes a batched search runs at: 2, 4, ... up to `max_batch` (a power of two
    past it is not compiled: the largest rung is `max_batch`).

    Rung 1 is left out on purpose: on XLA:CPU a batch-1 network call takes another kernel (a
    matrix-vector product) whose sums differ from a batch's in the last bits, where rows of
    2, 4 and 8 agree exactly (`tests/planner_service/test_batching.py`). A lone request runs
    at rung 2 beside a copy of itself, so its answer is the one it gets in any batch.
    """
    if max_batch < 2:
        raise ValueError(f"a batched search needs max_batch >= 2, got {max_batch}")
    rungs = [2]
    while rungs[-1] < max_batch:
        rungs.append(min(rungs[-1] * 2, max_batch))
    return tuple(rungs)


def not_started_why(
    now: float, deadline: float | None, abandoned: threading.Event | None, estimate: float
) -> str | None:
    """Why a search that has not started must not start (its caller gave up, or its deadline
    leaves less than `estimate` seconds, the measured time of one search of its kind); None
    when it may start. Clock seconds."""
    if abandoned is not None and abandoned.is_set():
        return "its caller gave up before its search started"
    if deadline is not None and now + estimate >= deadline:
        return (
            f"not started: {(deadline - now) * 1e3:.1f} ms left to its deadline, a search of its "
            f"kind takes ~{estimate * 1e3:.1f} ms"
        )
    return None


@dataclasses.dataclass(eq=False)
class _Item:
    group: Hashable
    payload: Any
    arrived: float  # clock seconds
    deadline: float | None  # clock seconds, None: no deadline
    abandoned: threading.Event | None
    started: bool = False  # taken into a batch (whose leader sets `done`)
    done: bool = False
    result: Any = None
    error: BaseException | None = None

    def gone(self) -> bool:
        return self.abandoned is not None and self.abandoned.is_set()


@dataclasses.dataclass
class BatchStats:
    """What a batcher has run: batches and requests per rung, and requests it never started."""

    batches: dict[int, int] = dataclasses.field(default_factory=dict)  # requests -> batches
    requests: int = 0  # requests answered by a batch
    not_started: int = 0  # dropped: no time left, or abandoned before their batch


class Batcher:
    """Runs requests of the same group (one game, kind and budget) that wait together as one
    batched call.

    Callers block in `run` on their own threads (the service's request threads). The oldest
    waiting request of a group leads it: once a batch slot is free and its group is full or has
    waited `max_wait_s` (less when the earliest deadline in the group needs the time), it takes
    up to `max_batch` of the group's requests, oldest first, runs them in one call and hands
    each its own result. While every slot is busy, requests pile up and leave together when one
    frees (the busier the service, the larger its batches). A request whose deadline cannot be
    met by the group's measured batch time, or whose caller set `abandoned`, is never started.
    """

    def __init__(
        self,
        run_batch: Callable[[Hashable, list[Any]], Sequence[Any]],
        *,
        max_batch: int,
        slots: int,
        max_wait_s: float = 0.002,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """
        Args:
            run_batch: (group, payloads) -> one result per payload, in order; runs on the
                leading request's thread.
            max_batch: the most requests in one call.
            slots: batched calls that may run at once.
            max_wait_s: the longest a request waits for others to join its batch while a slot
                is free.
            clock: seconds, monotonic (the deadlines' clock).
        """
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self._run_batch = run_batch
        self.max_batch = max_batch
        self.slots = slots
        self.max_wait_s = max_wait_s
        self._clock = clock
        self._cond = threading.Condition()
        self._pending: dict[Hashable, list[_Item]] = {}
        self._running = 0
        #: (group, batch size) -> seconds of a fast batched call of late (`estimate`).
        self._seconds: dict[tuple[Hashable, int], float] = {}
        self.stats = BatchStats()

    def estimate(self, group: Hashable, n: int = 1) -> float:
        """Seconds a batch of `n` of `group` is expected to take (0 before one has run): the
        fast end of that size's recent calls, else of the nearest larger size measured (a batch
        costs at most what a larger one does); it decays while the group's requests are dropped
        as too late."""
        sizes = sorted(s for g, s in self._seconds if g == group and s >= n)
        return self._seconds[(group, sizes[0])] if sizes else 0.0

    def run(
        self,
        group: Hashable,
        payload: Any,
        *,
        deadline: float | None = None,
        abandoned: threading.Event | None = None,
    ) -> Any:
        """`payload`'s result, computed in a batch of its group.

        Args:
            group: requests of equal groups may share a call.
            payload: what `run_batch` gets for this request.
            deadline: clock seconds by which the result is needed; None: none.
            abandoned: set by the caller once it no longer wants the result.

        Raises:
            NotStartedError: the deadline leaves no time for the search, or the caller gave up,
                before its batch started.
            Whatever `run_batch` raised for the batch.
        """
        now = self._clock()
        item = _Item(group, payload, now, deadline, abandoned)
        with self._cond:
            self._pending.setdefault(group, []).append(item)
            self._cond.notify_all()
            while not item.done:
                batch, wait = self._lead(item)
                if batch:
                    self._execute(group, batch)
                    continue
                self._cond.wait(wait)
        if item.error is not None:
            raise item.error
        return item.result

    # Under the lock ---------------------------------------------------------------------------

    def _lead(self, item: _Item) -> tuple[list[_Item], float]:
        """(the batch `item` starts now, or []; how long to wait before looking again)."""
        now = self._clock()
        self._drop_hopeless(now)
        if item.done:
            return [], 0.0
        if item.started:  # in a batch that runs: its leader wakes us
            return [], _POLL_S
        queue = self._pending[item.group]
        if queue[0] is not item:  # the group's oldest request leads it
            return [], _POLL_S
        flush_at = self._flush_at(item.group, queue)
        if self._running >= self.slots:
            return [], _seconds_to(flush_at, now, at_least=_POLL_S)
        if now < flush_at and len(queue) < self.max_batch:
            return [], _seconds_to(flush_at, now)
        # Of the groups due, the one whose oldest request came first goes first.
        due = [q for g, q in self._pending.items() if q is queue or self._due(g, q, now)]
        if min(due, key=lambda q: q[0].arrived) is not queue:
            return [], 1e-3
        batch, self._pending[item.group] = queue[: self.max_batch], queue[self.max_batch :]
        for taken in batch:
            taken.started = True
        if not self._pending[item.group]:
            del self._pending[item.group]
        self._running += 1
        return batch, None

    def _due(self, group: Hashable, queue: list[_Item], now: float) -> bool:
        return len(queue) >= self.max_batch or self._flush_at(group, queue) <= now

    def _flush_at(self, group: Hashable, queue: list[_Item]) -> float:
        """When the group's batch leaves with a free slot: `max_wait_s` after its oldest request
        came, sooner when its earliest deadline needs the time for the search."""
        at = queue[0].arrived + self.max_wait_s
        deadlines = [i.deadline for i in queue if i.deadline is not None]
        if deadlines:
            n = min(len(queue) + 1, self.max_batch)
            at = min(at, min(deadlines) - self.estimate(group, n) - self.max_wait_s)
        return at

    def _drop_hopeless(self, now: float) -> None:
        """Fails, unstarted, each waiting request whose caller gave up or whose deadline its
        group's measured time for one search no longer fits."""
        dropped = False
        for group in list(self._pending):
            keep, late = [], False
            for item in self._pending[group]:
                why = not_started_why(now, item.deadline, item.abandoned, self.estimate(group))
                if why is None:
                    keep.append(item)
                    continue
                item.done, item.error = True, NotStartedError(why)
                self.stats.not_started += 1
                dropped, late = True, late or not item.gone()
            if late:
                # A dropped search is never timed: let times that a slow spell (a first call,
                # a loaded machine) inflated decay, so the group runs again and is measured
                # anew, rather than drop every later request of it for good.
                for key in [key for key in self._seconds if key[0] == group]:
                    self._seconds[key] *= _DECAY
            if keep:
                self._pending[group] = keep
            else:
                del self._pending[group]
        if dropped:  # their threads return, and a group may have a new oldest request
            self._cond.notify_all()

    # Outside the lock -------------------------------------------------------------------------

    def _execute(self, group: Hashable, batch: list[_Item]) -> None:
        """Runs `batch` (called with the lock held; released while the call runs)."""
        self._cond.release()
        start = self._clock()
        try:
            results, error = self._run_batch(group, [i.payload for i in batch]), None
        except Exception as e:
            results, error = None, e
        seconds = self._clock() - start
        self._cond.acquire()
        self._running -= 1
        key = (group, len(batch))
        # The fast end of recent calls, not their mean (as the engine's unbatched searches): a
        # request is dropped only when even a fast batch could not land it.
        est = self._seconds.get(key)
        self._seconds[key] = (
            seconds if est is None or seconds < est else est + 0.1 * (seconds - est)
        )
        self.stats.batches[len(batch)] = self.stats.batches.get(len(batch), 0) + 1
        self.stats.requests += len(batch)
        for i, item in enumerate(batch):
            item.done = True
            if error is not None:
                item.error = error
            else:
                item.result = results[i]
        self._cond.notify_all()


def _seconds_to(at: float, now: float, at_least: float = 0.0) -> float:
    """Seconds to wait for `at`: at most `_POLL_S` (a caller's `abandoned` is not signalled to
    the lock, so waits look again now and then)."""
    return min(max(at - now, at_least, 1e-4), _POLL_S)
