"""The leaderboard's numbers: each finished run's return with its standard error, its paired
difference to the best reference on the same seeds, and its timing profile (pure functions
over the repository's records).

Every run of a game, tier and seed set played the same seeds, so two runs compare episode by
episode: the paired difference's standard error is that of the per-seed differences
(`harness.stats.paired`), far smaller than the two means' errors together when the seeds
decide much of the return.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rtplan.arena.records import EpisodeRecord, RunRecord
from rtplan.harness.stats import paired, standard_error


@dataclass(frozen=True)
class Timing:
    """How a run's agent used its time, over all its finished episodes.

    Attributes:
        frames: frames played.
        on_time, late, fallback, invalid: each kind's share of the frames.
        slack_median_ms, slack_p5_ms: the slack left before the deadline by the answers
            judged at their frame (deadline - arrival), from the summed share histograms: to
            the histogram's resolution (a bin is 5% of the frame period).
        frame_share_mean: the mean share of the frame period an answer used.
    """

    frames: int
    on_time: float
    late: float
    fallback: float
    invalid: float
    slack_median_ms: float | None
    slack_p5_ms: float | None
    frame_share_mean: float | None


@dataclass(frozen=True)
class Row:
    """One finished run on the leaderboard."""

    run: RunRecord
    returns: np.ndarray  # [episodes] by seed, ascending
    mean: float
    se: float
    timing: Timing
    #: Against the best reference (None for that reference itself, or with none): the mean
    #: per-seed difference and its paired standard error, and the reference's name.
    vs_best: tuple[float, float] | None = None
    best_reference: str | None = None

    @property
    def name(self) -> str:
        return f"{self.run.agent} {self.run.version}"


def _quantile(counts: np.ndarray, q: float) -> float:
    """The `q` quantile of a histogram of equal bins over [0, 1) plus one bin at 1 (linear
    within a bin)."""
    total = counts.sum()
    target = q * total
    cum = np.cumsum(counts)
    i = int(np.searchsorted(cum, target, side="left"))
    bins = len(counts) - 1
    if i >= bins:
        return 1.0
    before = cum[i - 1] if i else 0
    inside = (target - before) / counts[i] if counts[i] else 0.0
    return (i + inside) / bins


def timing(episodes: list[EpisodeRecord], fps: float) -> Timing:
    """The timing profile of a run's finished episodes played at `fps`."""
    frames = sum(e.frames for e in episodes)
    share = lambda n: n / frames if frames else 0.0  # noqa: E731
    hists = [np.asarray(e.frame_share_hist) for e in episodes if e.frame_share_hist]
    period_ms = 1e3 / fps
    slack_median = slack_p5 = share_mean = None
    if hists and sum(h.sum() for h in hists):
        counts = np.sum(hists, axis=0)
        # Slack is what the share used leaves: its p5 is the share's p95.
        slack_median = round((1 - _quantile(counts, 0.5)) * period_ms, 2)
        slack_p5 = round((1 - _quantile(counts, 0.95)) * period_ms, 2)
        weights = [
            (e.frame_share_mean, sum(e.frame_share_hist))
            for e in episodes
            if e.frame_share_hist and e.frame_share_mean is not None
        ]
        n = sum(w for _, w in weights)
        share_mean = round(sum(m * w for m, w in weights) / n, 4) if n else None
    return Timing(
        frames=frames,
        on_time=share(sum(e.on_time for e in episodes)),
        late=share(sum(e.late for e in episodes)),
        fallback=share(sum(e.fallback for e in episodes)),
        invalid=share(sum(e.invalid for e in episodes)),
        slack_median_ms=slack_median,
        slack_p5_ms=slack_p5,
        frame_share_mean=share_mean,
    )


def board(runs: list[RunRecord]) -> list[Row]:
    """The leaderboard of finished runs of one game, tier and seed set, best mean first; each
    row paired against the best reference (the reference run with the highest mean).

    Raises:
        ValueError: runs of different games, tiers or seed sets (they share no seeds).
    """
    done = [r for r in runs if r.status == "finished"]
    if len({(r.game_id, r.tier, r.seed_set) for r in done}) > 1:
        raise ValueError("a leaderboard holds one game, tier and seed set")
    rows = []
    for run in done:
        played = run.by_seed
        returns = np.array([played[seed].episode_return or 0.0 for seed in sorted(played)])
        rows.append(
            Row(
                run=run,
                returns=returns,
                mean=float(returns.mean()),
                se=standard_error(returns),
                timing=timing(list(played.values()), run.fps),
            )
        )
    references = [r for r in rows if r.run.agent_kind == "reference"]
    best = max(references, key=lambda r: r.mean, default=None)
    out = []
    for row in rows:
        if best is not None and row is not best and set(row.run.by_seed) == set(best.run.by_seed):
            row = Row(**{**row.__dict__, "vs_best": paired(row.returns, best.returns),
                         "best_reference": best.name})  # fmt: skip
        out.append(row)
    return sorted(out, key=lambda r: -r.mean)
