"""The statistics of one FPS: frame rows from a replay, misses, censored latency percentiles."""

from __future__ import annotations

import collections
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rtplan.harness.stats import paired, standard_error

#: The latency percentiles reported per k.
QUANTILES = (50, 95, 99)


#: A landing frame whose planned action did not count: nothing (or nothing on time) arrived.
_MISSED = ("fallback", "late")


def censored_percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (nearest rank) of `values`, where +-inf marks a value known only to
    lie past every measured one (a missed deadline: its latency is longer than the window, its
    slack below zero); None when the percentile falls among those, or there are no values."""
    if len(values) == 0:
        return None
    p = float(np.percentile(np.asarray(values, np.float64), q, method="inverted_cdf"))
    return None if math.isinf(p) else round(p, 3)


def frame_rows(frames: list[dict], *, fps: float, seed: int) -> list[dict]:
    """One timing row per played frame, from a replay's frame messages (`GET /v1/replays/NAME`:
    frame n carries the report of frame n - 1, the viewer's `previous`)."""
    rows = []
    for before, msg in zip(frames, frames[1:]):
        r = msg["previous"]
        rows.append(
            {
                "fps": fps,
                "seed": seed,
                "frame": r["frame"],
                "action": r["action"],
                "k": r["k"],
                "landing": r["answer_source"] == "planned",
                "provenance": r["provenance"],
                "source": r["source"],
                "answer_source": r["answer_source"],
                "latency_ms": r["latency_ms"],
                "slack_ms": r["slack_ms"],
                "reward": round(msg["episode_return"] - before["episode_return"], 6),
            }
        )
    return rows


def summarize(
    rows: Sequence[Sequence[dict]],
    returns: Sequence[float],
    simulated: Sequence[float],
    sessions: Sequence[dict],
    budgets: Sequence[int],
) -> dict[str, Any]:
    """The summary of one FPS: N episodes' frame rows, returns, the simulated-clock returns on
    the same seeds, and the sessions' final details (their counters).

    A landing frame (the last of an option, where its planned action applies) misses when the
    action was not there by its deadline (provenance fallback or late). Its latency is then
    censored (longer than the window) and its slack negative: both enter the percentiles as
    +-inf (`censored_percentile`), so p95 is exact while misses stay under 5%. A landing whose
    answer came on time but is illegal in the frame as played (an earlier missed frame moved
    the game off the state it was planned for) is no deadline miss: it counts as `invalid`.
    """
    flat = [r for ep in rows for r in ep]
    landings = [r for r in flat if r["landing"]]
    missed = [r for r in landings if r["provenance"] in _MISSED]
    by_k: dict[Any, list[float]] = collections.defaultdict(list)
    for r in landings:
        late = r["provenance"] in _MISSED or r["latency_ms"] is None
        by_k["undecided" if r["k"] is None else r["k"]].append(
            math.inf if late else r["latency_ms"]
        )
    latency = {}
    for k in [*sorted(x for x in by_k if x != "undecided"), "undecided"]:
        if k in by_k:
            lat = by_k[k]
            latency[str(k)] = {
                "n": len(lat),
                "misses": sum(math.isinf(x) for x in lat),
                **{f"p{q}": censored_percentile(lat, q) for q in QUANTILES},
            }
    pooled = [x for lat in by_k.values() for x in lat]
    latency["all"] = {
        "n": len(pooled),
        "misses": sum(math.isinf(x) for x in pooled),
        **{f"p{q}": censored_percentile(pooled, q) for q in QUANTILES},
    }
    slack = [-math.inf if r["provenance"] in _MISSED else r["slack_ms"] for r in landings]
    counts = collections.Counter(r["k"] for r in landings if r["k"] is not None)
    decided = max(sum(counts.values()), 1)
    returns = np.asarray(returns, np.float64)
    diff, diff_se = paired(returns, simulated)
    stats = [s.get("stats", {}) for s in sessions]
    return {
        "return": {"mean": float(returns.mean()), "se": standard_error(returns)},
        "simulated": {"mean": float(np.mean(simulated)), "se": standard_error(simulated)},
        "deployed_minus_simulated": {"mean": diff, "se": diff_se},
        "returns": returns.tolist(),
        "simulated_returns": [float(x) for x in simulated],
        "frames": [len(ep) for ep in rows],
        "budgets": {str(k): counts.get(k, 0) / decided for k in budgets},
        "budget_counts": {str(k): counts.get(k, 0) for k in budgets},
        "landings": len(landings),
        "misses": len(missed),
        "invalid": sum(r["provenance"] == "invalid" for r in landings),
        "miss_rate": len(missed) / len(landings) if landings else None,
        "slack_p95_ms": censored_percentile(slack, 5),
        "latency_ms": latency,
        "late_ticks": sum(int(s.get("late_ticks", 0)) for s in stats),
        "ticks": sum(int(s.get("ticks", 0)) for s in stats),
        "max_tick_lag_ms": max((float(s.get("max_tick_lag_ms", 0.0)) for s in stats), default=0.0),
        "planner_errors": sum(int(s.get("planner_errors", 0)) for s in stats),
        "planner_late_answers": sum(int(s.get("planner_late_answers", 0)) for s in stats),
        "last_planner_error": next(
            (s["last_planner_error"] for s in stats if s.get("last_planner_error")), ""
        ),
    }
