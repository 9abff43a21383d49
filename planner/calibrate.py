"""Calibration (quality and latency vs simulations) and cross-evaluation of planner checkpoints."""

from __future__ import annotations

import csv
import dataclasses
import functools
import time
from pathlib import Path

import jax
import numpy as np

from rtplan import games
from rtplan.planner.episodes import Episodes, always, eval_runner, play, seeds_of
from rtplan.planner.matches import EVAL_OPENING_PLIES, RANDOM, REFLEX, option_player, play_match
from rtplan.planner.options import Planner, PlannerConfig
from rtplan.planner.store import load_planner
from rtplan.planner.train_config import TrainConfig

#: Opponents of the clock-game evaluations.
OPPONENTS = {"reflex": REFLEX, "random": RANDOM}


def with_sims(cfg: PlannerConfig, k: int, sims: int) -> PlannerConfig:
    """A config whose only budget is `k` with `sims` simulations, deterministic search."""
    cfg = dataclasses.replace(cfg, budgets=(k,), simulations=(sims,), gumbel_scale=0.0)
    if games.kind_of(cfg.game_id) is games.Kind.CLOCK:
        # Evaluated for board strength: every move of the option is searched (with T0 = 300 a
        # 128-simulation option could afford two).
        params = {**dict(cfg.game_params), "initial_time": games.UNLIMITED_CLOCK}
        cfg = dataclasses.replace(cfg, game_params=tuple(params.items()))
    return cfg


def _latency(planner: Planner, params, k: int, calls: int) -> np.ndarray:
    states = jax.vmap(planner.game.init)(jax.random.split(jax.random.PRNGKey(1), 1))
    keys = jax.random.split(jax.random.PRNGKey(2), 1)
    fn = jax.jit(functools.partial(planner.option, k=k))
    for _ in range(5):
        jax.block_until_ready(fn(params, keys, states))
    out = []
    for _ in range(calls):
        start = time.perf_counter()
        jax.block_until_ready(fn(params, keys, states))
        out.append((time.perf_counter() - start) * 1e3)
    return np.asarray(out)


def _quality(
    planner: Planner,
    params,
    k: int,
    episodes: int,
    max_decisions: int | None,
    split: str,
    opponent: str = "reflex",
) -> Episodes:
    """Always-k play on the split's first seeds: `episodes` committed episodes, or
    `episodes` clock games (each of `episodes / 2` openings with both colours) vs `opponent`."""
    if planner.kind is games.Kind.CLOCK:
        if episodes % 2:
            raise ValueError(f"episodes must be even (half with each colour), got {episodes}")
        return play_match(
            planner,
            params,
            option_player(planner, k),
            OPPONENTS[opponent],
            seeds_of(split, episodes // 2),
            opening_plies=EVAL_OPENING_PLIES,
        )
    seeds = seeds_of(split, episodes)
    runner = eval_runner(planner, episodes)
    return play(runner, params, seeds, always(k), max_decisions=max_decisions)


def calibrate(
    game_id: str,
    *,
    checkpoint: str | None,
    sims: list[int],
    episodes: int,
    max_decisions: int,
    calls: int,
    out_dir: Path,
    split: str = "tuning",
) -> list[dict]:
    """Quality (return, or score vs the policy-only player) and batch-1 latency per sim count.

    Quality is played on the `split`'s first seeds (tuning: calibration picks a budget's
    simulations, a selection). Writes `calibration.csv` and `calibration.png` in `out_dir`;
    returns the rows.
    """
    base, params, meta = load_planner(game_id, checkpoint)
    clock = games.kind_of(game_id) is games.Kind.CLOCK
    rows = []
    for n in sims:
        k = n if clock else 1
        planner = Planner(with_sims(base, k, n))
        lat = _latency(planner, params, k, calls)
        res = _quality(planner, params, k, episodes, max_decisions, split)
        row = {
            "game": game_id,
            "simulations": n,
            "quality_mean": res.mean,
            "quality_se": res.se,
            "quality": "score vs policy-only" if clock else "return",
            "episodes": episodes,
            "latency_ms_median": float(np.median(lat)),
            "latency_ms_p95": float(np.percentile(lat, 95)),
            "checkpoint": meta["checkpoint"],
        }
        rows.append(row)
        print(
            f"[{game_id}] sims {n:4d}: {row['quality']} {res}  latency "
            f"{row['latency_ms_median']:.1f} / {row['latency_ms_p95']:.1f} ms",
            flush=True,
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_csv(out_dir / "calibration.csv", rows)
    _plot(out_dir / "calibration.png", rows, game_id)
    return rows


def _train_k(game_id: str, meta: dict) -> int | str:
    """The option budget a checkpoint's run trained under ("?" without training metadata)."""
    if "train_config" not in meta:
        return "?"
    return TrainConfig(game_id=game_id, train_k=meta["train_config"].get("train_k")).k


def cross_eval(
    game_id: str,
    *,
    checkpoints: list[str],
    eval_ks: list[int] | None,
    sims_per_frame: list[int],
    episodes: int,
    out_dir: Path,
    max_frames: int | None = None,
    split: str = "eval",
    opponent: str = "reflex",
) -> list[dict]:
    """Every checkpoint at every eval-k and simulation count (the paper's appendix G grid).

    Committed games: option k with `sims_per_frame * k` simulations, always-k play to each
    episode's end, or over the first `max_frames` frames (ceil(max_frames / k) options: every
    eval-k plays the same horizon, exactly when k divides it). At the planner's own
    simulations an episode is the one `rtplan eval` plays as condition "k<k>" on the same
    split: same seed, same return. Clock games: option with `sims_per_frame` simulations vs
    `opponent` ("reflex": the policy-only player, or "random"), `episodes / 2` openings with
    both colours, played to the end (eval_k and max_frames are ignored).
    Episodes of every condition share the same seeds (paired). Writes `cross_eval.csv`.
    """
    clock = games.kind_of(game_id) is games.Kind.CLOCK
    rows = []
    for path in checkpoints:
        base, params, meta = load_planner(game_id, path)
        train_k = _train_k(game_id, meta)
        for spf in sims_per_frame:
            for k in [spf] if clock else (eval_ks or list(base.budgets)):
                sims = spf if clock else spf * k
                planner = Planner(with_sims(base, k, sims))
                decisions = None if clock or max_frames is None else -(-max_frames // k)
                res = _quality(planner, params, k, episodes, decisions, split, opponent)
                row = {
                    "game": game_id,
                    "checkpoint": path,
                    "opponent": opponent if clock else "",
                    "train_k": train_k,
                    "eval_k": k,
                    "simulations": sims,
                    "max_decisions": decisions,
                    "split": split,
                    "mean": res.mean,
                    "se": res.se,
                    "episodes": episodes,
                }
                rows.append(row)
                print(
                    f"[{game_id}] {path} train_k={train_k} eval_k={k} sims={sims}: {res}",
                    flush=True,
                )
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_csv(out_dir / "cross_eval.csv", rows)
    best = max(rows, key=lambda r: r["mean"])
    print(f"best: {best['checkpoint']} at eval_k={best['eval_k']} sims={best['simulations']}")
    return rows


def _write_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _plot(path: Path, rows: list[dict], game_id: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sims = [r["simulations"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.errorbar(
        sims,
        [r["quality_mean"] for r in rows],
        yerr=[r["quality_se"] for r in rows],
        marker="o",
        color="tab:blue",
        capsize=3,
    )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("MCTS simulations")
    ax.set_ylabel(rows[0]["quality"], color="tab:blue")
    twin = ax.twinx()
    twin.plot(
        sims, [r["latency_ms_median"] for r in rows], marker="s", color="tab:red", label="median"
    )
    twin.plot(sims, [r["latency_ms_p95"] for r in rows], ls="--", color="tab:red", label="p95")
    twin.set_ylabel("batch-1 latency (ms)", color="tab:red")
    twin.legend(loc="lower right")
    ax.set_title(f"{game_id}: planning quality and latency vs simulations")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
