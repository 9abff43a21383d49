"""What switching the budget between decisions costs: fixed k against mixed-k schedules.

Usage: python -m bench.k_switching [--game tetris-rt-v0] [--split tuning] [--episodes 32]
           [--schedules rand1,2,3,4 rand2,4 seq2,4 rand1,2 seq4,4,4,1]

The planner's tree models "always k" for the whole future: every edge at every depth is a
k-frame macro (k-1 reflex frames, then the edge action), as in the paper and its reference
code. An option whose successor runs at another k therefore plans against a future that does
not happen. This bench measures the cost on paired seeds: the always-k conditions (read from, or
written to, `results/<game>/<split>/k*.json` exactly as `rtplan eval` writes them) beside
schedules played on the same seeds in the same process:
- `randA,B,...`: k uniform over {A, B, ...} at each decision, one generator per seed (`rand1,2,3,4`
  is the `random` baseline);
- `seqA,B,...`: the cycle A, B, ... repeated (decision t plays the (t mod n)-th budget).

With `--future`, each `seq` schedule is also played with a tree that expects the cycle itself
(`seq2,4+future`): a `planner.options.Future` that reads the budget of a decision state off its
frame (games start at frame 0 and follow the cycle, so frame mod sum(cycle) names the step).
The difference between the two rows is the part of switching's cost that comes from planning
against "always k".

Prints each schedule's mean +- SE and its paired difference to every fixed k, and appends the rows
to bench/results/k_switching.csv.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

from bench._common import RESULTS, ROOT, append_rows, git_commit, utc_now

RESULTS_CSV = RESULTS / "k_switching.csv"


def schedule(name: str, seeds: np.ndarray):
    """The chooser of a schedule name (`randA,B,..` or `seqA,B,..`)."""
    from rtplan.planner.episodes import cycle, random_k

    bad = SystemExit(f"k_switching.py: bad schedule {name!r}: randA,B,... or seqA,B,...")
    prefix = next((p for p in ("rand", "seq") if name.startswith(p)), None)
    if prefix is None:
        raise bad
    try:
        ks = [int(x) for x in name[len(prefix) :].split(",")]
    except ValueError:
        raise bad from None
    return random_k(ks, seeds) if prefix == "rand" else cycle(ks)


class CycleFuture:
    """A `Future` of the cycle `ks` for games that start at frame 0: the decision state at frame
    f starts the option whose offset in the cycle is f mod sum(ks)."""

    def __init__(self, ks: list[int]) -> None:
        import jax.numpy as jnp

        period = sum(ks)
        table = [0] * period  # frames that are no decision state never ask
        for i, k in enumerate(ks):
            table[sum(ks[:i])] = k
        self.period, self.table = period, jnp.asarray(table, jnp.int32)

    def choose(self, future_params, states, out):
        del future_params, out
        return self.table[states.frame % self.period]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", default="tetris-rt-v0")
    parser.add_argument("--split", default="tuning", choices=["tuning", "eval"])
    parser.add_argument("--episodes", type=int, default=32)
    default = ["rand1,2,3,4", "rand2,4", "seq2,4", "rand1,2", "seq4,4,4,1"]
    parser.add_argument("--schedules", nargs="+", default=default)
    parser.add_argument(
        "--tree-k",
        type=int,
        default=0,
        help="the planner's tree_k (0: the shipped tree, 'always k'; m: every option models the "
        "future at m frames per decision); with m the fixed k are played here too",
    )
    parser.add_argument(
        "--future",
        action="store_true",
        help="also play each seq schedule with a tree that expects the cycle itself",
    )
    parser.add_argument("--out", default=str(ROOT / "results"), help="rtplan eval's results folder")
    parser.add_argument("--csv", default=str(RESULTS_CSV))
    args = parser.parse_args()

    from rtplan.jax_setup import use_compile_cache

    use_compile_cache()
    from rtplan.gate.evaluation.committed import run_conditions
    from rtplan.harness.checkpoint import planner_file
    from rtplan.harness.stats import paired, standard_error
    from rtplan.planner.batching import OptionRunner
    from rtplan.planner.episodes import always, play, seeds_of
    from rtplan.planner.options import Planner
    from rtplan.planner.store import load_planner

    for name in args.schedules:  # refuse a bad name before any play
        schedule(name, np.zeros(1))
    pfile = str(planner_file(args.game))
    pcfg, pparams, _ = load_planner(args.game, pfile)
    fixed = [f"k{k}" for k in pcfg.budgets]
    seeds = seeds_of(args.split, args.episodes)
    if args.tree_k:
        pcfg = dataclasses.replace(pcfg, tree_k=args.tree_k)
    runner = OptionRunner(Planner(pcfg), max_batch=args.episodes)
    base, frames, seconds = {}, {}, {}
    if args.tree_k:
        for n in fixed:
            start = time.perf_counter()
            ep = play(runner, pparams, seeds, always(int(n[1:])))
            base[n], frames[n] = ep.returns, float(ep.frames.mean())
            seconds[n] = time.perf_counter() - start
    else:  # the shipped tree: the always-k files of `rtplan eval` (played when missing)
        files = run_conditions(
            args.game,
            split=args.split,
            episodes=args.episodes,
            conditions=fixed,
            planner_file=pfile,
            out=args.out,
            command=" ".join(["python", "-m", "bench.k_switching", *sys.argv[1:]]),
        )
        for n, f in files.items():
            rec = json.loads(Path(f).read_text())
            base[n], frames[n] = np.asarray(rec["returns"]), float(np.mean(rec["frames"]))
            seconds[n] = rec["seconds"]
    commit = git_commit(short=True)
    tree = f"tree_k {args.tree_k}" if args.tree_k else "the shipped tree (always k)"
    print(f"\n{args.game}, {tree}, {args.episodes} {args.split} seeds (paired):\n")
    print("| schedule | mean +- SE | " + " | ".join(f"minus {n}" for n in fixed) + " |")
    print("|---|---|" + "---|" * len(fixed))

    def row(name: str, returns: np.ndarray, frames: float, seconds: float) -> dict:
        diffs = {n: paired(returns, base[n]) for n in fixed}
        se = standard_error(returns)
        cells = " | ".join(
            "" if n == name else f"{d:+.1f} +- {s:.1f}" for n, (d, s) in diffs.items()
        )
        print(f"| {name} | {returns.mean():.1f} +- {se:.1f} | {cells} |", flush=True)
        return {
            "date": utc_now(),
            "commit": commit,
            "game": args.game,
            "split": args.split,
            "episodes": args.episodes,
            "tree_k": args.tree_k,
            "schedule": name,
            "mean": round(float(returns.mean()), 3),
            "se": round(se, 3),
            "frames": round(frames, 1),
            **{f"minus_{n}": round(diffs[n][0], 3) for n in fixed},
            **{f"minus_{n}_se": round(diffs[n][1], 3) for n in fixed},
            "seconds": round(seconds, 1),
        }

    rows = [row(n, base[n], frames[n], seconds[n]) for n in fixed]
    for name in args.schedules:
        start = time.perf_counter()
        ep = play(runner, pparams, seeds, schedule(name, seeds))
        rows.append(row(name, ep.returns, float(ep.frames.mean()), time.perf_counter() - start))
        if args.future and name.startswith("seq"):
            ks = [int(x) for x in name[3:].split(",")]
            future = OptionRunner(runner.planner, max_batch=args.episodes, future=CycleFuture(ks))
            start = time.perf_counter()
            plain = ep.returns
            ep = play(future, pparams, seeds, schedule(name, seeds), future_params=0)
            seconds = time.perf_counter() - start
            rows.append(row(f"{name}+future", ep.returns, float(ep.frames.mean()), seconds))
            d, se = paired(ep.returns, plain)
            print(f"|   {name}+future minus {name}: {d:+.1f} +- {se:.1f} (paired) |", flush=True)
    append_rows(args.csv, rows)
    print(f"\nappended to {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
