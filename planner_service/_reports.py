"""The service's errors in a person's terms: each kind said once, in one line; repeats counted."""

from __future__ import annotations

import asyncio
import logging

#: Seconds between two lines that count one kind of error's repeats.
REPEATS_EVERY_S = 60.0


class ErrorReports:
    """Says each kind of error once, in one line at WARNING that says what it meant for play;
    its repeats are counted, and their number said in one line at most every `every_s` seconds
    (`every_s` after the first repeat not yet said). Each error's traceback goes to DEBUG
    (`--log-level debug` shows them). Call `report` on the running event loop."""

    def __init__(self, log: logging.Logger, *, every_s: float | None = None) -> None:
        self._log = log
        self.every_s = REPEATS_EVERY_S if every_s is None else every_s
        #: How many times each kind was reported.
        self.counts: dict[str, int] = {}
        self._unsaid: dict[str, int] = {}  # repeats of a kind not said yet

    def report(
        self,
        kind: str,
        line: str,
        error: BaseException | None = None,
        *,
        level: int = logging.WARNING,
    ) -> None:
        """One occurrence of `kind` (e.g. "Plan: DeadlineError, caller gone"): `line` the first
        time, else counted.

        Args:
            kind: what repeats count as the same error; named in the repeats' line.
            line: the first occurrence's one line: the error and what it meant for play.
            error: its exception, whose traceback is logged at DEBUG.
            level: the level of its lines (ERROR for a bug).
        """
        if error is not None:
            self._log.debug("%s", kind, exc_info=error)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if self.counts[kind] == 1:
            said = "%s (repeats counted: a line per %.0f s at most)"
            self._log.log(level, said, line, self.every_s)
            return
        if kind not in self._unsaid:
            self._unsaid[kind] = 0
            asyncio.get_running_loop().call_later(self.every_s, self._say, kind, level)
        self._unsaid[kind] += 1

    def _say(self, kind: str, level: int) -> None:
        n = self._unsaid.pop(kind)
        total = self.counts[kind]
        self._log.log(
            level,
            "planner service: %d more of %s in the last %.0f s (%d in all)",
            n,
            kind,
            self.every_s,
            total,
        )
