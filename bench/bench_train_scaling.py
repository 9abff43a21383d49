"""Planner training scale-out: seconds per iteration on one core, one process over two devices,
and two processes (`jax.distributed`, gloo) of one device each, at the same global batch.

Usage: python -m bench.bench_train_scaling [--game snake-rt-v0] [--batch 64 256]
       [--iterations 6] [--learner-steps 4] [--csv bench/results/train_scaling.csv]

Each configuration runs `rtplan train-planner` from scratch (same flags and seed, no evaluation,
no checkpoint until the end) into a temporary folder and reads `iter_seconds` from its log,
leaving out the first two iterations (compiles). Where `taskset` exists, the one-core run is
pinned to core 0 and the two processes to cores 0 and 1; the one-process run over two devices
gets both cores. Speed-ups are against the one-core run of the same batch (docs/training.md).
"""

from __future__ import annotations

import argparse
import csv
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench._common import RESULTS, ROOT, append_rows, git_commit, utc_now

FIELDS = (
    "date", "commit", "game", "batch", "learner_steps", "config", "processes", "devices",
    "iterations_timed", "s_per_iter", "speedup",
)  # fmt: skip
#: Iterations left out of the timing (the first compiles; the second may still warm).
SKIP = 2
CONFIGS = (
    ("1 process, 1 device (1 core)", 1, 1),
    ("1 process, 2 devices", 1, 2),
    ("2 processes x 1 device (gloo)", 2, 2),
)


def _argv(game: str, batch: int, iterations: int, learner_steps: int, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "rtplan", "train-planner", "--game", game, "--batch", str(batch),
        "--iterations", str(iterations), "--learner-steps", str(learner_steps),
        "--eval-every", "0", "--checkpoint-every", "1000", "--no-progress", "--seed", "0",
        "--out", str(out),
    ]  # fmt: skip


def _pinned(argv: list[str], core: int | None) -> list[str]:
    if core is None or shutil.which("taskset") is None:
        return argv
    return ["taskset", "-c", str(core), *argv]


def _seconds(out: Path) -> np.ndarray:
    with (out / "log.csv").open() as f:
        return np.array([float(r["iter_seconds"]) for r in csv.DictReader(f)][SKIP:])


def run(game: str, batch: int, iterations: int, learner_steps: int, port: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, processes, devices) in enumerate(CONFIGS):
            out = Path(tmp) / f"c{i}"
            argv = [*_argv(game, batch, iterations, learner_steps, out), "--devices", str(devices)]
            if processes == 1:
                core = 0 if devices == 1 else None
                subprocess.run(_pinned(argv, core), check=True, cwd=ROOT, capture_output=True)
            else:
                flags = ["--coordinator", f"127.0.0.1:{port}", "--num-processes", str(processes)]
                procs = [
                    subprocess.Popen(
                        _pinned([*argv, *flags, "--process-id", str(p)], p),
                        cwd=ROOT,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                    for p in range(processes)
                ]
                codes = [p.wait() for p in procs]
                if any(codes):
                    raise RuntimeError(f"{name}: exit codes {codes}")
            t = _seconds(out)
            rows.append({
                "game": game, "batch": batch, "learner_steps": learner_steps, "config": name,
                "processes": processes, "devices": devices, "iterations_timed": len(t),
                "s_per_iter": round(float(t.mean()), 3),
            })  # fmt: skip
    base = rows[0]["s_per_iter"]
    for r in rows:
        r["speedup"] = round(base / r["s_per_iter"], 2)
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--game", default="snake-rt-v0")
    p.add_argument("--batch", type=int, nargs="+", default=[64, 256])
    p.add_argument("--iterations", type=int, default=6)
    p.add_argument("--learner-steps", type=int, default=4)
    p.add_argument("--port", type=int, default=12399, help="the coordinator's local port")
    p.add_argument("--csv", default=str(RESULTS / "train_scaling.csv"))
    args = p.parse_args(argv)
    if args.iterations <= SKIP:
        p.error(f"--iterations must be > {SKIP} (the first {SKIP} are not timed)")
    stamp = {"date": utc_now(), "commit": git_commit(short=True)}
    rows = []
    for batch in args.batch:
        rows += run(args.game, batch, args.iterations, args.learner_steps, args.port)
    print(f"\n## Planner training scale-out ({args.game}, s per iteration)\n")
    print("| batch | configuration | s / iteration | speed-up |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['batch']} | {r['config']} | {r['s_per_iter']:.3f} | {r['speedup']:.2f}x |")
    append_rows(args.csv, [{**stamp, **r} for r in rows], FIELDS)
    print(f"\nappended to {args.csv}")


if __name__ == "__main__":
    main()
