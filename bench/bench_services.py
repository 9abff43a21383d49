"""Services benchmark: live planner agent miss rate and slack per FPS, and websocket fan-out.

Usage: python -m bench.bench_services [--games ...] [--fps 8 9 10 11 12] [--frames 200]
       [--ks 1 2 3 4] [--viewers 100]

Starts the real planner service and env server (`rtplan.processes.services`), then per game:
- one live session per FPS, played by the built-in planner agent with the fixed k-sequence
  `--ks` repeated (a stand-in for the gate's mixed choices until the gate lands). Reported from
  the session's replay file: miss rate (planned frames whose action was not there by the
  deadline), p95 of the planner round trip, and the slack that 95% of planned actions beat
  (5th percentile of deadline - arrival);
- the FPS ladder continues past the table until the miss rate reaches 1%: the highest FPS
  with < 1% misses;
- websocket fan-out: `--viewers` clients watch one 12 FPS session of `--fan-out-game` played
  by the reflex agent; late ticks, frames received per viewer, dropped frames.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

import numpy as np

from rtplan.processes import ROOT, http_json, services
from rtplan.server.replay import ReplayFile

LADDER = (15, 20, 30, 45, 60, 90, 120)


def _session(addr: dict, game: str, fps: float, ks, frames: int, seed: int) -> dict:
    body = {
        "game": game,
        "agent": "planner",
        "k": list(ks),
        "fps": fps,
        "seed": seed,
        "record": True,
        "max_frames": frames,
    }
    created = http_json("POST", f"{addr['http']}/v1/sessions", body)
    sid = created["id"]
    while True:
        details = http_json("GET", f"{addr['http']}/v1/sessions/{sid}")
        if details["status"] not in ("waiting", "running"):
            return details
        time.sleep(0.5)


def _planned(details: dict) -> dict:
    replay = Path(details["replay"])
    replay = replay if replay.is_absolute() else ROOT / replay
    reports = [f.report for f in ReplayFile.read(replay).frames]
    # Every frame the planner answered, on time or not (`source` is who answered).
    planned = [r for r in reports if r.source == "planned"]
    on_time = [r for r in planned if r.provenance.label == "on_time"]
    lat = [r.latency_ms for r in planned if r.latency_ms is not None]
    slack = [r.slack_ms for r in on_time]
    return {
        "planned": len(planned),
        "miss_rate": 1 - len(on_time) / max(len(planned), 1),
        "p95_latency": float(np.percentile(lat, 95)) if lat else float("nan"),
        "slack_p5": float(np.percentile(slack, 5)) if slack else float("nan"),
        "late_ticks": details["stats"].get("late_ticks"),
    }


async def _fan_out(addr: dict, game: str, viewers: int, frames: int, fps: float) -> dict:
    from websockets.asyncio.client import connect

    body = {"game": game, "agent": "reflex", "fps": fps, "max_frames": frames}
    created = http_json("POST", f"{addr['http']}/v1/sessions", body)
    url = f"{addr['ws']}{created['viewer_path']}"
    counts = [0] * viewers
    joined = asyncio.Event()
    at_join: dict = {}

    async def viewer(i: int) -> None:
        async with connect(url, max_size=2**22) as ws:
            async for raw in ws:
                msg = json.loads(raw)
                if msg.get("type") == "frame":
                    counts[i] += 1
                    if counts[i] == 1 and all(counts) and not joined.is_set():
                        joined.set()  # every viewer is in: the join burst is over
                        at_join.update(msg["stats"], frame=msg["frame"])
                    if msg["done"] or msg["frame"] >= frames:
                        return

    await asyncio.wait_for(asyncio.gather(*(viewer(i) for i in range(viewers))), frames / fps + 60)
    details = http_json("GET", f"{addr['http']}/v1/sessions/{created['id']}")
    return {"details": details, "counts": counts, "at_join": at_join}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--games", nargs="*", default=["pacman-rt-v0", "snake-rt-v0", "tetris-rt-v0"]
    )
    parser.add_argument("--fps", type=float, nargs="*", default=[8, 9, 10, 11, 12])
    parser.add_argument("--ks", type=int, nargs="*", default=[1, 2, 3, 4])
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--viewers", type=int, default=100)
    parser.add_argument(
        "--fan-out-game",
        default="snake-rt-v0",
        help="game of the fan-out session (reflex agent; Snake's reflex lasts past --frames)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=["live", "fan-out"], help="run one part (default: both)")
    args = parser.parse_args()

    preload = list(dict.fromkeys([*args.games, args.fan_out_game]))
    with services(preload, echo=False) as addr:
        if args.only != "fan-out":
            _live(addr, args)
        if args.only != "live":
            _fan_out_table(addr, args)


def _live(addr: dict, args: argparse.Namespace) -> None:
    print(f"\n## Live planner agent (k-sequence {args.ks} repeated, {args.frames} frames)\n")
    print("| game | FPS | planned actions | miss rate | p95 round trip ms | slack 95% beat ms |")
    print("|---|---|---|---|---|---|")
    highest = {}
    for game in args.games:
        for fps in [*args.fps, *LADDER]:
            if fps in LADDER and fps <= max(args.fps):
                continue
            r = _planned(_session(addr, game, fps, args.ks, args.frames, args.seed))
            if fps in args.fps:
                print(
                    f"| {game} | {fps:g} | {r['planned']} | {100 * r['miss_rate']:.2f}% | "
                    f"{r['p95_latency']:.1f} | {r['slack_p5']:.1f} |",
                    flush=True,
                )
            if r["miss_rate"] < 0.01:
                highest[game] = fps
            elif fps not in args.fps:
                break
    print("\n| game | highest FPS tried with < 1% misses |\n|---|---|")
    for game in args.games:
        print(f"| {game} | {highest.get(game, 'none')} |")


def _fan_out_table(addr: dict, args: argparse.Namespace) -> None:
    fan = asyncio.run(_fan_out(addr, args.fan_out_game, args.viewers, args.frames, 12.0))
    stats = fan["details"]["stats"]
    counts = np.asarray(fan["counts"])
    print(
        f"\n## Websocket fan-out ({args.fan_out_game}, reflex agent, {args.viewers} viewers, "
        f"12 FPS, {args.frames} frames)\n"
    )
    join = fan["at_join"]
    late_join = join.get("late_ticks", 0)
    print(
        "| late ticks: in all / while the viewers joined / after | max tick lag ms "
        "| frames per viewer min / mean | viewer drops |"
    )
    print("|---|---|---|---|")
    print(
        f"| {stats.get('late_ticks')} / {late_join} (frames 0-{join.get('frame')}) / "
        f"{stats.get('late_ticks') - late_join} | {stats.get('max_tick_lag_ms', 0):.2f} | "
        f"{counts.min()} / {counts.mean():.1f} | {stats.get('viewer_drops')} |"
    )


if __name__ == "__main__":
    main()
