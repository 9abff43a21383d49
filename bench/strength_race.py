"""Training runs raced at equal CPU time: each pinned to its own core, snapshotted every N minutes.

Usage:
    python -m bench.strength_race --game speed-go-v0 --out runs/go-race --every 15 --minutes 120 \\
        --run mlp="--symmetries" \\
        --run conv32x3="--symmetries --torso conv --channels 32 --blocks 3"

Strength per minute of training is what matters on a small machine, so runs are compared at
equal CPU seconds, not at equal iterations or wall time (a match or a test sharing the machine
slows one run more than another, and the training log's wall time counts that). Each run is
`rtplan train-planner --game G --out OUT/NAME --devices 1 --seed S ... <its extra flags>`,
pinned to its own core (`taskset -c i`). Every `--every` CPU minutes of a run, its latest
`checkpoint.msgpack` (written every 5 iterations) is copied to `OUT/snaps/NAME-XXXmin.msgpack`,
which `rtplan gtp --planner`, `python -m bench.match --planner` and `--opponent-planner` load
as they load a shipped planner. A run stops at `--minutes` CPU minutes.

Stop a race with `kill` (SIGTERM) or SIGINT: it stops its runs. Runs resume: run the same
command again and every run continues from its last checkpoint (`--resume`), its CPU seconds so
far kept in `OUT/NAME/cpu_seconds.json`.

Then compare the snapshots with `python -m bench.match` (head to head at equal minutes, and
against an outside engine); docs/results.md has the commands and the tables.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench._common import ROOT

LEDGER = "cpu_seconds.json"
POLL_S = 5.0


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc; its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def snapshot_name(run: str, minutes: int) -> str:
    return f"{run}-{minutes:03d}min.msgpack"


def due_snapshots(cpu_s: float, every_min: int, done: set[int]) -> list[int]:
    """The snapshot minutes (multiples of `every_min`, > 0) reached by `cpu_s` and not yet taken."""
    reached = int(cpu_s // (every_min * 60)) * every_min
    return [m for m in range(every_min, reached + 1, every_min) if m not in done]


def parse_runs(specs: list[str]) -> dict[str, list[str]]:
    runs = {}
    for spec in specs:
        name, sep, flags = spec.partition("=")
        if not sep or not name or not name.replace("-", "").replace("_", "").isalnum():
            raise SystemExit(f"strength_race: --run wants NAME=FLAGS, got {spec!r}")
        if name in runs:
            raise SystemExit(f"strength_race: run {name!r} given twice")
        runs[name] = shlex.split(flags)
    return runs


class Racer:
    """One training run: its process, its CPU ledger, its snapshots."""

    def __init__(self, name: str, flags: list[str], core: int, args: argparse.Namespace) -> None:
        self.name, self.core = name, core
        self.dir = Path(args.out) / name
        self.snaps = Path(args.out) / "snaps"
        self.every, self.limit_s = args.every, args.minutes * 60.0
        ledger = self.dir / LEDGER
        self.before = json.loads(ledger.read_text())["cpu_seconds"] if ledger.exists() else 0.0
        self.done = {
            m
            for m in range(args.every, args.minutes + 1, args.every)
            if (self.snaps / snapshot_name(name, m)).exists()
        }
        self.argv = [
            "taskset", "-c", str(core), sys.executable, "-m", "rtplan", "train-planner",
            "--game", args.game, "--out", str(self.dir), "--devices", "1",
            "--iterations", "100000", "--eval-every", "25", "--eval-episodes", "16",
            "--checkpoint-every", "5", "--seed", str(args.seed), "--no-progress", *flags,
        ]  # fmt: skip
        if (self.dir / "checkpoint.msgpack").exists():
            self.argv.append("--resume")
        self.proc: subprocess.Popen | None = None
        self.cpu_s = self.before

    def start(self) -> None:
        if self.cpu_s >= self.limit_s:
            print(f"{self.name}: already at {self.cpu_s / 60:.1f} CPU minutes", flush=True)
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        self.snaps.mkdir(parents=True, exist_ok=True)
        log = open(self.dir / "race.log", "a")  # noqa: SIM115 (the child keeps it)
        print(f"{self.name}: {shlex.join(self.argv)}", flush=True)
        self.proc = subprocess.Popen(self.argv, cwd=ROOT, stdout=log, stderr=log)

    def poll(self) -> bool:
        """Updates the ledger and takes due snapshots; False once the run is over."""
        if self.proc is None:
            return False
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            self.cpu_s = self.before + process_cpu_seconds(self.proc.pid)
        (self.dir / LEDGER).write_text(json.dumps({"cpu_seconds": self.cpu_s}))
        for m in due_snapshots(self.cpu_s, self.every, self.done):
            src = self.dir / "checkpoint.msgpack"
            if src.exists():
                dst = self.snaps / snapshot_name(self.name, m)
                shutil.copyfile(src, dst.with_suffix(".tmp"))
                os.replace(dst.with_suffix(".tmp"), dst)
                print(f"{self.name}: {dst} at {self.cpu_s:.0f} CPU s", flush=True)
            self.done.add(m)
        if self.proc.poll() is not None:
            raise SystemExit(
                f"{self.name} exited ({self.proc.returncode}); see {self.dir}/race.log"
            )
        if self.cpu_s >= self.limit_s:
            self.stop()
            print(f"{self.name}: stopped at {self.cpu_s / 60:.1f} CPU minutes", flush=True)
            return False
        return True

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()
        self.proc = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", required=True)
    parser.add_argument("--out", required=True, help="folder of the runs and their snapshots")
    parser.add_argument("--run", action="append", required=True, help="NAME=train-planner flags")
    parser.add_argument("--every", type=int, default=15, help="CPU minutes between snapshots")
    parser.add_argument("--minutes", type=int, required=True, help="CPU minutes per run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--first-core", type=int, default=0, help="run i is pinned to core first-core + i"
    )
    args = parser.parse_args(argv)
    runs = parse_runs(args.run)
    cores = os.cpu_count() or 1
    if args.first_core < 0 or args.first_core + len(runs) > cores:
        raise SystemExit(
            f"strength_race: {len(runs)} runs from core {args.first_core} but {cores} cores"
        )
    racers = [
        Racer(name, flags, args.first_core + i, args)
        for i, (name, flags) in enumerate(runs.items())
    ]

    # Stop the training children on SIGTERM (pkill's default) and on SIGINT, which a shell
    # ignores for `&` background jobs (so Python would not see it): without this a killed race
    # left its children training, still writing their run folders.
    def interrupt(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)
    try:
        for r in racers:
            r.start()
        live = list(racers)
        while live:
            time.sleep(POLL_S)
            live = [r for r in live if r.poll()]
    except KeyboardInterrupt as stop:
        print(f"strength_race: stopped by {stop}; the same command resumes", flush=True)
        return 1
    finally:
        for r in racers:
            r.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
