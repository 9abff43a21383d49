"""The reference-run player: plays the arena's queued reference runs, one at a time, with backoff.

`Runs.enter_reference` enters and queues a run; `References` hands out its episodes (through
`Runs`) and waits for each to end, so no reference run competes with another for the planner.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from rtplan.arena._errors import ArenaError
from rtplan.arena.records import RunRecord

# Logged as the runs it plays (the name operators filter on did not change with the move).
log = logging.getLogger("rtplan.arena.runs")


class References:
    """The queue of reference runs and the task that plays it.

    Args:
        run: a run by id (`Runs.run`; ArenaError unknown_run when there is none).
        hand_out: creates a run's next episode's session and watches it; returns its
            `runs.Assignment` (`Runs._hand_out`).
        watcher: the task watching an episode attempt (by id), or None.
        poll_s: how often a playing episode is looked at again; the backoff's first step.
    """

    def __init__(
        self,
        *,
        run: Callable[[int], RunRecord],
        hand_out: Callable[[int], Awaitable[Any]],
        watcher: Callable[[int], asyncio.Task | None],
        poll_s: float,
    ) -> None:
        self._run = run
        self._hand_out = hand_out
        self._watcher = watcher
        self.poll_s = poll_s
        #: Reference runs to play, in turn (`_play_all`).
        self._queued: list[int] = []
        self._waiting = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        """Starts the task that plays the queue (in the running event loop)."""
        self._task = asyncio.get_running_loop().create_task(
            self._play_all(), name="arena reference runs"
        )

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def queue(self, run_id: int) -> None:
        """Queues reference run `run_id` (once) to be played."""
        if run_id not in self._queued:
            self._queued.append(run_id)
            self._waiting.set()

    async def _play_all(self) -> None:
        """Plays the queued reference runs one at a time, episode after episode."""
        failures = 0
        while True:
            await self._waiting.wait()
            if not self._queued:
                self._waiting.clear()
                continue
            run_id = self._queued[0]
            try:
                await self._play(run_id)
                failures = 0
            except ArenaError as e:
                # Said once a run until it plays again; tried again ever less often (30 s).
                if not failures:
                    log.warning("reference run %d waits: %s", run_id, e.message)
                failures += 1
                await asyncio.sleep(min(30.0, self.poll_s * 2**failures))
            except Exception:
                log.exception("reference run %d failed", run_id)
                failures += 1
                await asyncio.sleep(min(30.0, self.poll_s * 2**failures))
            finally:
                if self._run(run_id).status != "running" and run_id in self._queued:
                    self._queued.remove(run_id)
                elif self._queued and self._queued[0] == run_id:  # to the back: others go on
                    self._queued.append(self._queued.pop(0))

    async def _play(self, run_id: int) -> None:
        while self._run(run_id).status == "running":
            run = self._run(run_id)
            if run.playing is None:
                try:
                    assignment = await self._hand_out(run_id)
                except ArenaError as e:
                    if e.kind == "run_finished":
                        return
                    raise
                watcher = self._watcher(assignment.episode.id)
            else:
                watcher = self._watcher(run.playing.id)
            if watcher is not None:
                await asyncio.shield(watcher)
            else:
                await asyncio.sleep(self.poll_s)
