"""Page benchmark: how fast each page of the viewer loads and whether it fits, in headless Chromium.

Usage: python -m bench.bench_pages [--game pacman-rt-v0] [--frames 120] [--loads 5]
       [--chromium /usr/bin/chromium]

Starts the env server (`rtplan.processes.services`, the shipped checkpoints and the checkout's
results/, no planner) with a fresh record folder, plays and records one reflex session of `--game`
so the lobby, `/tv` and a replay have something to show, then loads each page `--loads` times at
1280 x 800 and once at a phone's 390 x 844, and prints per page: load time (navigation start to
the load event, median and max), the document's height and width once the page is idle (its
fetches done) against the window (a width over
the window is horizontal scrolling), the JavaScript errors raised and the requests that left the
server (both should be 0).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench._page import FLAGS
from rtplan.processes import http_json, services

#: Navigation timing of the page just loaded, and its document's size.
MEASURE = """() => {
    const nav = performance.getEntriesByType('navigation')[0];
    const doc = document.documentElement;
    return { loadMs: nav.loadEventEnd - nav.startTime,
             height: doc.scrollHeight, width: doc.scrollWidth, inner: window.innerWidth };
}"""


def _recorded_session(http: str, game: str, frames: int) -> str:
    """Plays one reflex session of `game` to its end (or `frames`), recorded; its replay name."""
    body = {"game": game, "agent": "reflex", "fps": 30.0, "max_frames": frames, "record": True}
    sid = http_json("POST", f"{http}/v1/sessions", body)["id"]
    deadline = time.monotonic() + 120
    while (info := http_json("GET", f"{http}/v1/sessions/{sid}"))["status"] in (
        "waiting",
        "running",
    ):
        if time.monotonic() > deadline:
            raise TimeoutError(f"session {sid} still running after 120 s")
        time.sleep(0.2)
    return Path(info["replay"]).name


def _outside(url: str, server: str, into: list) -> None:
    if not url.startswith(server):
        into.append(url)


def _wide(width: int, window: int) -> str:
    return "!" if width > window else " "


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="pacman-rt-v0")
    parser.add_argument("--frames", type=int, default=120, help="frames of the recorded session")
    parser.add_argument("--loads", type=int, default=5, help="loads per page at 1280 x 800")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with (
        tempfile.TemporaryDirectory() as records,
        services(args.game, planner=False, echo=False, record_dir=Path(records)) as addr,
        sync_playwright() as p,
    ):
        http = addr["http"]
        replay = _recorded_session(http, args.game, args.frames)
        pages = {
            "lobby": "/",
            "tv": "/tv",
            "replay": f"/watch?replay={replay}",
            "results": "/results",
        }
        browser = p.chromium.launch(executable_path=args.chromium, args=FLAGS, headless=True)
        print(
            f"{'page':8s} {'load p50':>9s} {'max':>7s}  {'1280x800: h x w':>16s}  "
            f"{'390x844: h x w':>15s}  js errors  outside requests"
        )
        for name, path in pages.items():
            loads, sizes, errors, outside = [], {}, [], []
            for width, height, times in ((1280, 800, args.loads), (390, 844, 1)):
                page = browser.new_page(viewport={"width": width, "height": height})
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                page.on("request", lambda r, outside=outside: _outside(r.url, http, outside))
                for _ in range(times):
                    page.goto(f"{http}{path}", wait_until="networkidle")
                    got = page.evaluate(MEASURE)
                    if width == 1280:
                        loads.append(got["loadMs"])
                sizes[width] = (got["height"], got["width"], got["inner"])
                page.close()
            (h1, w1, i1), (h2, w2, i2) = sizes[1280], sizes[390]
            print(
                f"{name:8s} {statistics.median(loads):6.0f} ms {max(loads):4.0f} ms  "
                f"{h1:6d} x {w1:4d}{_wide(w1, i1)}     {h2:6d} x {w2:4d}{_wide(w2, i2)}"
                f"  {len(errors):9d}  {len(outside):16d}",
                flush=True,
            )
        browser.close()
    print("\n'!': the document is wider than the window (horizontal scrolling)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
