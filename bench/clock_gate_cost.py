"""The clock gate's costs: its decision per ply against the cheapest option, and one PPO update.

`python -m bench.clock_gate_cost --game speed-hex-v0 [--sizes 8x32,16x64]` (one core:
`taskset -c 1`). Prints the gate's decision time per ply (batch 1, the live case, and batch 32)
over the cheapest option's search (the issue's bar: <= 5%), then, per size B x T (games x plies),
the seconds of one PPO update (rollout and learning, after a warm-up update that compiles) and the
option-cost ratios: simulations of the chosen options over computing every option (the
reference's way), and the runner's padded group sizes over the chosen.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np


def _median_ms(fn, *args, repeats: int = 50) -> float:
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def decision_cost(game_id: str, batches=(1, 32)) -> None:
    from rtplan.gate.clock.config import ClockGateConfig
    from rtplan.gate.clock.gate import ClockGate
    from rtplan.harness.checkpoint import planner_file
    from rtplan.planner.options import Planner
    from rtplan.planner.store import load_planner

    pcfg, pparams, _ = load_planner(game_id, str(planner_file(game_id)))
    planner = Planner(pcfg)
    gate = ClockGate(planner, ClockGateConfig())
    params = gate.init_params(jax.random.PRNGKey(0))
    k = pcfg.budgets[0]
    step = jax.jit(lambda p, c, s, o: gate.step(p, c, s, o)[2])
    forward = jax.jit(planner.evaluate)
    # As training and play run it: one call with the planner's forward (the search's root
    # evaluation needs that forward anyway); the gate's cost is what it adds to the call.
    fused = jax.jit(lambda p, pp, c, s: gate.step(p, c, s, planner.evaluate(pp, s))[2])
    option = jax.jit(lambda p, keys, s: planner.option(p, keys, s, k).actions)
    for b in batches:
        keys = jax.random.split(jax.random.PRNGKey(1), b)
        states = jax.vmap(planner.game.init)(keys)
        states = jax.vmap(planner.game.set_initial_time, (0, None))(states, 1200)
        out = forward(pparams, states)
        carry = gate.zero_carry(b)
        gate_ms = _median_ms(step, params, carry, states, out)
        fwd_ms = _median_ms(forward, pparams, states)
        fused_ms = _median_ms(fused, params, pparams, carry, states)
        opt_ms = _median_ms(option, pparams, keys, states)
        added = max(fused_ms - fwd_ms, 0.0)
        print(
            f"{game_id} batch {b}: gate step alone {gate_ms:.3f} ms (its own call), planner "
            f"forward {fwd_ms:.3f} ms, forward + gate in one call {fused_ms:.3f} ms (gate adds "
            f"{added:.3f} ms), cheapest option ({k} sims) {opt_ms:.3f} ms: gate alone / option "
            f"= {gate_ms / opt_ms:.3f}, added / option = {added / opt_ms:.3f} (bar 0.05)"
        )


def update_cost(game_id: str, sizes, updates: int = 2) -> None:
    from rtplan.gate.clock.config import ClockGateTrainConfig
    from rtplan.gate.clock.train import ClockGatePPO

    for b, t in sizes:
        chunk = 16 if t % 16 == 0 else t
        chunks = b * (t // chunk)
        mbs = 4 if chunks % 4 == 0 else 1
        cfg = ClockGateTrainConfig(
            game_id=game_id, num_envs=b, plies=t, chunk=chunk, minibatches=mbs, eval_every=0
        )
        algo = ClockGatePPO(cfg)
        state = algo.init()
        start = time.perf_counter()
        state, m = algo.step(state)  # compiles
        first = time.perf_counter() - start
        rows = []
        for _ in range(updates):
            start = time.perf_counter()
            state, m = algo.step(state)
            rows.append((time.perf_counter() - start, m))
        secs = np.mean([r[0] for r in rows])
        m = rows[-1][1]
        print(
            f"{game_id} {b} games x {t} plies: {secs:.1f} s per update "
            f"(rollout {m['rollout_s']:.1f} s, learn {m['learn_s']:.2f} s; first with compile "
            f"{first:.0f} s), {b * t / secs:.0f} plies/s, option cost / every option "
            f"{m['option_cost_ratio']:.3f}, padded / chosen {m['padded_cost_ratio']:.3f}, "
            f"mean budget {m['mean_budget']:.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="speed-hex-v0")
    parser.add_argument("--sizes", default="8x32,16x64", help="games x plies per update, listed")
    parser.add_argument("--no-decision", action="store_true")
    args = parser.parse_args()
    if not args.no_decision:
        decision_cost(args.game)
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",") if s]
    update_cost(args.game, sizes)


if __name__ == "__main__":
    main()
