"""Planner benchmark: batch-1 option latency per k per game, and the mixed-k batch cost ratio.

Usage: python -m bench.bench_planner [--games ...] [--calls 50] [--mixed-game snake-rt-v0]

Latency: one jitted option at batch 1 (the live case), 10 warm-up then `--calls` timed calls,
median and p95 in ms, default network of each game (weights do not change the cost).
Mixed-k: a batch where each game picked its own k runs grouped by k (`OptionRunner`); its time
is compared, in the same run, with the chosen options alone (each k group at its exact size)
and with the reference's approach (every option for every game).
"""

from __future__ import annotations

import argparse
import functools

import jax
import numpy as np

from bench._common import median_p95, print_ratio_table, time_calls
from rtplan import games
from rtplan.planner import Planner, default_config
from rtplan.planner.batching import OptionRunner


def latency_table(game_ids, calls: int) -> None:
    print("\n## Batch-1 option latency (ms, median / p95)\n")
    print("| game | " + " | ".join("k / sims" for _ in range(4)) + " |")
    print("|---|---|---|---|---|")
    for game_id in game_ids:
        planner = Planner(default_config(game_id))
        params = planner.init_params(jax.random.PRNGKey(0))
        states = jax.vmap(planner.game.init)(jax.random.split(jax.random.PRNGKey(1), 1))
        keys = jax.random.split(jax.random.PRNGKey(2), 1)
        cells = []
        for k in planner.config.budgets:
            fn = jax.jit(functools.partial(planner.option, k=k))
            t = time_calls(fn, params, keys, states, calls=calls)
            sims = planner.config.sims(k)
            median, p95 = median_p95(t)
            cells.append(f"k={k}/{sims}: {median:.1f} / {p95:.1f}")
        print(f"| {game_id} | " + " | ".join(cells) + " |", flush=True)


def mixed_ratio(game_id: str, batch: int, calls: int, seed: int = 0) -> None:
    planner = Planner(default_config(game_id))
    params = planner.init_params(jax.random.PRNGKey(0))
    states = jax.vmap(planner.game.init)(jax.random.split(jax.random.PRNGKey(1), batch))
    keys = jax.random.split(jax.random.PRNGKey(2), batch)
    budgets = planner.config.budgets
    ks = np.random.default_rng(seed).choice(budgets, size=batch)
    runner = OptionRunner(planner, max_batch=batch)

    grouped = time_calls(runner, params, keys, states, ks, calls=calls, warmup=3)
    alone = np.zeros(calls)
    for k in sorted(set(ks.tolist())):
        idx = np.flatnonzero(ks == k)
        sub = jax.tree.map(lambda x, i=idx: x[i], (keys, states))
        fn = jax.jit(functools.partial(planner.option, k=k))
        alone += time_calls(fn, params, *sub, calls=calls, warmup=3)
    every = np.zeros(calls)
    for k in budgets:
        fn = jax.jit(functools.partial(planner.option, k=k))
        every += time_calls(fn, params, keys, states, calls=calls, warmup=3)
    counts = {k: int((ks == k).sum()) for k in budgets}
    print(f"\n## Mixed-k batch ({game_id}, batch {batch}, k counts {counts})\n")
    rows = [
        ("chosen options alone (sum of exact-size groups)", alone),
        ("grouped by k, padded to the ladder (OptionRunner)", grouped),
        ("every option for every game (reference)", every),
    ]
    columns = ("run", "median ms", "ratio to chosen options alone")
    print_ratio_table(columns, rows, cell=lambda t: f"{np.median(t):.1f}")


def train_throughput(game_id: str, devices: int, iterations: int = 6) -> float:
    """Median self-play frames/s of `rtplan train-planner` (compile excluded), in a subprocess."""
    import csv
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as out:
        cmd = [
            sys.executable,
            "-m",
            "rtplan",
            "train-planner",
            "--game",
            game_id,
            "--iterations",
            str(iterations),
            "--eval-every",
            "0",
            "--checkpoint-every",
            "0",
            "--devices",
            str(devices),
            "--out",
            out,
            "--no-progress",
        ]
        subprocess.run(cmd, check=True, capture_output=True)
        with open(f"{out}/log.csv") as f:
            rows = list(csv.DictReader(f))[2:]  # the first iterations include compilation
    return float(np.median([float(r["frames_per_s"]) for r in rows]))


def training_table(game_ids) -> None:
    print(
        "\n## Training throughput (self-play frames/s incl. search and learner; default "
        "batch 64, k=1)\n"
    )
    print("| game | 1 device (core) | 2 devices (cores) |")
    print("|---|---|---|")
    for game_id in game_ids:
        one, two = train_throughput(game_id, 1), train_throughput(game_id, 2)
        print(f"| {game_id} | {one:,.0f} | {two:,.0f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="*", default=list(games.registered_games()))
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--mixed-game", default="snake-rt-v0")
    parser.add_argument("--mixed-batch", type=int, default=32)
    parser.add_argument(
        "--train-games",
        nargs="*",
        default=["snake-rt-v0"],
        help="games for the training-throughput table (none: skip it)",
    )
    args = parser.parse_args()
    print(f"jax {jax.__version__}, devices: {jax.devices()} (cores used by one search: 1)")
    latency_table(args.games, args.calls)
    mixed_ratio(args.mixed_game, args.mixed_batch, max(5, args.calls // 5))
    if args.train_games:
        training_table(args.train_games)


if __name__ == "__main__":
    main()
