"""What a full garbage collection costs in a planner service's process, before and after the
compiled heap is frozen (what `planner_service.server.serve` does once it has compiled).

Usage: python -m bench.bench_planner_gc [--game tetris-rt-v0] [--repeats 3]

Loads the shipped checkpoints of one game into an `Engine`, compiles it as the service does,
then times `gc.collect()` (a full, generation-2 collection) `--repeats` times, calls
`gc.freeze()` and times it again. A full collection in the service walks every tracked object;
one that fires inside a search delays that search's answer by as much.
"""

from __future__ import annotations

import argparse
import gc
import time

from rtplan.planner_service.engine import Engine


def _collect_ms() -> float:
    start = time.perf_counter()
    gc.collect()
    return 1e3 * (time.perf_counter() - start)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--game", default="tetris-rt-v0")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    engine = Engine.from_dir("checkpoints", game_ids=[args.game])
    start = time.perf_counter()
    engine.compile()
    print(f"{args.game}: compiled in {time.perf_counter() - start:.1f} s")
    print(f"tracked objects after compiling: {len(gc.get_objects()):,}")
    before = [_collect_ms() for _ in range(args.repeats)]
    gc.freeze()
    after = [_collect_ms() for _ in range(args.repeats)]
    print("| full collection | ms (each repeat) |\n|---|---|")
    print("| compiled heap tracked | " + " / ".join(f"{x:.1f}" for x in before) + " |")
    print("| frozen (the service) | " + " / ".join(f"{x:.2f}" for x in after) + " |")


if __name__ == "__main__":
    main()
