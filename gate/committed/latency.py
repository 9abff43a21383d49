"""Measured planning latency per budget, and the env server's deadline rule that makes misses.

**The miss rule** (the env server's, `server._agents.PlannerAgent` with `server._rules`): at FPS
F a frame lasts P = 1000 / F ms, and frame n is due at the ticker's tick n + 1 (`Ticker`: tick n
at start + n P). Option k decided at frame t sends its Plan call as frame t is published, plays
the reflex on frames t .. t+k-2, and applies its planned action on the landing frame t+k-1
(`planner.landing_frame`), whose deadline is tick t+k. So the planned action counts when it
arrives within k periods of the decision frame's tick:

    hit  iff  latency_ms <= k * 1000 / F        (an arrival exactly at the deadline is on time)

where latency_ms runs from tick t (the frame's scheduled start: it includes the env server's
step and publication before the call, the service's round trip and the search) to the arrival.
A miss plays the fallback on the landing frame instead (the game's `fallback_action`, or the
reflex when the session's fallback is "reflex"); the reflex frames before it are unchanged, and
the next decision is at t+k either way. Not modelled: a gated decision message that is not
there by frame t's own deadline (the service's gate decides in about a millisecond, before any
search), which ends the option at frame t in the server.

**Sources** (`load_latency`), per budget k, samples of latency_ms:

- a deploy run's frame rows (`results/<game>/deploy/fps_<F>.jsonl`, `rtplan.deploy.frame_rows`;
  one or more files, pooled): each landing row with a budget gives k * 1000 / fps - slack_ms
  (its arrival measured against its own deadline: the whole latency above); a landing row that
  fell back (nothing arrived before the frame was decided) is censored, +inf: it misses at any
  FPS (conservative below the FPS it was measured at).
- `rtplan calibrate`'s CSV (`results/<game>/calibration/calibration.csv`): its batch-1 search
  latency median and p95 at sims(k) simulations (linearly interpolated between the CSV's
  simulation counts), as a log-normal through those two quantiles, read at
  `CALIBRATION_SAMPLES` evenly spaced quantiles, plus a stated fixed overhead in ms (what the
  CSV does not measure: the service's round trip, the env server's step, the k-1 reflex frames).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import NormalDist

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "CALIBRATION_SAMPLES",
    "LatencyError",
    "LatencyModel",
    "decision_misses",
    "deadline_ms",
    "draw_misses",
    "load_latency",
    "missed",
    "simulated_deployment",
    "split_paths",
]

#: Samples per budget read from a calibration CSV's log-normal (evenly spaced quantiles).
CALIBRATION_SAMPLES = 1000
#: `fold_in` stream of an evaluation seed's miss draws (1 is its search keys, `planner.episodes`).
MISS_STREAM = 2
#: Deploy rows whose landing frame got no planned action in time.
_FELL_BACK = "fallback"
#: Deploy rows whose planned action arrived (on time, late, or on time but illegal).
_ARRIVED = ("on_time", "late", "invalid")


class LatencyError(ValueError):
    """A latency source that cannot be read, or lacks what a budget needs."""


def deadline_ms(k: int, fps: float) -> float:
    """Milliseconds from option k's decision frame's tick to its landing frame's deadline at
    `fps`: k frame periods (the module docstring's rule)."""
    return k * 1000.0 / fps


def missed(latency_ms, k: int, fps: float):
    """True where a planned action `latency_ms` after its decision frame's tick misses option
    k's landing deadline at `fps` (scalar or array)."""
    return np.asarray(latency_ms) > deadline_ms(k, fps)


@dataclasses.dataclass(frozen=True)
class LatencyModel:
    """Empirical latency per budget: what a simulated deployment draws its misses from."""

    #: k -> `[N]` latency_ms from the decision frame's tick to the planned action's arrival
    #: (+inf: it never arrived in time where it was measured).
    samples: Mapping[int, np.ndarray]
    #: What it was built from (files, their sha256, kind, overhead, rows left out).
    source: Mapping

    def miss_probability(self, k: int, fps: float) -> float:
        """The share of budget k's samples that miss at `fps`."""
        if fps <= 0:
            raise LatencyError(f"fps must be > 0, got {fps}")
        if k not in self.samples or len(self.samples[k]) == 0:
            have = ", ".join(str(b) for b in sorted(self.samples)) or "none"
            raise LatencyError(
                f"no latency samples for budget k={k} in {', '.join(self.source['files'])} "
                f"(budgets there: {have})"
            )
        return float(np.mean(missed(self.samples[k], k, fps)))

    def miss_probabilities(self, budgets: Sequence[int], fps: float) -> np.ndarray:
        """`[K]` the miss probability of each budget at `fps`."""
        return np.array([self.miss_probability(k, fps) for k in budgets], np.float32)

    def describe(self, budgets: Sequence[int], fps: float) -> dict:
        """Provenance of a simulated deployment at `fps`: the source, the samples per budget
        and the miss probabilities it implies."""
        return {
            **self.source,
            "fps": fps,
            "samples": {str(k): int(len(self.samples.get(k, ()))) for k in budgets},
            "miss_probability": {
                str(k): round(float(p), 6)
                for k, p in zip(budgets, self.miss_probabilities(budgets, fps))
            },
        }


def split_paths(paths: str | Sequence[str]) -> list[str]:
    """A source given as one string (files joined by commas, as a config field holds it) or
    a sequence, as a list of paths."""
    if isinstance(paths, str):
        paths = paths.split(",")
    return [p.strip() for p in paths if p.strip()]


def load_latency(
    paths: str | Sequence[str],
    *,
    simulations: Mapping[int, int],
    overhead_ms: float | None = None,
    game_id: str | None = None,
) -> LatencyModel:
    """The latency model of a source: deploy frame rows (`.jsonl`, one or more files, pooled)
    or one calibration CSV (`.csv`, with `overhead_ms`).

    Args:
        paths: the files, a sequence or one comma-joined string.
        simulations: budget k -> its simulations (the planner's `sims(k)`; the CSV's lookup).
        overhead_ms: the fixed ms a calibration CSV's search latency is short of a deployed
            plan's (required with a CSV; refused with deploy rows, which measured it).
        game_id: when given, a CSV with a `game` column must be this game's.

    Raises:
        LatencyError: a missing or unreadable file, a corrupt row, a mix of kinds, or a budget
            the source has nothing for.
    """
    files = split_paths(paths)
    if not files:
        raise LatencyError("no latency source given (a deploy .jsonl or a calibration .csv)")
    for f in files:
        if not Path(f).is_file():
            raise LatencyError(f"latency source {f} does not exist")
    kinds = {Path(f).suffix for f in files}
    if kinds == {".jsonl"}:
        if overhead_ms is not None:
            raise LatencyError(
                "a fixed overhead is for a calibration CSV: deploy rows measured the whole "
                "latency already"
            )
        return _from_deploy(files)
    if kinds == {".csv"}:
        if len(files) != 1:
            raise LatencyError(f"one calibration CSV at a time, got {len(files)}")
        if overhead_ms is None:
            raise LatencyError(
                f"{files[0]} times the search alone: state the service's fixed overhead in ms "
                "(docs/results.md measured 1.4 to 2.3 ms on a quiet box)"
            )
        if overhead_ms < 0:
            raise LatencyError(f"the overhead must be >= 0 ms, got {overhead_ms}")
        return _from_calibration(files[0], simulations, overhead_ms, game_id)
    raise LatencyError(
        f"latency sources must all be deploy rows (.jsonl) or one calibration CSV (.csv), got "
        f"{', '.join(files)}"
    )


def simulated_deployment(
    source: str,
    planner_config,
    fps: float,
    *,
    overhead_ms: float | None,
    fallback: str,
    game_id: str,
) -> tuple[LatencyModel, dict]:
    """(the model, its provenance) of a simulated deployment of `planner_config`'s budgets at
    `fps`: what `rtplan train-gate` and `rtplan eval` record beside their numbers."""
    budgets = planner_config.budgets
    model = load_latency(
        source,
        simulations={k: planner_config.sims(k) for k in budgets},
        overhead_ms=overhead_ms,
        game_id=game_id,
    )
    return model, {**model.describe(budgets, fps), "fallback": fallback}


def _sha256(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _from_deploy(files: list[str]) -> LatencyModel:
    samples: dict[int, list[float]] = {}
    undecided = 0
    for path in files:
        for n, line in enumerate(Path(path).read_text().splitlines(), 1):
            if not line.strip():
                continue
            where = f"{path}:{n}"
            try:
                row = json.loads(line)
            except ValueError as e:
                raise LatencyError(f"{where}: not a JSON line ({e})") from e
            if not isinstance(row, dict):
                raise LatencyError(f"{where}: not a frame row (a JSON object)")
            missing = [f for f in ("fps", "k", "landing", "provenance", "slack_ms") if f not in row]
            if missing:
                raise LatencyError(
                    f"{where}: not a deploy frame row (no {', '.join(missing)}; the rows are "
                    "fps_<F>.jsonl, not its .episodes.jsonl)"
                )
            if not row["landing"]:
                continue
            if row["k"] is None:  # a gated option whose decision never came: not modelled
                undecided += 1
                continue
            k, prov = int(row["k"]), row["provenance"]
            if prov == _FELL_BACK:
                value = math.inf
            elif prov in _ARRIVED:
                try:
                    value = deadline_ms(k, float(row["fps"])) - float(row["slack_ms"])
                except (TypeError, ValueError, ZeroDivisionError) as e:
                    raise LatencyError(f"{where}: bad fps or slack_ms ({e})") from e
            else:
                raise LatencyError(f"{where}: unknown provenance {prov!r}")
            samples.setdefault(k, []).append(value)
    if not samples:
        raise LatencyError(f"no landing rows with a budget in {', '.join(files)}")
    return LatencyModel(
        samples={k: np.asarray(v, np.float64) for k, v in sorted(samples.items())},
        source={
            "kind": "deploy",
            "files": files,
            "sha256": [_sha256(f) for f in files],
            "undecided_rows": undecided,
        },
    )


def _interpolate(points: dict[int, tuple[float, float]], sims: int, k: int, path: str):
    """(median, p95) at `sims` simulations, linear between the CSV's nearest counts."""
    if sims in points:
        return points[sims]
    below = [s for s in points if s < sims]
    above = [s for s in points if s > sims]
    if not below or not above:
        raise LatencyError(
            f"{path} has no row at or around {sims} simulations (budget k={k}): it has "
            f"{', '.join(str(s) for s in sorted(points))}"
        )
    lo, hi = max(below), min(above)
    w = (sims - lo) / (hi - lo)
    return tuple((1 - w) * a + w * b for a, b in zip(points[lo], points[hi]))


def _from_calibration(
    path: str, simulations: Mapping[int, int], overhead_ms: float, game_id: str | None
) -> LatencyModel:
    need = ("simulations", "latency_ms_median", "latency_ms_p95")
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in need if c not in (reader.fieldnames or ())]
        if missing:
            raise LatencyError(
                f"{path} is not an rtplan calibrate CSV (no {', '.join(missing)} column)"
            )
        points: dict[int, tuple[float, float]] = {}
        for n, row in enumerate(reader, 2):
            if game_id is not None and row.get("game") not in (None, "", game_id):
                raise LatencyError(f"{path}:{n}: a row of {row['game']}, not {game_id}")
            try:
                sims = int(row["simulations"])
                median, p95 = float(row["latency_ms_median"]), float(row["latency_ms_p95"])
            except (TypeError, ValueError) as e:
                raise LatencyError(f"{path}:{n}: bad simulations or latency ({e})") from e
            if not (median > 0 and p95 > 0):
                raise LatencyError(f"{path}:{n}: latencies must be > 0 ms")
            points[sims] = (median, p95)
    if not points:
        raise LatencyError(f"{path} has no rows")
    z95 = NormalDist().inv_cdf(0.95)
    z = np.array(
        [NormalDist().inv_cdf((i + 0.5) / CALIBRATION_SAMPLES) for i in range(CALIBRATION_SAMPLES)]
    )
    samples = {}
    for k, sims in sorted(simulations.items()):
        median, p95 = _interpolate(points, sims, k, path)
        sigma = max(0.0, math.log(p95 / median) / z95)
        samples[k] = overhead_ms + median * np.exp(sigma * z)
    return LatencyModel(
        samples=samples,
        source={
            "kind": "calibration",
            "files": [path],
            "sha256": [_sha256(path)],
            "overhead_ms": overhead_ms,
            "simulations": {str(k): s for k, s in sorted(simulations.items())},
        },
    )


def draw_misses(key: jax.Array, index: jax.Array, probabilities: jax.Array) -> jax.Array:
    """`[B]` bool: which of `[B]` options (budget indices `index`) miss, drawn with the budgets'
    `[K]` miss `probabilities` from `key` (its own stream: `key`'s other uses are unchanged).
    Pure; the trainer jits it."""
    u = jax.random.uniform(jax.random.fold_in(key, MISS_STREAM), index.shape)
    return u < probabilities[index]


# Jitted once per process, on first use.
@functools.lru_cache(maxsize=1)
def _draw_fns():
    base = jax.vmap(lambda s: jax.random.fold_in(jax.random.PRNGKey(s), MISS_STREAM))
    uniforms = jax.vmap(lambda key, t: jax.random.uniform(jax.random.fold_in(key, t)), (0, None))
    return jax.jit(base), jax.jit(uniforms)


def decision_misses(seeds: np.ndarray, probability: Mapping[int, float]):
    """The misses of an evaluation (`planner.episodes.Misses`), paired across conditions.

    Decision t of seed s draws one uniform u from `fold_in(fold_in(PRNGKey(s), 2), t)` and
    misses when u < p(k), its budget's probability. So every condition, batch and order sees
    the same u for the same (seed, decision): two conditions that pick the same k there miss
    alike, and a budget with a higher p misses wherever a lower one does (common random
    numbers).
    """
    base_fn, uniforms = _draw_fns()
    base = base_fn(jnp.asarray(np.asarray(seeds), jnp.uint32))
    table = np.zeros(max(probability, default=0) + 1, np.float64)
    for k, p in probability.items():
        table[k] = p

    def misses(t: int, ks: np.ndarray) -> np.ndarray:
        u = np.asarray(uniforms(base, jnp.uint32(t)))
        return u < table[np.asarray(ks)]  # a skipped game (k = 0) has p = 0

    return misses
