"""Admission of searches: concurrency limit, request order per stream, deadlines, worker threads."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any


class AdmissionError(Exception):
    """A request that is not (or no longer) run; the message names the cause."""


class SupersededError(AdmissionError):
    """A newer request of the same stream exists: this one never gets its result."""


class BusyError(AdmissionError):
    """Every search slot is taken; `retry_after_ms` estimates when one frees up."""

    def __init__(self, message: str, retry_after_ms: int) -> None:
        super().__init__(message)
        self.retry_after_ms = retry_after_ms


class DeadlineError(AdmissionError):
    """The request's deadline passed before its result was ready."""


@dataclasses.dataclass(eq=False)
class _Stream:
    id: str
    newest: int  # highest request id seen on the stream
    running: Ticket | None = None  # its newest request in flight, if any
    #: The requests whose work holds a worker thread (the newest, and abandoned ones still
    #: running), oldest first.
    searching: list[Ticket] = dataclasses.field(default_factory=list)


class Admission:
    """Decides which requests run, runs their work on worker threads, and drops stale results.

    Lives on one event loop: `admit` and `Ticket.run` are called from it only. Requests of one
    `stream_id` supersede each other by `request_id` (the ids, not shared flags, decide: a result
    is released only while its id is still the newest of its stream). A slot stays taken until
    its ticket is closed *and* its thread work has returned, so abandoned searches still count
    against `max_concurrent`; a request superseded before its work started gives its slot up
    at once. A stream's work runs at most `stream_searches` requests at a time: a request whose
    stream has that many searches on threads (late ones, abandoned) waits for the oldest to
    return, and those searches never refuse it a slot. So a burst of one stream's requests (a
    client that kept sending while the service was paused) ends with the newest running, never
    with every slot held; and with 2 (the service's default) a session whose search outlasts
    its landing frame starts its next one beside it instead of queueing behind it (as Riemer et
    al., ICLR 2025, stagger inference processes), holding at most two threads.
    """

    def __init__(
        self, max_concurrent: int, *, max_streams: int = 4096, stream_searches: int = 1
    ) -> None:
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1, got {max_concurrent}")
        if stream_searches < 1:
            raise ValueError(f"stream_searches must be >= 1, got {stream_searches}")
        self.max_concurrent = max_concurrent
        self.stream_searches = stream_searches
        self._max_streams = max_streams
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_concurrent, thread_name_prefix="planner-search"
        )
        self._streams: OrderedDict[str, _Stream] = OrderedDict()
        self._holding: set[Ticket] = set()
        self._mean_ms = 10.0  # running mean of a ticket's slot time, for the retry hint

    @property
    def busy(self) -> int:
        """Slots taken (requests in flight plus abandoned searches still running)."""
        return len(self._holding)

    def admit(self, stream_id: str, request_id: int, time_remaining: float | None) -> Ticket:
        """Admits a request, superseding older ones of its stream.

        Args:
            stream_id: requests with the same non-empty id supersede each other.
            request_id: increasing per stream.
            time_remaining: seconds to the request's deadline, None without one.

        Returns:
            The request's ticket, holding one slot; use it as a context manager.

        Raises:
            SupersededError: a request of the stream with a higher id was seen, or this id is
                already in flight.
            BusyError: all `max_concurrent` slots are taken (with a retry hint).
            DeadlineError: the deadline has already passed.
        """
        loop = asyncio.get_running_loop()
        # First, so that the request it supersedes gives up its slot if it has not searched.
        stream = self._stream(stream_id, request_id) if stream_id else None
        # The stream's own searches still running (late ones) never refuse its newest request:
        # it waits for them in `Ticket.run` (at most `stream_searches` threads per stream), so
        # a burst of one stream's requests is superseded while waiting, never refused.
        own = len(stream.searching) if stream is not None else 0
        if self.busy - own >= self.max_concurrent:
            retry = self.retry_after_ms()
            raise BusyError(
                f"{self.busy} searches running, the limit is {self.max_concurrent}: "
                f"retry in ~{retry} ms (trailing metadata retry-after-ms)",
                retry,
            )
        if time_remaining is not None and time_remaining <= 0:
            raise DeadlineError("deadline already passed when the request arrived")
        deadline = None if time_remaining is None else loop.time() + time_remaining
        ticket = Ticket(self, loop, stream, request_id, deadline)
        self._holding.add(ticket)
        if stream is not None:
            stream.running = ticket
        return ticket

    def _stream(self, stream_id: str, request_id: int) -> _Stream:
        stream = self._streams.get(stream_id)
        if stream is None:
            stream = self._streams[stream_id] = _Stream(stream_id, newest=request_id)
            if len(self._streams) > self._max_streams:
                self._streams.popitem(last=False)  # least recently used
            return stream
        self._streams.move_to_end(stream_id)
        if request_id < stream.newest:
            raise SupersededError(
                f"request {request_id} on stream {stream_id!r} superseded by request "
                f"{stream.newest}"
            )
        if request_id == stream.newest and stream.running is not None:
            raise SupersededError(
                f"request {request_id} on stream {stream_id!r} is already in flight "
                "(request ids must increase)"
            )
        stream.newest = request_id
        superseded = stream.running
        if superseded is not None:
            superseded.interrupt()
            if not superseded.searching:  # it never searches now: its slot is free at once
                self._release(superseded)
        return stream

    def retry_after_ms(self) -> int:
        """Estimated ms until a slot frees: the mean slot time minus the oldest one's age."""
        now = time.monotonic()
        left = [self._mean_ms - (now - t.started) * 1e3 for t in self._holding]
        return max(1, math.ceil(min(left, default=self._mean_ms)))

    def _release(self, ticket: Ticket) -> None:
        if ticket in self._holding:
            self._holding.discard(ticket)
            if ticket.searched:  # the hint estimates searches, not requests that never ran
                elapsed = (time.monotonic() - ticket.started) * 1e3
                self._mean_ms += 0.2 * (elapsed - self._mean_ms)

    def shutdown(self) -> None:
        """Stops the worker threads once their current work returns; queued work is dropped."""
        self._executor.shutdown(wait=False, cancel_futures=True)


class Ticket:
    """One admitted request: runs its work off the event loop and guards its results."""

    def __init__(self, admission, loop, stream: _Stream | None, request_id: int, deadline) -> None:
        self._admission = admission
        self._loop = loop
        self._stream = stream  # None: a request with no stream id
        self.request_id = request_id
        self._deadline = deadline  # loop time, or None
        self.started = time.monotonic()
        self._wake = loop.create_future()  # set when a newer request of the stream arrives
        self._returned = loop.create_future()  # set when its thread work has all returned
        self._threads = 0
        self.searched = False  # its work was handed to a worker thread
        self._closed = False

    @property
    def stream_id(self) -> str:
        return "" if self._stream is None else self._stream.id

    @property
    def searching(self) -> bool:
        """Its work holds a worker thread (it may be abandoned and still running)."""
        return self._threads > 0

    def interrupt(self) -> None:
        """Wakes a pending `run`, which then re-checks the stream's newest request id."""
        if not self._wake.done():
            self._wake.set_result(None)

    def check(self) -> None:
        """Raises if this request's result may no longer be released.

        Raises:
            SupersededError: a newer request of the stream was admitted.
            DeadlineError: the deadline passed.
        """
        if self._stream is not None and self._stream.newest > self.request_id:
            raise SupersededError(
                f"request {self.request_id} on stream {self.stream_id!r} superseded by "
                f"request {self._stream.newest}"
            )
        if self._deadline is not None and self._loop.time() >= self._deadline:
            ms = (time.monotonic() - self.started) * 1e3
            raise DeadlineError(f"deadline passed {ms:.1f} ms after the request arrived")

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` on a worker thread; its result only while the request is still current.

        Waits first, while its stream has `stream_searches` searches on threads, for the oldest
        to return. Returns as soon as the request
        is superseded or past its deadline, without waiting for the thread (which keeps the slot
        until it returns). A cancelled caller drops the result.

        Raises:
            SupersededError, DeadlineError: see `check`; or whatever `fn` raised.
        """
        self.check()
        bound = self._admission.stream_searches
        while self._stream is not None and len(others := self._others()) >= bound:
            await self._until(others[0]._returned, "waiting for the stream's search")
        cf = self._admission._executor.submit(fn, *args)
        self._threads += 1
        self.searched = True
        if self._stream is not None and self not in self._stream.searching:
            self._stream.searching.append(self)
        cf.add_done_callback(self._thread_done)
        fut = asyncio.wrap_future(cf, loop=self._loop)
        try:
            await self._until(fut, "during the search")
        except BaseException:
            fut.cancel()  # drops the result; a search not yet started never runs
            raise
        return fut.result()

    def _others(self) -> list[Ticket]:
        """The stream's other requests whose work holds a thread, oldest first."""
        return [t for t in self._stream.searching if t is not self]

    async def _until(self, fut: asyncio.Future, doing: str) -> None:
        """Waits for `fut`; raises as soon as the request is superseded or past its deadline.

        Raises:
            SupersededError, DeadlineError: see `check`.
        """
        timeout = None if self._deadline is None else max(0.0, self._deadline - self._loop.time())
        done, _ = await asyncio.wait(
            (fut, self._wake), timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        self.check()
        if fut not in done:
            raise DeadlineError(f"deadline passed {doing}")  # the timer fired a little early

    def _thread_done(self, _cf) -> None:
        # Runs on the worker thread (or the loop's, for work cancelled before it started).
        with contextlib.suppress(RuntimeError):  # a closed loop: the server is gone
            self._loop.call_soon_threadsafe(self._one_thread_done)

    def _one_thread_done(self) -> None:
        self._threads -= 1
        if self._threads == 0:
            if self._stream is not None and self in self._stream.searching:
                self._stream.searching.remove(self)
            if not self._returned.done():
                self._returned.set_result(None)
        self._maybe_release()

    def close(self) -> None:
        """Ends the request; its slot frees once its thread work has returned."""
        self._closed = True
        if self._stream is not None and self._stream.running is self:
            self._stream.running = None
        self._maybe_release()

    def _maybe_release(self) -> None:
        if self._closed and self._threads == 0:
            self._admission._release(self)

    def __enter__(self) -> Ticket:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
