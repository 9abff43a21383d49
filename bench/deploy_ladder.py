"""The deploy ladder past each game's breaking FPS, before and after issue 42's no-cliff work.

Usage: python -m bench.deploy_ladder [--before 05c75c6] [--games tetris-rt-v0 ...]
       [--fps GAME=F,F,...] [--episodes 5] [--max-frames 200] [--runs 2]
       [--out results/{game}/deploy/no-cliff/quiet]

`rtplan deploy` (the shipped planner and gate; env server pinned to core 0, planner service to
core 1) plays the same rungs from two checkouts: *before*, a git worktree of `--before` (default
05c75c6, main just before the no-cliff merge 90704d3: one search per stream at a time, a late
search delaying the session's next decision, no deadline checks), and *after*, this checkout.
Both read this checkout's checkpoints (they have not changed since). Per run the sides
alternate game by game (the order flips each run), so both meet the same machine. Each side's
deploy files go to `<out>/run<i>/<side>/` (git ignores their per-decision logs,
`fps_F.jsonl`); `<out>/ladder.csv` gets a row per run and FPS with both sides' miss rates
(misses / landings) and returns, and `<out>/loads.txt` the load average at each side's start
and end. Run it on an otherwise quiet machine: the ladders are what the
issue's target (at most 25% misses at 1.25x the breaking FPS) is read from.

The default rungs bracket the quiet breaking points of docs/results.md ("Deployment: the
shipped gates live"): the last FPS within 5% misses was 80 for Tetris, 96 for Snake and 32
for Pac-Man, so 1.25x is 100, 120 and 40.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench._common import ROOT, append_rows

BEFORE = "05c75c6"
LADDERS = {
    "tetris-rt-v0": (64, 80, 96, 100, 120),
    "snake-rt-v0": (80, 96, 112, 120),
    "pacman-rt-v0": (24, 32, 40, 48),
}
#: The last FPS within 5% misses on the quiet ladder (docs/results.md).
BREAKING = {"tetris-rt-v0": 80, "snake-rt-v0": 96, "pacman-rt-v0": 32}
FIELDS = (
    "run", "fps", "x_breaking", "before_miss_rate", "before_misses", "before_landings",
    "before_return", "after_miss_rate", "after_misses", "after_landings", "after_return",
)  # fmt: skip


def ladder_rows(run: int, game: str, before: Path, after: Path) -> list[dict]:
    """One row per FPS both sides' `deploy.csv` hold: their misses, landings and returns."""
    sides = {}
    for name, folder in (("before", before), ("after", after)):
        with (folder / "deploy.csv").open() as f:
            sides[name] = {float(r["fps"]): r for r in csv.DictReader(f)}
    rows = []
    for fps in sorted(set(sides["before"]) & set(sides["after"])):
        row = {"run": run, "fps": fps, "x_breaking": round(fps / BREAKING.get(game, fps), 3)}
        for name, by_fps in sides.items():
            r = by_fps[fps]
            row |= {
                f"{name}_miss_rate": round(float(r["miss_rate"]), 4),
                f"{name}_misses": int(r["misses"]),
                f"{name}_landings": int(r["landings"]),
                f"{name}_return": round(float(r["return_mean"]), 2),
            }
        rows.append(row)
    return rows


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _deploy(checkout: Path, game: str, fps: tuple[int, ...], args, out: Path) -> None:
    argv = [
        sys.executable, "-m", "rtplan", "deploy", "--game", game,
        "--fps", *map(str, fps), "--episodes", str(args.episodes),
        "--max-frames", str(args.max_frames), "--checkpoint-dir", str(ROOT / "checkpoints"),
        "--force", "--out", str(out),
    ]  # fmt: skip
    env = os.environ | {"PYTHONPATH": str(checkout)}
    subprocess.run(argv, cwd=checkout, env=env, check=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", default=BEFORE, help="the commit before the change")
    p.add_argument("--games", nargs="+", default=list(LADDERS))
    p.add_argument(
        "--fps", nargs="*", default=[], metavar="GAME=F,F", help="a game's rungs (default: LADDERS)"
    )
    p.add_argument("--episodes", type=int, default=5)
    p.add_argument("--max-frames", type=int, default=200)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--out", default="results/{game}/deploy/no-cliff/quiet")
    args = p.parse_args(argv)
    ladders = dict(LADDERS)
    for item in args.fps:
        game, _, rungs = item.partition("=")
        ladders[game] = tuple(int(f) for f in rungs.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="rtplan-before-"))
    before = tmp / "checkout"
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(before), args.before], cwd=ROOT, check=True
    )
    try:
        for run in range(1, args.runs + 1):
            for i, game in enumerate(args.games):
                out = ROOT / args.out.format(game=game)
                sides = [("before", before), ("after", ROOT)]
                if (run + i) % 2 == 0:
                    sides.reverse()
                for side, checkout in sides:
                    start = _load()
                    _deploy(checkout, game, ladders[game], args, out / f"run{run}" / side)
                    with (out / "loads.txt").open("a") as f:
                        f.write(f"run{run} {side} {game}: load {start} -> {_load()}\n")
                here = out / f"run{run}"
                rows = ladder_rows(run, game, here / "before", here / "after")
                append_rows(out / "ladder.csv", rows, FIELDS)
                for r in rows:
                    print(
                        f"{game} run {run} {r['fps']:g} FPS ({r['x_breaking']}x): misses "
                        f"{r['before_miss_rate']:.1%} -> {r['after_miss_rate']:.1%}",
                        flush=True,
                    )
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
