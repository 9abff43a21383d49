"""Counterfactual budget values of the clock games: the room per move (issue 45, part 2).

From positions along real games (both sides always-K at one clock T0), every option of the
mover is branched at the same remaining clocks: the reflex (k=0, free) and each budget k, its
own simulations charged to the mover's clock (a budget the clock cannot pay falls down to the
largest that fits, as always-k does: `gate.clock.heuristics.always`). Every branch then plays on
under always-K for both sides to the game's end (or `max_plies`), and the value of an option is
the mover's result: 1 win, 0 loss (a fallen flag loses), 0.5 unfinished.

Clock games have no chance events after the opening (`Game.rekey` is the identity), so a
*world* is a stream of search keys: world 0 keeps the position's own move keys (its branch of
K is the game as it was played), world m > 0 folds m into them. Every option of a position
shares its world's keys (paired), and the spread over worlds is the noise a comparison must
beat. Positions come from `planner.matches.match_start` + `play_on`, the plies `play_match`
plays, from train-range seeds.

Where extra search pays is read against each position's ply, both clocks and the planner's
uncertainty there (`uncertainty`): policy entropy, root value, the prior's top-two gap, the
top-two gap of the smallest and the largest budget's improved policy (the search's
`action_weights`; not its visit counts, which Gumbel sequential halving splits evenly between
its last two candidates, so their gap reads 0), and whether the largest budget's move differs
from the smallest's (its probe searches draw their own keys).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import os
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from rtplan import games
from rtplan.gate.clock.heuristics import ClockOptions, always, clock_inputs
from rtplan.gate.counterfactual._chunks import run_chunks
from rtplan.gate.counterfactual.values import BranchValues, cross_fitted_gain, diagnose, paying
from rtplan.gate.files import file_sha256
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.stats import standard_error
from rtplan.planner.batching import OptionRunner
from rtplan.planner.matches import EVAL_OPENING_PLIES, match_start, play_on
from rtplan.planner.options import Planner

__all__ = [
    "FEATURES",
    "ClockBranchValues",
    "bins",
    "branch_keys",
    "clock_branch_values",
    "clock_positions",
    "run_clock_counterfactual",
    "uncertainty",
]

#: The per-position columns `uncertainty` and `clock_positions` record, binned by `bins`.
FEATURES = (
    "ply",
    "my_time",
    "opp_time",
    "my_time_share",
    "policy_entropy",
    "root_value",
    "prior_gap",
    "search_gap_small",
    "search_gap_large",
    "large_changes_move",
)


@dataclasses.dataclass
class ClockBranchValues:
    """The mover's result from each position `[S]` per world `[M]` and option `[K]`."""

    values: np.ndarray  # [S, M, K] 1 win, 0 loss, 0.5 unfinished, for the position's mover
    plies: np.ndarray  # [S, M, K] plies each branch played to its end
    played: np.ndarray  # [S, K] budget each branch's first move really searched (fit down)
    budgets: tuple[int, ...]  # [K] 0 (the reflex), then the planner's budgets
    continuation: int  # the budget every branch goes on with, both sides


def _options(planner: Planner) -> ClockOptions:
    return ClockOptions.of(planner)


@functools.lru_cache(maxsize=16)
def _chooser(planner: Planner, k: int):
    """`(states, out, keys) -> [R]` options of always-k, jitted (once per planner and k)."""
    pick = always(_options(planner), k)
    return jax.jit(lambda states, out, keys: pick(clock_inputs(states, out), keys))


def clock_positions(
    planner: Planner,
    params,
    runner: OptionRunner,
    seeds: np.ndarray,
    continuation: int,
    *,
    initial_time: int,
    max_ply: int,
    rng: np.random.Generator,
    max_plies: int = 400,
    opening_plies: int = EVAL_OPENING_PLIES,
) -> tuple[games.State, jax.Array, np.ndarray]:
    """Positions along always-`continuation` play (both sides) at clock `initial_time`: seed
    i's game (`match_start`) is played for a number of plies drawn from `[0, max_ply)`; games
    that ended before are dropped. Returns (states `[S]`, their move keys, their seeds)."""
    seeds = np.asarray(seeds)
    states, keys = match_start(planner, seeds, initial_time, opening_plies=opening_plies)
    until = rng.integers(0, max_ply, len(seeds))
    choose = _chooser(planner, continuation)
    states, keys, _, _ = play_on(
        planner,
        params,
        states,
        keys,
        lambda i, s, o, k: choose(s, o, k),
        max_plies=max_plies,
        until=until,
        runner=runner,
    )
    keep = ~np.asarray(states.done)
    pick = jnp.asarray(np.flatnonzero(keep))
    return jax.tree.map(lambda x: x[pick], states), keys[pick], seeds[keep]


def branch_keys(keys: jax.Array, worlds: int) -> jax.Array:
    """`[S, M]` move keys of world m of each position: its own keys for m = 0, m folded in
    otherwise (`keys` `[S]`)."""
    fold = jax.vmap(jax.vmap(jax.random.fold_in, (None, 0)), (0, None))
    folded = fold(keys, jnp.arange(worlds))
    return jnp.where((jnp.arange(worlds) == 0)[None, :, None], keys[:, None], folded)


def clock_branch_values(
    planner: Planner,
    params,
    runner: OptionRunner,
    states: games.State,
    keys: jax.Array,
    *,
    continuation: int,
    worlds: int,
    max_plies: int = 400,
) -> ClockBranchValues:
    """Every option's value from each of `states` `[S]` (move keys `keys`) in `worlds` key
    streams: row (s, m, j), option fastest, plays option j's budget first (fit down to the
    mover's clock), then always-`continuation` for both sides to the end."""
    options = _options(planner)
    budgets = (0, *options.budgets)
    s, m, k = keys.shape[0], worlds, len(budgets)
    state_of = jnp.asarray(np.repeat(np.arange(s), m * k))
    rows = jax.tree.map(lambda x: x[state_of], states)
    row_keys = jnp.repeat(branch_keys(keys, worlds).reshape(s * m, -1), k, axis=0)
    first = [_chooser(planner, b) for b in budgets]
    later = _chooser(planner, continuation)
    which = np.tile(np.arange(k), s * m)
    played = {}

    def choose(i, st, out, ck):
        if i > 0:
            return later(st, out, ck)
        each = np.stack([np.asarray(f(st, out, ck)) for f in first], 1)  # [R, K]
        opt = each[np.arange(len(which)), which]
        played["first"] = opt
        return opt

    movers = np.asarray(rows.current_player)
    _, _, rewards, plies = play_on(
        planner, params, rows, row_keys, choose, max_plies=max_plies, runner=runner
    )
    mine = rewards[np.arange(len(movers)), movers]
    return ClockBranchValues(
        values=((mine + 1.0) / 2.0).reshape(s, m, k),
        plies=plies.reshape(s, m, k),
        played=options.budget(played["first"]).reshape(s, m, k)[:, 0],
        budgets=budgets,
        continuation=continuation,
    )


@functools.lru_cache(maxsize=4)
def _probe_fns(planner: Planner):
    def stats(params, states):
        out = planner.evaluate(params, states)
        legal = states.legal_action_mask
        logp = jax.nn.log_softmax(jnp.where(legal, out.logits, -jnp.inf), -1)
        p = jnp.exp(logp)
        entropy = -jnp.sum(jnp.where(legal, p * logp, 0.0), -1)
        top = jax.lax.top_k(p, 2)[0]
        return entropy, out.value, top[:, 0] - top[:, 1]

    return jax.jit(stats)


def _top_two_gap(weights: np.ndarray) -> np.ndarray:
    """`[S]` the gap between the two largest of each row of `weights` `[S, A]` (a policy)."""
    top = -np.sort(-weights, 1)[:, :2]
    return top[:, 0] - top[:, 1]


def uncertainty(
    planner: Planner, params, runner: OptionRunner, states: games.State, key: jax.Array
) -> dict[str, np.ndarray]:
    """The planner's uncertainty at `states` `[S]` and their clocks, each `[S]` (`FEATURES`):
    the ply, both clocks (ticks, and the mover's share of T0), the entropy of the masked
    prior, the root value, the prior's top-two gap, the top-two gap of the smallest and the
    largest budget's improved policy (`action_weights`), and 1 where the largest budget
    picks another move than the smallest. The probe searches draw keys from `key`."""
    entropy, value, gap = jax.device_get(_probe_fns(planner)(params, states))
    n = states.frame.shape[0]
    probe = jax.random.split(key, n)
    small, large = min(planner.config.budgets), max(planner.config.budgets)
    outs = {b: runner(params, probe, states, np.full(n, b)) for b in (small, large)}
    inputs = clock_inputs(states)
    return {
        "ply": np.asarray(states.frame, np.float64),
        "my_time": np.asarray(inputs.my_time, np.float64),
        "opp_time": np.asarray(inputs.opp_time, np.float64),
        "my_time_share": np.asarray(inputs.my_time / inputs.initial_time, np.float64),
        "policy_entropy": np.asarray(entropy, np.float64),
        "root_value": np.asarray(value, np.float64),
        "prior_gap": np.asarray(gap, np.float64),
        "search_gap_small": _top_two_gap(np.asarray(outs[small].action_weights)),
        "search_gap_large": _top_two_gap(np.asarray(outs[large].action_weights)),
        "large_changes_move": np.asarray(
            outs[large].actions[:, 0] != outs[small].actions[:, 0], np.float64
        ),
    }


def bins(x: np.ndarray, n: int = 4) -> list[tuple[float, float, np.ndarray]]:
    """`n` quantile bins of `x` `[S]` as (low, high, mask `[S]`), the last one closed; a column
    with at most `n` distinct values gets one bin per value."""
    x = np.asarray(x, np.float64)
    distinct = np.unique(x)
    if len(distinct) <= n:
        return [(float(v), float(v), x == v) for v in distinct]
    edges = np.unique(np.quantile(x, np.linspace(0, 1, n + 1)))
    out = []
    for i, (lo, hi) in enumerate(zip(edges[:-1], edges[1:], strict=True)):
        last = i == len(edges) - 2
        out.append((float(lo), float(hi), (x >= lo) & ((x <= hi) if last else (x < hi))))
    return out


def by_feature(
    cbv: ClockBranchValues, features: dict[str, np.ndarray], *, n_bins: int = 4
) -> list[dict]:
    """Rows of the per-bin table: per feature, bin and option, the mean over the bin's
    positions of the world-averaged difference with the continuation (and its SE over the
    positions), and per bin the cross-fitted oracle gain (option "oracle")."""
    c = cbv.budgets.index(cbv.continuation)
    mean, _, _ = paying(cbv.values, c)
    gain = cross_fitted_gain(cbv.values, c) if cbv.values.shape[1] >= 2 else None
    rows = []
    for name in FEATURES:
        for lo, hi, mask in bins(features[name], n_bins):
            base = {"feature": name, "low": lo, "high": hi, "positions": int(mask.sum())}
            for j, b in enumerate(cbv.budgets):
                d = mean[mask, j]
                rows.append({**base, "option": f"k{b}", "mean": d.mean(), "se": standard_error(d)})
            if gain is not None:
                g = gain[mask]
                rows.append({**base, "option": "oracle", "mean": g.mean(), "se": standard_error(g)})
    return rows


def _summary(cbv: ClockBranchValues, features: dict[str, np.ndarray], table: list[dict]) -> dict:
    bv = BranchValues(
        values=cbv.values,
        ends=cbv.plies,
        budgets=cbv.budgets,
        continuation=cbv.continuation,
        horizon=None,
        frames=features["ply"],
        seeds=np.arange(len(cbv.values)),
    )
    summary = diagnose(bv)
    summary["fits"] = {
        f"k{b}": float((cbv.played[:, j] == b).mean()) for j, b in enumerate(cbv.budgets)
    }
    # The feature bins in which the cross-fitted oracle gains most (what a clock gate could
    # learn to read), each with its SE: the CSV holds every bin and option.
    oracle = [r for r in table if r["option"] == "oracle"]
    summary["oracle_gain_by_feature"] = {
        name: [
            {k: r[k] for k in ("low", "high", "positions", "mean", "se")}
            for r in oracle
            if r["feature"] == name
        ]
        for name in FEATURES
    }
    return summary


def run_clock_counterfactual(
    game_id: str,
    *,
    initial_time: int,
    continuation: int,
    states: int = 32,
    worlds: int = 4,
    max_ply: int = 40,
    max_plies: int = 400,
    chunk: int = 8,
    seed: int = 0,
    n_bins: int = 4,
    gumbel_scale: float | None = None,
    planner_file: str | None = None,
    out: str | os.PathLike | None = None,
    command: str | None = None,
    log: Callable[[str], None] = print,
) -> dict:
    """The room per move of clock game `game_id` at T0 `initial_time`: positions from
    train-range games `seed, seed+1, ...` (always-`continuation` for both sides to a ply drawn
    from `[0, max_ply)`), every option branched in `worlds` key streams and played on to the
    end. Writes each chunk of `chunk` games to `<out>/<game>/counterfactual/<tag>/` as it
    finishes (a rerun keeps the chunks written: resumable), then `by-feature.csv` (`by_feature`)
    and `summary.json` (`diagnose`, the share each option fit, the oracle's gain by feature bin).
    `gumbel_scale` (None: the planner's own) replaces the planner's Gumbel noise: a planner
    with none searches deterministically, so its worlds all play one game and the noise over
    worlds reads 0 (the cross-fit then picks on the very worlds it scores). Returns the
    summary."""
    from rtplan.harness.layout import results_root
    from rtplan.planner.store import load_planner

    if games.kind_of(game_id) is not games.Kind.CLOCK:
        raise ValueError(f"{game_id} is a committed game: use `counterfactual` without --t0")
    if worlds < 2:
        raise ValueError("worlds must be >= 2 (the noise is measured across worlds)")
    planner_file = str(ckpt.planner_file(game_id, planner_file))
    pcfg, params, _ = load_planner(game_id, planner_file)
    if continuation not in pcfg.budgets:
        raise ValueError(f"continuation k={continuation} is not one of {pcfg.budgets}")
    if gumbel_scale is not None:
        pcfg = dataclasses.replace(pcfg, gumbel_scale=float(gumbel_scale))
    planner = Planner(pcfg)
    noise = "" if gumbel_scale is None else f"-g{gumbel_scale:g}"
    tag = f"t{initial_time}-k{continuation}-w{worlds}-p{max_ply}{noise}-s{seed}"
    folder = Path(results_root(out)) / game_id / "counterfactual" / tag
    k = len(pcfg.budgets) + 1
    runner = OptionRunner(planner, max_batch=chunk * worlds * k)
    budgets = (0, *pcfg.budgets)
    sha = file_sha256(planner_file)

    def label(first: int, seeds: np.ndarray) -> dict:
        rng = np.random.default_rng([first, 45])
        st, keys, kept = clock_positions(
            planner,
            params,
            runner,
            seeds,
            continuation,
            initial_time=initial_time,
            max_ply=max_ply,
            rng=rng,
            max_plies=max_plies,
        )
        part = dict(seeds=kept.tolist(), values=[], plies=[], played=[], features={})
        if len(kept):
            cbv = clock_branch_values(
                planner,
                params,
                runner,
                st,
                keys,
                continuation=continuation,
                worlds=worlds,
                max_plies=max_plies,
            )
            feats = uncertainty(planner, params, runner, st, jax.random.PRNGKey(first))
            part.update(
                values=cbv.values.tolist(),
                plies=cbv.plies.tolist(),
                played=cbv.played.tolist(),
                features={f: v.tolist() for f, v in feats.items()},
            )
        return part

    def summarize(parts: list[dict]) -> dict:
        parts = [p for p in parts if p["seeds"]]
        if not parts:
            raise ValueError(f"every game ended before its sampled ply: lower max_ply ({max_ply})")
        seconds = sum(p["seconds"] for p in parts)
        shape = (-1, worlds, k)
        cbv = ClockBranchValues(
            values=np.concatenate(
                [np.asarray(p["values"], np.float64).reshape(shape) for p in parts]
            ),
            plies=np.concatenate([np.asarray(p["plies"], np.int64).reshape(shape) for p in parts]),
            played=np.concatenate([np.asarray(p["played"], np.int64) for p in parts]),
            budgets=budgets,
            continuation=continuation,
        )
        feats = {f: np.concatenate([np.asarray(p["features"][f]) for p in parts]) for f in FEATURES}
        table = by_feature(cbv, feats, n_bins=n_bins)
        with open(folder / "by-feature.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(table[0]))
            writer.writeheader()
            writer.writerows(table)
        summary = _summary(cbv, feats, table)
        summary.update(
            game=game_id,
            initial_time=initial_time,
            gumbel_scale=pcfg.gumbel_scale,
            options=[f"k{b}" for b in budgets],
            planner=ckpt.recorded_path(planner_file),
            planner_sha256=sha,
            seconds=seconds,
            seconds_per_position=seconds / len(cbv.values),
            command=command,
        )
        return summary

    return run_chunks(
        folder,
        head={"game": game_id, "planner": ckpt.recorded_path(planner_file), "planner_sha256": sha},
        seed=seed,
        states=states,
        chunk=chunk,
        label=label,
        summarize=summarize,
        noun="positions",
        command=command,
        log=log,
    )
