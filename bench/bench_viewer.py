"""Viewer benchmark: how fast the watch page draws a 30 FPS Pac-Man session in headless Chromium.

Usage: python -m bench.bench_viewer [--fps 30] [--sessions 5] [--game pacman-rt-v0]
       [--agent reflex] [--frames 600] [--chromium /usr/bin/chromium] [--throttle 1]

Starts the env server (`rtplan.processes.services`, the shipped checkpoints, no planner), opens the
watch page of `--sessions` sessions one after another, each played by `--agent` for at most
`--frames` frames (the reflex: ~64 frames of Pac-Man from the page's join; "human" with no key
pressed starts when the page joins, so the page sees every frame, and a ghost catches Pac-Man
within ~30 frames), and reports per session and overall: frames received and distinct frames drawn
per second while the session ran, each frame's lag (arrival to the first draw showing it or a
newer frame), the page's draw time, and the session's late ticks.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from bench._page import DRAWN, FLAGS
from rtplan.processes import http_json, services

#: Per-frame lags are read from the page with the session's summary.
LAGS = DRAWN.replace(
    "lags.sort((a, b) => a - b);", "const raw = lags.slice(); lags.sort((a, b) => a - b);"
).replace("drawMs: v.drawMs };", "drawMs: v.drawMs, lags: raw };")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="pacman-rt-v0")
    parser.add_argument("--fps", type=float, default=30.0)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--agent", default="reflex", choices=("reflex", "human"))
    parser.add_argument("--frames", type=int, default=600, help="frames per session at most")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--throttle", type=float, default=1.0, help="CDP CPU throttling rate")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    rows, lags = [], []
    with services(args.game, planner=False, echo=False) as addr, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 960, "height": 720})
        if args.throttle != 1:
            cdp = page.context.new_cdp_session(page)
            cdp.send("Emulation.setCPUThrottlingRate", {"rate": args.throttle})
        for seed in range(args.sessions):
            body = {
                "game": args.game,
                "agent": args.agent,
                "fps": args.fps,
                "seed": seed,
                "max_frames": args.frames,
            }
            created = http_json("POST", f"{addr['http']}/v1/sessions", body)
            page.goto(f"{addr['http']}/watch?session={created['id']}#token={created['token']}")
            page.wait_for_function("window.rtplanViewer.ended", timeout=120_000)
            page.wait_for_timeout(100)
            got = page.evaluate(LAGS)
            stats = http_json("GET", f"{addr['http']}/v1/sessions/{created['id']}")["stats"]
            lags += [x for x in got["lags"] if x is not None]
            rows.append((got, stats))
            print(
                f"session {seed}: {got['received']:4d} frames in {got['seconds']:5.2f} s  "
                f"received {got['receivedPerS']:5.1f}/s  drawn {got['drawnPerS']:5.1f}/s  "
                f"lag p50 {got['lagP50']:5.1f} ms max {got['lagMax']:6.1f} ms  "
                f"draw {got['drawMs']:4.2f} ms  late ticks {stats['late_ticks']}",
                flush=True,
            )
        browser.close()
    seconds = sum(g["seconds"] for g, _ in rows)
    received = sum(g["received"] - 1 for g, _ in rows) / seconds
    drawn = sum(g["drawnPerS"] * g["seconds"] for g, _ in rows) / seconds
    lag = np.asarray(lags, float)
    print(
        f"\n{args.game} at {args.fps:g} FPS, {len(rows)} {args.agent} sessions, "
        f"throttle {args.throttle:g}x: "
        f"page received {received:.1f} frames/s, drew {drawn:.1f} distinct frames/s; "
        f"frame lag p50 {np.percentile(lag, 50):.1f} ms, p95 {np.percentile(lag, 95):.1f} ms, "
        f"max {lag.max():.1f} ms; draw {np.mean([g['drawMs'] for g, _ in rows]):.2f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
