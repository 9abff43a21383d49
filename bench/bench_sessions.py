"""Sessions per server: late ticks of N concurrent reflex sessions, batched ticks vs ticking alone.

Usage: python -m bench.bench_sessions [--game snake-rt-v0 ...] [--fps 30] [--sessions 16 64 256]
       [--frames 300] [--modes batch alone] [--csv bench/results/sessions.csv]

For each mode (`batch`: the env server's batched ticks, the sessions of one game and FPS
stepped in one vmapped step per tick, every batch size up to the largest N compiled at
start-up (`--batch-warm-rows`); `lazy`: batched with the default warm rows, the larger sizes
compiling while the sessions arrive; `alone`: `--no-batch-ticks`, each session on its own
ticker) one env server is started (no planner service, `--max-sessions` the largest N), and
for each game and each N: N reflex sessions of `--frames`
frames are created together (16 REST clients at once), and when all have ended their tick
counters are summed: ticks, late ticks (> the server's 5 ms), their share, the largest lag. A
size is held when every session was created and < 0.1% of ticks were late. One CSV row per
(mode, game, N).
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor

from bench._common import RESULTS, append_rows, git_commit, utc_now
from rtplan.processes import Place, Placement, http_json, services

FIELDS = (
    "date", "commit", "game", "fps", "frames", "mode", "sessions", "created", "ticks",
    "late_ticks", "late_pct", "max_lag_ms", "mean_lag_ms", "start_spread_s", "held",
)  # fmt: skip
#: Late ticks a held size may have (a share of all ticks).
HELD_LATE = 0.001
CLIENTS = 16


def _create(base: str, game: str, fps: float, frames: int, seed: int) -> tuple[str | None, float]:
    body = {"game": game, "agent": "reflex", "fps": fps, "seed": seed, "max_frames": frames}
    try:
        return http_json("POST", f"{base}/v1/sessions", body)["id"], time.monotonic()
    except RuntimeError:  # the server is full (429) or refused it
        return None, time.monotonic()


def _ended(base: str, sid: str, timeout: float) -> dict:
    end = time.monotonic() + timeout
    while True:
        d = http_json("GET", f"{base}/v1/sessions/{sid}")
        if d["status"] not in ("waiting", "running") or time.monotonic() > end:
            return d
        time.sleep(0.5)


def measure(base: str, game: str, fps: float, frames: int, n: int) -> dict:
    """Plays `n` reflex sessions of `game` together; their summed tick counters."""
    with ThreadPoolExecutor(CLIENTS) as pool:
        made = list(pool.map(lambda i: _create(base, game, fps, frames, i), range(n)))
        ids = [sid for sid, _ in made if sid is not None]
        times = [t for _, t in made]
        time.sleep(frames / fps)
        details = list(pool.map(lambda sid: _ended(base, sid, frames / fps + 120), ids))
    stats = [d["stats"] for d in details]
    ticks = sum(s["ticks"] for s in stats)
    late = sum(s["late_ticks"] for s in stats)
    lag = sum(s["mean_tick_lag_ms"] * s["ticks"] for s in stats)
    share = late / max(ticks, 1)
    return {
        "game": game,
        "fps": fps,
        "frames": frames,
        "sessions": n,
        "created": len(ids),
        "ticks": ticks,
        "late_ticks": late,
        "late_pct": round(100 * share, 3),
        "max_lag_ms": round(max((s["max_tick_lag_ms"] for s in stats), default=0.0), 2),
        "mean_lag_ms": round(lag / max(ticks, 1), 3),
        "start_spread_s": round(max(times) - min(times), 2),
        "held": len(ids) == n and share < HELD_LATE,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", nargs="*", default=["snake-rt-v0"])
    parser.add_argument("--fps", type=float, default=30.0)
    parser.add_argument("--sessions", type=int, nargs="*", default=[16, 64, 256, 512])
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument(
        "--modes", nargs="*", choices=["batch", "lazy", "alone"], default=["batch", "alone"]
    )
    parser.add_argument("--csv", default=str(RESULTS / "sessions.csv"))
    args = parser.parse_args()

    most = max(args.sessions)
    rows = []
    for mode in args.modes:
        flags = ("--max-sessions", str(most), "--keep-finished", str(most))
        flags += {
            "batch": ("--batch-ticks", "--batch-warm-rows", str(most)),
            "lazy": ("--batch-ticks",),
            "alone": ("--no-batch-ticks",),
        }[mode]
        placement = Placement(env_server=Place(args=flags))
        with services(args.game, planner=False, echo=False, placement=placement) as addr:
            for game in args.game:
                for n in args.sessions:
                    row = {"mode": mode, **measure(addr["http"], game, args.fps, args.frames, n)}
                    rows.append(row)
                    print(
                        f"{mode:5s} {game} {n:4d} sessions: {row['late_ticks']} late of "
                        f"{row['ticks']} ticks ({row['late_pct']:.3f}%), max lag "
                        f"{row['max_lag_ms']} ms, created {row['created']}",
                        flush=True,
                    )
    stamp = {"date": utc_now(), "commit": git_commit(short=True)}
    append_rows(args.csv, [{**stamp, **r} for r in rows], FIELDS)
    print(f"\n## Sessions per server ({args.fps:g} FPS, {args.frames} frames, reflex agents)\n")
    print("| game | sessions | mode | late ticks | late % | max lag ms | held (< 0.1%) |")
    print("|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: (r["game"], r["sessions"], r["mode"])):
        print(
            f"| {r['game']} | {r['sessions']} | {r['mode']} | {r['late_ticks']} / {r['ticks']} "
            f"| {r['late_pct']:.3f} | {r['max_lag_ms']} | {'yes' if r['held'] else 'no'} |"
        )
    print(f"\nappended to {args.csv}")


if __name__ == "__main__":
    main()
