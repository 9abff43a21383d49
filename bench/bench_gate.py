"""Gate benchmark: batch-1 gate decision latency beside a k=1 option, and grouped-option cost.

Usage: python -m bench.bench_gate [--game snake-rt-v0] [--calls 30] [--batch 32] [--steps 8]
       [--train-steps 6] [--update-steps 2] [--only-update] [--only-training]

Latency: the jitted gate decision (frozen planner forward + gate) at batch 1 for each gate
variant, beside the jitted k=1 option at batch 1, on the shipped planner; median / p95 in ms.
Rollout cost per meta-step at `--batch` games with a uniform random k per game: the gate's
rollout (decision, options grouped by k with `OptionRunner`, bootstrap and resets), the chosen
options alone (each k group at its exact size), every option for every game (the
reference's way), and the grouped options of a gate-tree gate (`--gate-tree gate`: each tree
asks a fresh gate for the budget at its decision states), side by side in one run.
PPO update: one update (4 epochs, one minibatch of `--batch` x `--update-steps` samples; a
paper iteration is 192 times 64 samples) for the mlp gate and the paper's conv gate on the same
rollout.
Training throughput: whole PPO iterations (rollout of `--steps` meta-steps at `--batch` games,
then the update) on one device and data parallel over two (`GatePPO` with `devices=2`: each
device plays half the games, one host device per core); meta-steps/s and frames/s, the median
over the iterations after the first, with the time JAX spent tracing and compiling (new group
sizes appear as the sampled mix changes) taken out, as `jax.monitoring` reports it.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import time

# Two host devices (one per core) for the 1 vs 2 cores rows; set before jax loads.
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
).strip()

import jax  # noqa: E402
import numpy as np

from bench._common import median_p95, print_ratio_table, time_calls  # noqa: E402
from rtplan.gate import GateTrainConfig  # noqa: E402
from rtplan.gate.committed.train import GatePPO  # noqa: E402


def _take(x, idx):
    return x[idx]


def _fmt(t: np.ndarray) -> str:
    median, p95 = median_p95(t)
    return f"{median:.2f} / {p95:.2f}"


def latency(game_id: str, calls: int) -> None:
    print(f"\n## {game_id}: batch-1 latency (ms, median / p95)\n")
    print("| what | ms |")
    print("|---|---|")
    for kind in ("mlp", "paper"):
        algo = GatePPO(
            GateTrainConfig(game_id=game_id, gate=kind, num_envs=1, minibatches=1, devices=1)
        )
        state = algo.init()
        (shard,) = state.actors  # one device
        states = shard.states
        fn = jax.jit(algo.gate.decide)  # no key: the greedy decision, as deployed
        t = time_calls(fn, state.params, algo.planner_params, states, calls=calls)
        print(f"| gate decision ({kind}: planner forward + gate) | {_fmt(t)} |", flush=True)
    option = jax.jit(functools.partial(algo.planner.option, k=1))
    keys = jax.random.split(jax.random.PRNGKey(2), 1)
    t = time_calls(option, algo.planner_params, keys, states, calls=calls)
    print(f"| option k=1 ({algo.planner.config.sims(1)} sims) | {_fmt(t)} |", flush=True)


def rollout_cost(game_id: str, batch: int, steps: int, calls: int) -> None:
    cfg = GateTrainConfig(
        game_id=game_id, num_envs=batch, meta_steps=steps, minibatches=1, devices=1
    )
    algo = GatePPO(cfg)
    state = algo.init()
    budgets = algo.budgets
    rng = np.random.default_rng(0)
    ks = rng.choice(budgets, size=batch)
    pp, (shard,) = algo.planner_params, state.actors  # one device
    states = shard.states
    keys = jax.random.split(jax.random.PRNGKey(3), batch)

    options = {k: jax.jit(functools.partial(algo.planner.option, k=k)) for k in budgets}
    groups = [
        (k, jax.tree.map(functools.partial(_take, idx=np.flatnonzero(ks == k)), (keys, states)))
        for k in sorted(set(ks.tolist()))
    ]

    def chosen_alone():
        return [options[k](pp, *group) for k, group in groups]

    everything = jax.jit(lambda pp, keys, states: [options[k](pp, keys, states) for k in budgets])
    grouped = time_calls(algo.runner, pp, keys, states, ks, calls=calls)
    tree_algo = GatePPO(dataclasses.replace(cfg, gate_tree="gate"))
    gate_tree = functools.partial(tree_algo.runner, future_params=tree_algo.init().params)
    gate_tree = time_calls(gate_tree, pp, keys, states, ks, calls=calls)
    alone = time_calls(chosen_alone, calls=calls)
    every = time_calls(everything, pp, keys, states, calls=calls)
    # The whole gate rollout per meta-step (decide, grouped options, bootstrap, reset).
    algo.rollout(state.params, state.actors, state.key, state.memories)  # compiles every group size
    start = time.perf_counter()
    _, steps_out, _, _ = algo.rollout(state.params, state.actors, state.key, state.memories)
    jax.block_until_ready(steps_out)
    per_step = (time.perf_counter() - start) * 1e3 / steps
    mix = ", ".join(f"k={k}: {(ks == k).sum()}" for k in budgets)
    print(f"\n## {game_id}: one meta-step at batch {batch} (ms, median / p95), mix {mix}\n")
    rows = [
        ("chosen options alone", alone),
        ("grouped (OptionRunner)", grouped),
        ("every option for every game", every),
        ("grouped, gate tree (--gate-tree gate)", gate_tree),
    ]
    base = print_ratio_table(("what", "ms", "x chosen alone"), rows, cell=_fmt)
    print(f"| gate rollout, per meta-step (sampled k) | {per_step:.2f} | {per_step / base:.2f} |")


_COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)
_compile_seconds = [0.0]


def _count_compiles(name: str, duration: float, **_) -> None:
    if name in _COMPILE_EVENTS:
        _compile_seconds[0] += duration


def training_throughput(game_id: str, batch: int, steps: int, iterations: int) -> None:
    jax.monitoring.register_event_duration_secs_listener(_count_compiles)
    print(f"\n## {game_id}: training throughput, {batch} games x {steps} meta-steps per rollout\n")
    print("| devices (cores) | s per iteration | meta-steps/s | frames/s |")
    print("|---|---|---|---|")
    minibatches = max(1, batch * steps // 64)
    for devices in (1, 2):
        cfg = GateTrainConfig(
            game_id=game_id,
            num_envs=batch,
            meta_steps=steps,
            minibatches=minibatches,
            eval_every=0,
            devices=devices,
        )
        algo = GatePPO(cfg)
        state = algo.init()
        seconds, frames = [], []
        for _ in range(iterations):
            compiled = _compile_seconds[0]
            start = time.perf_counter()
            state, metrics = algo.step(state)
            jax.block_until_ready(state.params)
            seconds.append(time.perf_counter() - start - (_compile_seconds[0] - compiled))
            frames.append(metrics["frames"])
        t = float(np.median(seconds[1:] or seconds))
        f = float(np.median(frames[1:] or frames))
        print(f"| {devices} | {t:.2f} | {batch * steps / t:.1f} | {f / t:.1f} |", flush=True)


def update_cost(game_id: str, batch: int, steps: int, calls: int) -> None:
    """One PPO update (`epochs` passes over one rollout of `batch` x `steps` meta-steps, one
    minibatch per pass) for each gate network on the same rollout, side by side: what a training
    iteration pays beyond its rollout (the paper's: 16 minibatches of 768 samples)."""
    cfg = GateTrainConfig(
        game_id=game_id, num_envs=batch, meta_steps=steps, minibatches=1, devices=1
    )
    samples = f"{batch * steps} samples x {cfg.epochs} epochs"
    print(f"\n## {game_id}: PPO update, {samples} (ms, median / p95)\n")
    print("| gate | ms per update | x mlp |")
    print("|---|---|---|")
    base = None
    for kind in ("mlp", "paper"):
        algo = GatePPO(dataclasses.replace(cfg, gate=kind))
        state = algo.init()
        _, rollout, stats, _ = algo.rollout(state.params, state.actors, state.key, state.memories)
        args = (state.params, state.opt_state, rollout, stats, state.key)
        t = time_calls(algo.learn, *args, calls=calls, warmup=1)
        base = np.median(t) if base is None else base
        print(f"| {kind} | {_fmt(t)} | {np.median(t) / base:.0f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--game", default="snake-rt-v0")
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--train-steps", type=int, default=6, help="PPO iterations per row")
    parser.add_argument("--only-training", action="store_true", help="just the 1 vs 2 cores rows")
    parser.add_argument(
        "--update-steps", type=int, default=2, help="meta-steps per game of the update rows"
    )
    parser.add_argument("--only-update", action="store_true", help="just the PPO update rows")
    args = parser.parse_args()
    print(f"devices: {jax.devices()}")
    if args.only_update:
        update_cost(args.game, args.batch, args.update_steps, max(3, args.calls // 10))
        return
    if not args.only_training:
        latency(args.game, args.calls)
        rollout_cost(args.game, args.batch, args.steps, max(3, args.calls // 5))
        update_cost(args.game, args.batch, args.update_steps, max(3, args.calls // 10))
    training_throughput(args.game, args.batch, args.steps, args.train_steps)


if __name__ == "__main__":
    main()
