"""The counters of one live session; only its session updates them, through the named methods."""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

from rtplan.server._rules import Provenance
from rtplan.server._ticker import Tick

#: Latencies kept for the quantiles (the most recent ones).
_WINDOW = 4096
#: Equal bins of the share of the frame period an answer used, over [0, 1); one more counts
#: answers at or past the deadline (`SessionStats.frame_share`).
SHARE_BINS = 20


def _quantiles(values) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "p5": None, "p50": None, "p95": None, "max": None}
    a = np.asarray(values, np.float64)
    return {
        "mean": round(float(a.mean()), 3),
        "p5": round(float(np.percentile(a, 5)), 3),
        "p50": round(float(np.percentile(a, 50)), 3),
        "p95": round(float(np.percentile(a, 95)), 3),
        "max": round(float(a.max()), 3),
    }


class SessionStats:
    """Real-time quality, provenance and planner health of one session.

    The queues count their own drops (viewers, agent streams); the session passes them in when
    it reports (`to_dict`, `brief`), so each number has one owner.
    """

    def __init__(self, period_ms: float | None = None) -> None:
        """`period_ms`: the fixed frame period of a committed-action game in real time, whose
        answers' share of it is counted (`frame_share`); None where frames have no fixed
        period (the simulated clock, a clock game's chess clock)."""
        self.period_ms = period_ms
        #: Answered frames (late ones too) by the share of the period used, (arrival -
        #: publication) / period:
        #: `SHARE_BINS` equal bins over [0, 1), then one at or past the deadline.
        self.share_counts = [0] * (SHARE_BINS + 1)
        self.share_total = 0.0
        #: Frames by final provenance: frames == on_time + late + fallback + invalid.
        self.provenance: collections.Counter[Provenance] = collections.Counter()
        self.ticks = 0
        self.late_ticks = 0
        self.max_tick_lag_ms = 0.0
        self.total_tick_lag_ms = 0.0
        self.decisions = 0
        self.k_histogram: collections.Counter[int] = collections.Counter()
        self.planned = 0  # planned actions applied on their landing frame
        self.planner_misses = 0  # no planned action by the landing frame's deadline
        self.planner_errors = 0  # Plan failed (planner down, refused, bad answer)
        self.planner_late_answers = 0  # planned actions that came after their frame: discarded
        self.planner_cancelled = 0  # Plan calls cancelled when their landing frame went without
        self.last_planner_error = ""
        self.agent_drops = 0  # messages lost by the agent streams that ended
        self.errors_sent = 0
        self.latency_ms: collections.deque[float] = collections.deque(maxlen=_WINDOW)
        self.search_ms: collections.deque[float] = collections.deque(maxlen=_WINDOW)
        self.slack_ms: collections.deque[float] = collections.deque(maxlen=_WINDOW)

    @property
    def frames(self) -> int:
        return sum(self.provenance.values())

    # Updates (the session's only) -------------------------------------------------------------

    def frame(self, provenance: Provenance, slack_ms: float | None) -> None:
        """A frame was decided; `slack_ms` of its judged answer (None: no answer)."""
        self.provenance[provenance] += 1
        if slack_ms is not None:
            self.slack_ms.append(slack_ms)
            self._share(slack_ms)

    def _share(self, slack_ms: float) -> None:
        if self.period_ms:
            share = max(0.0, 1.0 - slack_ms / self.period_ms)
            self.share_counts[min(int(share * SHARE_BINS), SHARE_BINS)] += 1
            self.share_total += share

    def came_late(self, slack_ms: float) -> None:
        """A frame decided FALLBACK got its action after the deadline (`slack_ms` < 0): it is
        LATE after all."""
        self.provenance[Provenance.FALLBACK] -= 1
        self.provenance[Provenance.LATE] += 1
        self.slack_ms.append(slack_ms)
        self._share(slack_ms)

    def ticked(self, tick: Tick, late_after: float) -> None:
        """The tick that is a frame's deadline fired (`late_after`: seconds of lag that make
        it late); the counts are this session's, whether its ticker is its own or its group's."""
        lag = tick.lag
        self.ticks += 1
        self.late_ticks += lag > late_after
        self.max_tick_lag_ms = max(self.max_tick_lag_ms, lag * 1e3)
        self.total_tick_lag_ms += lag * 1e3

    def plan_sent(self, k: int) -> None:
        self.decisions += 1
        self.k_histogram[k] += 1

    def plan_replied(self, latency_ms: float, search_ms: float, *, discarded: bool) -> None:
        self.latency_ms.append(latency_ms)
        self.search_ms.append(search_ms)
        self.planner_late_answers += discarded

    def plan_cancelled(self) -> None:
        self.planner_cancelled += 1

    def plan_failed(self, message: str) -> None:
        self.planner_errors += 1
        self.last_planner_error = message

    def landed(self, provenance: Provenance, *, failed: bool) -> None:
        """A planned action's landing frame was decided (`failed`: its Plan call failed)."""
        if provenance is Provenance.ON_TIME:
            self.planned += 1
        elif provenance is not Provenance.INVALID and not failed:
            self.planner_misses += 1

    def link_ended(self, dropped: int) -> None:
        """An agent stream ended, having lost `dropped` messages."""
        self.agent_drops += dropped

    def error_sent(self) -> None:
        self.errors_sent += 1

    # Reports ----------------------------------------------------------------------------------

    def _counts(self) -> dict[str, int]:
        return {p.label: self.provenance[p] for p in Provenance}

    def _frame_share(self) -> dict[str, Any] | None:
        """How much of the frame period the answers used: `counts` per bin (`SHARE_BINS` equal
        bins over [0, 1), the last one at or past the deadline) and their `mean` share; None
        without a fixed period."""
        if not self.period_ms:
            return None
        n = sum(self.share_counts)
        return {
            "bins": SHARE_BINS,
            "counts": list(self.share_counts),
            "mean": round(self.share_total / n, 4) if n else None,
        }

    def brief(self, *, viewer_drops: int) -> dict[str, Any]:
        """The few counters a viewer shows each frame."""
        return {
            **self._counts(),
            "planner_misses": self.planner_misses,
            "planner_errors": self.planner_errors,
            "last_planner_error": self.last_planner_error,
            "late_ticks": self.late_ticks,
            "max_tick_lag_ms": round(self.max_tick_lag_ms, 3),
            "viewer_drops": viewer_drops,
        }

    def to_dict(self, *, viewer_drops: int, link_drops: int) -> dict[str, Any]:
        """Every counter; `link_drops`: what the agent stream now connected has lost."""
        return {
            "frames": self.frames,
            **self._counts(),
            "ticks": self.ticks,
            "late_ticks": self.late_ticks,
            "max_tick_lag_ms": round(self.max_tick_lag_ms, 3),
            "mean_tick_lag_ms": round(self.total_tick_lag_ms / max(self.ticks, 1), 3),
            "decisions": self.decisions,
            "planned": self.planned,
            "planner_misses": self.planner_misses,
            "planner_errors": self.planner_errors,
            "planner_late_answers": self.planner_late_answers,
            "planner_cancelled": self.planner_cancelled,
            "last_planner_error": self.last_planner_error,
            "k_histogram": {str(k): v for k, v in sorted(self.k_histogram.items())},
            "latency_ms": _quantiles(self.latency_ms),
            "search_ms": _quantiles(self.search_ms),
            "slack_ms": _quantiles(self.slack_ms),
            "frame_share": self._frame_share(),
            "viewer_drops": viewer_drops,
            "agent_drops": self.agent_drops + link_drops,
            "errors_sent": self.errors_sent,
        }
