"""The README's screenshots from a running `rtplan demo` (the shipped planners): the TV page
following the demo's gated game (gate strip, evaluation bar, value graph), and a person playing
Speed Hex at 1+1 against the planner in the lobby's way.

Usage: rtplan demo --port 8765 --planner-games speed-hex-v0 &   (wait for "lobby at")
       python -m bench.screenshots --base http://127.0.0.1:8765 --out docs/img
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from bench._page import FLAGS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="http://127.0.0.1:8765", help="the demo's lobby URL")
    parser.add_argument("--out", default="docs/img", help="folder of the PNGs")
    parser.add_argument(
        "--chromium", default=os.environ.get("RTPLAN_CHROMIUM", "/usr/bin/chromium")
    )
    parser.add_argument("--watch-s", type=float, default=12.0, help="seconds of TV before the shot")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1200, "height": 760})
        page.goto(f"{args.base}/tv")
        page.wait_for_function(
            "window.rtplanViewer && window.rtplanViewer.frame > 0", timeout=120_000
        )
        page.wait_for_timeout(int(args.watch_s * 1000))
        page.screenshot(path=str(out / "tv-tetris.png"))
        print(f"wrote {out / 'tv-tetris.png'}")

        page.goto(args.base)
        page.wait_for_selector('select[name="game"] option[value="speed-hex-v0"]', state="attached")
        page.select_option('select[name="game"]', "speed-hex-v0")
        page.select_option('select[name="agent"]', "human")
        page.select_option('select[name="time_control"]', "1+1")
        page.click("form#start button")
        page.wait_for_url("**/watch?session=*", timeout=60_000)  # the lobby opens the game
        page.wait_for_function(
            "(() => { const v = window.rtplanViewer; return v && v.player && v.state"
            " && !document.querySelector('#result.countdown'); })()",
            timeout=60_000,
        )
        # A few moves of a person (the centre, then along the diagonal) against the planner.
        for r, c in ((5, 5), (4, 6), (6, 4), (3, 7), (7, 3)):
            page.wait_for_function(
                "window.rtplanViewer.state && window.rtplanViewer.state.to_play === "
                "window.rtplanViewer.player.player",
                timeout=60_000,
            )
            xy = page.evaluate(f"window.rtplanViewer.center({r}, {c})")
            page.click("#board", position=dict(zip("xy", xy)))
            page.wait_for_timeout(1200)
        page.screenshot(path=str(out / "human-hex.png"))
        print(f"wrote {out / 'human-hex.png'}")
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
