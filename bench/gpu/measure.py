"""The GPU run's measurements, in one go under a time budget; `bench/gpu/run.sh` calls it.

Usage: python -m bench.gpu.measure [--out results/gpu] [--budget-s 420]
    [--tiny --checkpoint-dir DIR]

In order, each step starting only while the budget has room for it (a step left out is named
in `summary.json`, with why):
1. the device: platform, kind, JAX version;
2. search latency of the shipped planner per k at batch 1, each game (the paper's figures on
   an H100: search mean 122 ms, p95 205 ms; reference notes section 9);
3. the deploy ladder (`rtplan deploy`) of Tetris and Pac-Man: the shipped gate played live at
   each FPS, both services on this device (XLA_PYTHON_CLIENT_PREALLOCATE=false, set by
   run.sh, lets the two processes share it);
4. planner-training throughput (`rtplan train-planner`, self-play frames/s, compile excluded)
   against the 2-core CPU's figure in bench/results/train_scaling.csv;
5. search latency at the planner service's batch rungs (2, 4, 8) at each game's smallest k.

Files under `<out>/<device slug>/`: device.json, search_latency.csv, deploy/<game>/ (the
command's own files), train_throughput.csv, summary.json. `--tiny` (the test suite, on CPU):
Snake only, the planner checkpoints of `--checkpoint-dir`, one short rung, a tiny training run.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

from bench._common import RESULTS, git_commit, median_p95, utc_now
from bench.bench_batching import session_states
from rtplan.harness.checkpoint import checkpoint_root, planner_path
from rtplan.planner import CompiledOptions, Planner
from rtplan.planner.store import load_planner

COMMITTED = ("snake-rt-v0", "tetris-rt-v0", "pacman-rt-v0")
CLOCK = ("speed-hex-v0", "speed-go-v0")
LADDER_GAMES = ("tetris-rt-v0", "pacman-rt-v0")
RUNGS = (2, 4, 8)


def device_info() -> dict:
    """What ran it: the first device's platform and kind, and the versions."""
    d = jax.devices()[0]
    return dict(
        platform=d.platform,
        device_kind=d.device_kind,
        devices=len(jax.devices()),
        jax=jax.__version__,
        python=sys.version.split()[0],
        commit=git_commit(short=True),
        date=utc_now(),
    )


def slug(info: dict) -> str:
    """The folder of a device's results: e.g. "gpu-nvidia-h100-80gb-hbm3"."""
    return re.sub(r"[^a-z0-9]+", "-", f"{info['platform']}-{info['device_kind']}".lower()).strip(
        "-"
    )


def search_latency(game_id: str, root: Path, sizes, ks, calls: int) -> list[dict]:
    """One row per (k, batch): the shipped planner's option as the planner service runs it
    (`CompiledOptions`, host arrays in and out), `calls` timed calls after one warm-up."""
    cfg, params, _ = load_planner(game_id, str(planner_path(root, game_id)))
    planner = Planner(cfg)
    options = CompiledOptions(planner, params, ladder=tuple(sizes))
    states = session_states(planner, max(sizes))
    keys = np.stack([np.array([0, i], np.uint32) for i in range(max(sizes))])
    batches = {n: jax.tree.map(lambda *xs: np.stack(xs), *states[:n]) for n in sizes}
    rows = []
    for k in ks if ks else cfg.budgets:
        for n in sizes:
            start = time.perf_counter()
            options.option(k, keys[:n], batches[n])  # compiles
            compile_s = time.perf_counter() - start
            times = []
            for _ in range(calls):
                start = time.perf_counter()
                options.option(k, keys[:n], batches[n])
                times.append((time.perf_counter() - start) * 1e3)
            p50, p95 = median_p95(times)
            mean = float(np.mean(times))
            rows.append(dict(game=game_id, k=k, simulations=cfg.sims(k), batch=n,
                             mean_ms=round(mean, 3), p50_ms=round(p50, 3), p95_ms=round(p95, 3),
                             plans_per_s=round(n / mean * 1e3, 1), calls=calls,
                             compile_s=round(compile_s, 2)))  # fmt: skip
            print(f"  {game_id} k={k} batch {n}: mean {mean:.1f} ms, p95 {p95:.1f} ms", flush=True)
    return rows


def deploy_ladder(game_id: str, out: Path, fps, episodes: int, max_frames: int, root) -> dict:
    """`rtplan deploy` over `fps` (both services started by it); its deploy.csv rows."""
    argv = [sys.executable, "-m", "rtplan", "deploy", "--game", game_id, "--fps",
            *map(str, fps), "--episodes", str(episodes), "--max-frames", str(max_frames),
            "--no-pin", "--force", "--out", str(out)]  # fmt: skip
    if root is not None:
        argv += ["--checkpoint-dir", str(root), "--k", "1"]  # a tiny planner has no gate
    run = subprocess.run(argv, capture_output=True, text=True, check=False)
    (out / "deploy.log").parent.mkdir(parents=True, exist_ok=True)
    (out / "deploy.log").write_text(run.stdout + run.stderr)
    if run.returncode != 0:
        raise RuntimeError(f"rtplan deploy {game_id} exited {run.returncode}: {run.stderr[-2000:]}")
    with (out / "deploy.csv").open() as f:
        rows = list(csv.DictReader(f))
    return {r["fps"]: dict(miss_rate=float(r["miss_rate"]), return_mean=float(r["return_mean"]),
                           latency_p95_ms=float(r["latency_p95_ms"])) for r in rows}  # fmt: skip


def train_throughput(game_id: str, extra: list[str], iterations: int) -> float:
    """Median self-play frames/s of `rtplan train-planner` after its first two iterations."""
    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, "-m", "rtplan", "train-planner", "--game", game_id,
                "--iterations", str(iterations), "--eval-every", "0", "--checkpoint-every", "0",
                "--out", tmp, "--no-progress", *extra]  # fmt: skip
        run = subprocess.run(argv, capture_output=True, text=True, check=False)
        if run.returncode != 0:
            raise RuntimeError(f"train-planner exited {run.returncode}: {run.stderr[-2000:]}")
        with open(f"{tmp}/log.csv") as f:
            rows = list(csv.DictReader(f))[2:]  # the first iterations include compilation
    return float(np.median([float(r["frames_per_s"]) for r in rows]))


def cpu_training_figure(game_id: str, batch: int) -> float | None:
    """The 2-core CPU's self-play frames/s (1 process, 1 device) at `batch`, from the committed
    bench/results/train_scaling.csv (frames per iteration: batch x 16 decisions at k=1)."""
    path = RESULTS / "train_scaling.csv"
    if not path.exists():
        return None
    rows = [r for r in csv.DictReader(path.open())
            if r["game"] == game_id and int(r["batch"]) == batch and r["devices"] == "1"
            and r["processes"] == "1"]  # fmt: skip
    return batch * 16 / float(rows[-1]["s_per_iter"]) if rows else None


def write_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("results/gpu"))
    p.add_argument("--budget-s", type=float, default=420.0, help="seconds for every step")
    p.add_argument("--tiny", action="store_true", help="the suite's CPU check: tiny and short")
    p.add_argument("--checkpoint-dir", type=Path, default=None, help="default: the shipped ones")
    args = p.parse_args(argv)
    t0 = time.monotonic()
    root = args.checkpoint_dir or checkpoint_root()
    info = device_info()
    out = args.out / slug(info)
    out.mkdir(parents=True, exist_ok=True)
    (out / "device.json").write_text(json.dumps(info, indent=1) + "\n")
    print(f"rtplan GPU run on {info['device_kind']} ({info['platform']}), jax {info['jax']}")
    summary: dict = dict(device=info, done=[], left_out={}, seconds={})
    tiny = args.tiny

    def step(name: str, needs_s: float, fn) -> None:
        left = args.budget_s - (time.monotonic() - t0)
        if left < needs_s:
            summary["left_out"][name] = f"{left:.0f} s left of the budget, it needs ~{needs_s:.0f}"
            print(f"{name}: left out ({summary['left_out'][name]})", flush=True)
            return
        print(f"{name} ...", flush=True)
        start = time.monotonic()
        try:
            fn()
            summary["done"].append(name)
        except Exception as e:  # noqa: BLE001 - one failed step must not lose the others
            summary["left_out"][name] = f"failed: {type(e).__name__}: {e}"[:2000]
            print(f"{name}: FAILED {e}", flush=True)
        summary["seconds"][name] = round(time.monotonic() - start, 1)

    latency: list[dict] = []
    games = ("snake-rt-v0",) if tiny else COMMITTED

    def batch1() -> None:
        for g in games:
            ks = (1,) if tiny else None  # None: every budget
            latency.extend(search_latency(g, root, (1,), ks, calls=5 if tiny else 30))
        write_csv(out / "search_latency.csv", latency)

    step("search latency at batch 1 (committed games)", 10 if tiny else 60, batch1)

    ladder: dict = {}

    def deploy() -> None:
        for g in ("snake-rt-v0",) if tiny else LADDER_GAMES:
            fps = (8,) if tiny else (9, 15, 30)
            ladder[g] = deploy_ladder(g, out / "deploy" / g, fps, 1, 8 if tiny else 300,
                                      args.checkpoint_dir)  # fmt: skip
        summary["deploy"] = ladder

    step("deploy ladder", 20 if tiny else 200, deploy)

    def training() -> None:
        g, batch = "snake-rt-v0", 64
        extra = (["--batch", "2", "--unroll", "2", "--channels", "4", "--blocks", "1",
                  "--features", "4", "--value-hidden", "4", "--sims-per-frame", "2",
                  "--learner-steps", "1", "--minibatch", "4", "--n-step", "1",
                  "--devices", "1"]
                 if tiny else ["--batch", str(batch), "--devices", "1"])  # fmt: skip
        fps = train_throughput(g, extra, 3 if tiny else 8)
        cpu = None if tiny else cpu_training_figure(g, batch)
        row = dict(game=g, batch=2 if tiny else batch, frames_per_s=round(fps, 1),
                   cpu_2core_frames_per_s=round(cpu, 1) if cpu else "",
                   ratio=round(fps / cpu, 2) if cpu else "")  # fmt: skip
        write_csv(out / "train_throughput.csv", [row])
        summary["training"] = row

    step("planner-training throughput", 15 if tiny else 90, training)

    def rungs() -> None:
        for g in games:
            cfg, _, _ = load_planner(g, str(planner_path(root, g)))
            rungs = (2,) if tiny else RUNGS
            k = (min(cfg.budgets),)
            latency.extend(search_latency(g, root, rungs, k, calls=3 if tiny else 20))
        write_csv(out / "search_latency.csv", latency)

    step("search latency at the batch rungs", 10 if tiny else 60, rungs)

    def clock_games() -> None:
        for g in CLOCK:
            latency.extend(search_latency(g, root, (1,), None, calls=20))
        write_csv(out / "search_latency.csv", latency)

    if not tiny:
        step("search latency at batch 1 (clock games)", 60, clock_games)
    summary["seconds"]["total"] = round(time.monotonic() - t0, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"wrote {out}/ in {summary['seconds']['total']:.0f} s; left out: "
          f"{', '.join(summary['left_out']) or 'nothing'}", flush=True)  # fmt: skip
    return 0 if not summary["left_out"] or not tiny else 1


if __name__ == "__main__":
    raise SystemExit(main())
