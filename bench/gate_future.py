"""Does a tree that expects the gate's own budgets remove the cost of switching k?

Usage: python -m bench.gate_future --game tetris-rt-v0
           --gate archive/tetris-rt-v0/gate-training/gate.msgpack
           [--split tuning] [--episodes 32]

The shipped tree models "always k": inside option k's search every edge below the root is a k-frame
macro, so an option whose successor runs at another budget plans against a future that does not
happen (bench/k_switching.py measures that cost). With a `planner.options.Future` the tree instead
asks the gate, at each of its decision states, which budget the option starting there will get,
and waits that many frames. This bench plays the same greedy gate both ways on paired seeds and
prints both, their paired difference and the gate's budget mix; rows go to
bench/results/gate_future.csv.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from bench._common import RESULTS, append_rows, git_commit, utc_now

RESULTS_CSV = RESULTS / "gate_future.csv"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", default="tetris-rt-v0")
    parser.add_argument("--gate", required=True, help="a gate checkpoint (gate.msgpack)")
    parser.add_argument("--split", default="tuning", choices=["tuning", "eval"])
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--csv", default=str(RESULTS_CSV))
    args = parser.parse_args()

    from rtplan.jax_setup import use_compile_cache

    use_compile_cache()
    from rtplan.gate.committed.choosers import gate_chooser
    from rtplan.gate.committed.policy import load_gate
    from rtplan.harness.checkpoint import planner_file
    from rtplan.harness.stats import paired
    from rtplan.planner.batching import OptionRunner
    from rtplan.planner.episodes import play, seeds_of
    from rtplan.planner.options import Planner
    from rtplan.planner.store import load_planner

    pfile = str(planner_file(args.game))
    pcfg, pparams, _ = load_planner(args.game, pfile)
    planner = Planner(pcfg)
    gate, gparams, _ = load_gate(args.gate, planner, planner_file=pfile)
    seeds = seeds_of(args.split, args.episodes)
    choose = gate_chooser(gate, gparams, pparams)
    runners = {
        "always-k": (OptionRunner(planner, max_batch=args.episodes), None),
        "gate": (OptionRunner(planner, max_batch=args.episodes, future=gate), gparams),
    }
    commit = git_commit(short=True)
    played = {}
    rows = []
    for tree, (runner, future_params) in runners.items():
        start = time.perf_counter()
        ep = play(runner, pparams, seeds, choose, future_params=future_params)
        played[tree] = ep
        ks = np.concatenate(ep.ks)
        mix = np.bincount(ks, minlength=max(pcfg.budgets) + 1)[list(pcfg.budgets)] / len(ks)
        mix_text = " ".join(f"k{k} {p:.2f}" for k, p in zip(pcfg.budgets, mix, strict=True))
        print(
            f"tree expects {tree:8s}: {ep.mean:7.2f} +- {ep.se:5.2f}   mean k {ks.mean():.2f} "
            f"({mix_text})",
            flush=True,
        )
        rows.append(
            {
                "date": utc_now(),
                "commit": commit,
                "game": args.game,
                "gate": args.gate,
                "split": args.split,
                "episodes": args.episodes,
                "tree": tree,
                "mean": round(ep.mean, 3),
                "se": round(ep.se, 3),
                "mean_k": round(float(ks.mean()), 3),
                **{f"k{k}": round(float(p), 3) for k, p in zip(pcfg.budgets, mix, strict=True)},
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
    d, se = paired(played["gate"].returns, played["always-k"].returns)
    print(f"gate future minus always-k: {d:+.2f} +- {se:.2f} (paired, {args.episodes} seeds)")
    for row in rows:
        row.update(future_minus_always=round(d, 3), future_minus_always_se=round(se, 3))
    append_rows(args.csv, rows)
    print(f"appended to {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
