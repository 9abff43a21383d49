"""Batched ticks: the real-time sessions of one (game, FPS) share one ticker and one jitted step."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import heapq
import logging
import math
import time
from typing import Protocol

import jax
import numpy as np

from rtplan import games
from rtplan.server._config import SessionConfig
from rtplan.server._frame_info import HostInfo
from rtplan.server._moves import Move
from rtplan.server._runtime import MIN_BATCH, GameRuntime
from rtplan.server._ticker import Tick, Ticker

log = logging.getLogger("rtplan.server")


class Member(Protocol):
    """What a group reads and calls of a session (`server.session.Session`)."""

    config: SessionConfig
    runtime: GameRuntime
    starts_at: float | None

    @property
    def state(self) -> games.State: ...

    def tick_started(self, start: float, deadline: float, *, shown: bool) -> bool: ...

    def tick_decide(self, tick: Tick, late_after: float) -> Move: ...

    def tick_played(self, move: Move, info: HostInfo, deadline: float, *, fetch) -> bool: ...


@dataclasses.dataclass(eq=False)
class _Seat:
    session: Member
    slot: int  # its row of the batch
    first_tick: int  # the group tick that is its frame 0's deadline
    done: asyncio.Future  # set when its game is over (an exception: it failed)
    left: bool = False  # its slot went back to the free ones (once only: it may be reused)
    waiting: bool = False  # frame 0 goes out at the tick before `first_tick` (not out yet)


class _Rows:
    """One tick's batch of states, brought to the host once, at the first row anyone reads (a
    viewer's render, a replay's digest, a Plan request); most ticks nobody does.

    A join donates the batch's buffers to its put: it re-points these rows to the result
    (`moved`: it wrote a free row, every member's row is unchanged), and a member leaving reads
    its row first (its slot may be reused)."""

    def __init__(self, states: games.State) -> None:
        self._states = states
        self._host = None

    def moved(self, states: games.State) -> None:
        """The batch now lives in `states` (the members' rows unchanged). A batch already on the
        host keeps its copy (JAX does not donate buffers a host view still reads)."""
        if self._host is None:
            self._states = states

    def row(self, slot: int) -> games.State:
        if self._host is None:
            self._host = jax.device_get(self._states)
        return jax.tree.map(lambda x: x[slot], self._host)


class TickGroup:
    """The real-time sessions of one game at one frame rate, ticking together.

    One `Ticker` for all; at each tick every member whose frame is due decides it exactly as a
    session ticking alone does (the answer that arrived by the deadline, else the fallback:
    `Session.tick_decide`), one jitted, vmapped step plays every member's frame over a padded
    batch of fixed capacity (rows without a member are masked: they keep their state), and each
    member then books, records and publishes its frame (`Session.tick_played`). Members join
    and leave between ticks (the event loop runs one thing at a time, and a tick never awaits):
    a joiner's tick 0 is the group's first tick at or after its start, so its frames keep their
    full period. The group's loop ends when it is empty; a later joiner starts a fresh ticker.
    """

    def __init__(
        self, runtime: GameRuntime, period: float, *, late_after: float, max_rows: int = 0
    ) -> None:
        """
        Args:
            runtime: the game (single-player) every member plays.
            period: seconds per frame.
            late_after: seconds of lag that make a tick late.
            max_rows: the most members it may get (the server's session limit): it compiles
                no batch size beyond the one that holds them ahead of need; 0: no limit.
        """
        self.runtime = runtime
        self.period = period
        self.late_after = late_after
        self.max_rows = max_rows
        self.ticker: Ticker | None = None
        self.capacity = 0
        self._states: games.State | None = None  # [capacity] rows
        self._seats: dict[int, _Seat] = {}  # by slot
        self._free: list[int] = []  # a heap of free slots
        self._next = 1  # the tick the loop waits for next
        self._task: asyncio.Task | None = None
        self._grow_lock = asyncio.Lock()
        self._rows: _Rows | None = None  # the rows the members' last frames read
        self._ahead: asyncio.Task | None = None  # the next size compiling (`_grow_ahead`)

    def __len__(self) -> int:
        return len(self._seats)

    async def play(self, session: Member) -> None:
        """Plays `session` in the group until its game is over; cancelled (the session was
        stopped), it leaves at once, between two ticks. A member's failure is raised here."""
        while not self._free:
            await self._grow()
        slot = heapq.heappop(self._free)
        if self._task is None:  # idle until now: tick 0 is now (no catch-up of idle time)
            self.ticker = Ticker(self.period, late_after=self.late_after)
            self._next = 1
            self._task = asyncio.get_running_loop().create_task(self._run(), name="tick group")
        ticker = self.ticker
        # Its tick 0: the group's first at or after its start (or the last one, if it waited to
        # grow); frame 0 goes out at that tick, so that its deadline is a full period away.
        begin = max(session.starts_at, time.monotonic()) - ticker.start
        start = max(self._next - 1, math.ceil(begin / self.period))
        seat = _Seat(session, slot, start + 1, asyncio.get_running_loop().create_future())
        try:
            self._set_states(self.runtime.put(self._states, slot, session.state))
            self._seats[slot] = seat
            self._grow_ahead()
            # Frame 0 goes out now when a countdown runs until its tick 0 (shown meanwhile, as
            # alone) or that tick has passed; else at its tick 0, a full period before its
            # deadline (a viewer that joined meanwhile was shown it: not sent again).
            if start >= self._next and session.starts_at <= time.monotonic():
                seat.waiting = True
            elif self._start(seat, shown=False):
                return  # over before its first frame
            await seat.done
        finally:
            self._leave(seat)

    def _start(self, seat: _Seat, *, shown: bool) -> bool:
        """Publishes the seat's frame 0 (its clock starts at its tick 0), due at its first
        tick; True: the game is already over. `shown`: `Session.tick_started`."""
        seat.waiting = False
        tick0 = seat.first_tick - 1
        return seat.session.tick_started(
            self.ticker.scheduled(tick0), self.ticker.scheduled(tick0 + 1), shown=shown
        )

    def _set_states(self, states: games.State) -> None:
        """The batch after a join or a growth: the members' rows are where they were."""
        self._states = states
        if self._rows is not None:
            self._rows.moved(states)

    def _leave(self, seat: _Seat) -> None:
        if seat.left:
            return
        seat.left = True
        seat.session.state  # noqa: B018 -- its last frame read now: its row may be reused
        if self._seats.get(seat.slot) is seat:
            del self._seats[seat.slot]
        if seat.slot < self.capacity:  # else the idle group let its batch go
            heapq.heappush(self._free, seat.slot)

    def _grow_ahead(self) -> None:
        """Once half the rows are taken, compiles the next size in a thread, the members
        ticking on meanwhile (slowed a little: the compile shares the cores and the GIL), so that
        the group grows without waiting for a compile when it fills. `Runtimes` compiles only
        the first size with the game: a server compiles the sizes its load reaches."""
        target = max(MIN_BATCH, 2 * self.capacity)
        if (
            len(self._seats) * 2 < self.capacity
            or self._ahead is not None
            or self.runtime.batch_warmed(target)
            or (self.max_rows and self.capacity >= self.max_rows)
        ):
            return
        self._ahead = asyncio.get_running_loop().create_task(
            asyncio.to_thread(self.runtime.warm_batch, target), name="tick group compile"
        )
        self._ahead.add_done_callback(self._ahead_done)

    def _ahead_done(self, task: asyncio.Task) -> None:
        self._ahead = None
        if not task.cancelled() and task.exception() is not None:
            # `_grow` compiles it again when the group fills, and raises there.
            log.warning("compiling the next batch size failed: %r", task.exception())

    async def _grow(self) -> None:
        """Doubles the capacity; a size not compiled yet (`_grow_ahead` did not get to it)
        compiles in a thread first, the members ticking on meanwhile."""
        async with self._grow_lock:
            if self._free:
                return
            target = max(MIN_BATCH, 2 * self.capacity)
            if not self.runtime.batch_warmed(target):
                await asyncio.to_thread(self.runtime.warm_batch, target)
            if self._free:
                return
            if self._states is None:
                self._states = self.runtime.batch(target)
            else:
                self._set_states(self.runtime.grow(self._states, target))
            self._free.extend(range(self.capacity, target))
            heapq.heapify(self._free)
            self.capacity = target

    async def _run(self) -> None:
        try:
            while self._seats:
                tick = await self.ticker.wait(self._next)
                self._next += 1
                self._tick(tick)
        finally:
            # Idle: let the batch go (a later joiner starts from MIN_BATCH, compiled).
            self._task = None
            if not self._seats:
                self._states, self.capacity, self._free, self._rows = None, 0, [], None

    def _tick(self, tick: Tick) -> None:
        for seat in [
            s for s in self._seats.values() if s.waiting and s.first_tick <= tick.index + 1
        ]:
            try:
                over = self._start(seat, shown=True)
            except Exception as e:
                self._fail(seat, e)
                continue
            if over:
                self._end(seat)
        due = [s for s in self._seats.values() if not s.waiting and s.first_tick <= tick.index]
        if not due:
            return
        actions = np.zeros(self.capacity, np.int32)
        live = np.zeros(self.capacity, bool)
        moves: list[tuple[_Seat, Move]] = []
        for seat in due:
            try:
                move = seat.session.tick_decide(tick, self.late_after)
            except Exception as e:  # a bug ends its session, never the group
                self._fail(seat, e)
                continue
            actions[seat.slot], live[seat.slot] = move.action, True
            moves.append((seat, move))
        try:
            self._states, infos = self.runtime.step_batch(self._states, actions, live)
        except Exception as e:
            for seat, _ in moves:
                self._fail(seat, e)
            return
        rows = self._rows = _Rows(self._states)
        deadline = self.ticker.scheduled(tick.index + 1)
        hosts = HostInfo.rows(infos, [seat.slot for seat, _ in moves])
        for (seat, move), info in zip(moves, hosts, strict=True):
            try:
                fetch = functools.partial(rows.row, seat.slot)
                over = seat.session.tick_played(move, info, deadline, fetch=fetch)
            except Exception as e:
                self._fail(seat, e)
                continue
            if over:
                self._end(seat)

    def _end(self, seat: _Seat) -> None:
        """The seat's game is over: it leaves, and its `play` returns."""
        self._leave(seat)
        if not seat.done.done():
            seat.done.set_result(None)

    def _fail(self, seat: _Seat, error: Exception) -> None:
        self._leave(seat)
        if not seat.done.done():
            seat.done.set_exception(error)

    def close(self) -> None:
        """Cancels the loop (server shutdown, after its sessions were stopped)."""
        if self._task is not None:
            self._task.cancel()
        if self._ahead is not None:
            self._ahead.cancel()  # its thread finishes the compile; nobody waits for it


#: Seconds a session's start waits at most for slack between ticks (`TickGroups.slack`).
SLACK_WAIT_S = 0.25


class TickGroups:
    """The tick groups of one server, by (game, FPS); a group exists once a session joins it."""

    def __init__(self, *, late_after: float, max_rows: int = 0) -> None:
        """
        Args:
            late_after: seconds of lag that make a tick late (the server's `late_tick_ms`).
            max_rows: the server's session limit (`TickGroup`); 0: none.
        """
        self.late_after = late_after
        self.max_rows = max_rows
        self._groups: dict[tuple[str, float], TickGroup] = {}
        self._slack_lock = asyncio.Lock()

    def group(self, game_id: str, fps: float) -> TickGroup | None:
        return self._groups.get((game_id, fps))

    def next_tick(self) -> float | None:
        """Monotonic time of the next tick any group waits for (None: no group ticks)."""
        due = [g.ticker.scheduled(g._next) for g in self._groups.values() if g._task is not None]
        return min(due, default=None)

    async def slack(self, needed: float, *, at_most: float = SLACK_WAIT_S) -> None:
        """Returns when no tick is due within `needed` seconds: work that holds the event loop
        that long (a session's start) runs between ticks, never past a deadline. One caller at
        a time: several starting at once take the slack in turns. After `at_most` seconds of
        waiting it returns anyway (a server whose ticks leave no such slack still starts
        sessions, late ticks and all)."""
        async with self._slack_lock:
            give_up = time.monotonic() + at_most
            while (due := self.next_tick()) is not None and due - time.monotonic() < needed:
                if time.monotonic() >= give_up:
                    return
                # Just past that tick: its group's loop has stepped it by the time this resumes.
                await asyncio.sleep(max(0.0, due - time.monotonic()) + 0.0005)

    async def play(self, session: Member) -> None:
        """Plays a real-time single-player session in the group of its game and frame rate."""
        key = (session.runtime.game_id, session.config.fps)
        group = self._groups.get(key)
        if group is None:
            period = session.config.period
            group = self._groups[key] = TickGroup(
                session.runtime, period, late_after=self.late_after, max_rows=self.max_rows
            )
        await group.play(session)

    def close(self) -> None:
        for group in self._groups.values():
            group.close()
