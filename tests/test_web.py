"""The browser pages in a real headless Chromium against a real env server: lobby, watch page,
and every game's board checked pixel by pixel where the rendered frame says a piece is."""

from __future__ import annotations

import concurrent.futures
import io
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from support import write_checkpoints

ROOT = Path(__file__).resolve().parents[1]
GAMES = ("pacman-rt-v0", "tetris-rt-v0", "snake-rt-v0", "speed-hex-v0", "speed-go-v0")
CHROMIUM = os.environ.get("RTPLAN_CHROMIUM", "/usr/bin/chromium")
#: Headless Chromium flags that work in containers without a display or network (cpu-notes).
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: Where the watch-page screenshots of the docs go when set (docs/img).
SHOTS = os.environ.get("RTPLAN_SCREENSHOT_DIR")
#: A channel may differ this much from the palette colour (anti-aliasing, blending).
TOLERANCE = 24


@pytest.fixture(scope="module")
def chromium_path() -> str:
    if os.environ.get("RTPLAN_SKIP_BROWSER") == "1":
        pytest.skip("RTPLAN_SKIP_BROWSER=1")
    if not Path(CHROMIUM).is_file():
        pytest.fail(
            f"no Chromium at {CHROMIUM}: the browser tests need the Debian package `chromium` "
            "(`make test` installs it; or apt-get install chromium), or RTPLAN_CHROMIUM=path; "
            "RTPLAN_SKIP_BROWSER=1 skips them"
        )
    return CHROMIUM


@pytest.fixture(scope="module")
def browser(chromium_path, tmp_path_factory):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the browser tests need Playwright for Python: pip install -e '.[dev]'")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=chromium_path,
            args=FLAGS,
            headless=True,
            viewport={"width": 960, "height": 720},
        )
        yield context
        context.close()


def post(base: str, **body) -> dict:
    req = urllib.request.Request(
        f"{base}/v1/sessions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    return json.load(urllib.request.urlopen(req, timeout=180))


def get(base: str, path: str) -> dict:
    return json.load(urllib.request.urlopen(f"{base}{path}", timeout=30))


@pytest.fixture(scope="module")
def server(chromium_path, tmp_path_factory):
    """`python -m server` on free ports with tiny checkpoints of every game, each game compiled
    (one short session per game, all at once: the compiles overlap)."""
    tmp = tmp_path_factory.mktemp("web")
    root = write_checkpoints(tmp / "ckpt", GAMES)
    cmd = [sys.executable, "-m", "server", "--http-port", "0", "--grpc-port", "0"]
    cmd += ["--checkpoint-dir", str(root), "--record-dir", str(tmp), "--log-level", "warning"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "rtplan env server" in line, line
        base = f"http://127.0.0.1:{int(line.split('http on 127.0.0.1:')[1].split()[0])}"
        with concurrent.futures.ThreadPoolExecutor(len(GAMES)) as pool:
            warm = [
                pool.submit(post, base, game=g, agent="reflex", fps=50.0, max_frames=1)
                for g in GAMES
            ]
            for future in warm:
                future.result()
        yield SimpleNamespace(base=base)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


@pytest.fixture
def page(browser):
    """A fresh tab whose console errors and page errors fail the test."""
    tab = browser.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    yield tab
    tab.close()
    assert errors == [], errors


def test_pages_are_served_beside_the_api(server):
    html = urllib.request.urlopen(f"{server.base}/", timeout=10).read().decode()
    assert "<title>rtplan · lobby</title>" in html and "cdn" not in html.lower()
    watch = urllib.request.urlopen(f"{server.base}/watch?session=x", timeout=10).read().decode()
    assert 'src="/web/watch.js"' in watch
    for name in ("lobby.js", "watch.js", "draw.js", "style.css"):
        text = urllib.request.urlopen(f"{server.base}/web/{name}", timeout=10).read().decode()
        assert "http://" not in text and "https://" not in text  # nothing from elsewhere
    assert get(server.base, "/healthz")["status"] == "ok"  # the API still answers


def test_lobby_lists_a_live_session_and_starts_one(server, page):
    live = post(server.base, game="snake-rt-v0", agent="reflex", fps=2.0)
    page.goto(f"{server.base}/")
    row = page.locator(f'tr[data-session="{live["id"]}"]')
    row.wait_for(timeout=10_000)
    cells = row.locator("td").all_inner_texts()
    assert cells[:3] == [live["id"], "snake-rt-v0", "reflex"] and cells[4] == "2"
    assert row.locator("a").get_attribute("href") == f"/watch?session={live['id']}"

    page.select_option('select[name="game"]', "tetris-rt-v0")
    page.select_option('select[name="agent"]', "reflex")
    page.fill('input[name="fps"]', "7")
    page.fill('input[name="seed"]', "3")
    page.click('form#start button[type="submit"]')
    link = page.locator("#start-result a")
    link.wait_for(timeout=30_000)
    sid = link.inner_text()
    info = get(server.base, f"/v1/sessions/{sid}")
    assert (info["game"], info["agent"]) == ("tetris-rt-v0", "reflex")
    assert (info["config"]["fps"], info["config"]["seed"]) == (7.0, 3)
    page.locator(f'tr[data-session="{sid}"]').wait_for(timeout=10_000)
    # The list refreshes: the live session's frame counter moves on the page.
    frame = row.locator("td").nth(5)
    first = int(frame.inner_text())
    page.wait_for_function(
        f"Number(document.querySelector('tr[data-session=\"{live['id']}\"] td:nth-child(6)')"
        f".textContent) > {first}",
        timeout=10_000,
    )


def test_watch_page_follows_the_session(server, page):
    fps = 10.0
    sid = post(server.base, game="tetris-rt-v0", agent="reflex", fps=fps)["id"]
    page.goto(f"{server.base}/watch?session={sid}")
    page.wait_for_function("window.rtplanViewer.frame !== null", timeout=10_000)
    start, t0 = int(page.inner_text("#frame")), time.monotonic()
    time.sleep(2.0)
    advanced, dt = int(page.inner_text("#frame")) - start, time.monotonic() - t0
    assert advanced >= 0.5 * fps * dt, (advanced, dt)  # the session's rate, loosely (loaded box)
    assert f"tetris-rt-v0 · {sid}" in page.inner_text("#title")
    assert "reflex · 10 FPS" in page.inner_text("#agent")
    # The provenance strip shows the reflex's frames in the reflex colour.
    reflex = page.evaluate(
        """() => {
            const c = document.getElementById('strip');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            for (let i = 0; i < d.length; i += 4)
                if (d[i] === 0x8a && d[i + 1] === 0x96 && d[i + 2] === 0xa3) n++;
            return n;
        }"""
    )
    assert reflex > 0
    stats = page.inner_text("#stats")
    assert "on time / late / fallback / invalid" in stats and "reflex" in stats
    assert get(server.base, f"/v1/sessions/{sid}")["viewers"] >= 1


def hex_rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))


def expected_pieces(state: dict, palette: dict) -> list[tuple[int, int, str, str]]:
    """(row, col, colour, what) for every piece the rendered state places on the board."""
    game, board = state["game"], state["board"]
    out = []
    if game == "pacman-rt-v0":
        P = palette["pacman"]
        busy = {tuple(state["player"])} | {tuple(g) for g in state["ghosts"]}
        for r, row in enumerate(board):
            for c, ch in enumerate(row):
                if (r, c) in busy:
                    continue
                if ch == ".":
                    out.append((r, c, P["pellet"], "pellet"))
                elif ch == "o":
                    out.append((r, c, P["power"], "power pellet"))
        ghosts = [tuple(g) for g in state["ghosts"]]
        for i, g in enumerate(ghosts):
            if g != tuple(state["player"]) and ghosts.count(g) == 1 and state["frightened"] == 0:
                out.append((*g, P["ghosts"][i], f"ghost {i}"))
        out.append((*state["player"], P["player"], "pac-man"))
    elif game == "tetris-rt-v0":
        P = palette["tetris"]
        for r, c in state["piece_cells"]:
            if 0 <= r < len(board):
                out.append((r, c, P["pieces"][state["piece"]], "falling piece"))
        out += [
            (r, c, P["locked"], "locked")
            for r, row in enumerate(board)
            for c, ch in enumerate(row)
            if ch != " "
        ]
    elif game == "snake-rt-v0":
        P = palette["snake"]
        out += [
            (r, c, P["body"], "body")
            for r, row in enumerate(board)
            for c, ch in enumerate(row)
            if ch == "s"
        ]
        out.append((*state["head"], P["head"], "head"))
        out.append((*state["fruit"], P["fruit"], "fruit"))
    else:
        stones = palette["hex" if game == "speed-hex-v0" else "go"]["stones"]
        out += [
            (r, c, stones["xo".index(ch)], f"stone {ch}")
            for r, row in enumerate(board)
            for c, ch in enumerate(row)
            if ch in "xo"
        ]
        if game == "speed-hex-v0":
            empty = palette["hex"]["empty"]
            out += [
                (r, c, empty, "empty")
                for r, row in enumerate(board)
                for c, ch in enumerate(row)
                if ch == "."
            ]
    return out


PROBE = """(probes) => {
    const v = window.rtplanViewer, canvas = document.getElementById('board');
    const ctx = canvas.getContext('2d'), dpr = canvas.width / v.layout.width;
    const half = Math.max(1, Math.floor(0.2 * v.layout.cell * dpr));
    return probes.map(([r, c, rgb, tol]) => {
        const [x, y] = v.center(r, c);
        const d = ctx.getImageData(Math.round(x * dpr) - half, Math.round(y * dpr) - half,
                                   2 * half + 1, 2 * half + 1).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4)
            if (Math.abs(d[i] - rgb[0]) <= tol && Math.abs(d[i + 1] - rgb[1]) <= tol &&
                Math.abs(d[i + 2] - rgb[2]) <= tol) n++;
        return n / (d.length / 4);
    });
}"""


def has_pieces(game: str) -> str:
    """A JS condition: the drawn state shows what this game's check needs."""
    if game in ("speed-hex-v0", "speed-go-v0"):  # stones of both colours
        return "s.board.join('').includes('x') && s.board.join('').includes('o')"
    return "s.frame >= 1"


@pytest.mark.parametrize("game", GAMES)
def test_board_shows_the_pieces(server, page, game, tmp_path):
    from PIL import Image

    sid = post(server.base, game=game, agent="reflex", fps=4.0)["id"]
    page.goto(f"{server.base}/watch?session={sid}")
    page.wait_for_function(
        f"(() => {{ const s = window.rtplanViewer.state; return s && ({has_pieces(game)}); }})()",
        timeout=20_000,
    )
    page.evaluate("window.rtplanViewer.paused = true")  # the board stays as the state says
    state = page.evaluate("window.rtplanViewer.state")
    palette = page.evaluate("window.rtplanViewer.palette")
    assert state["game"] == game and state["frame"] == page.evaluate("window.rtplanViewer.frame")

    pieces = expected_pieces(state, palette)
    kinds = {what.split()[0] for *_, what in pieces}
    wanted = {
        "pacman-rt-v0": {"pellet", "power", "ghost", "pac-man"},
        "tetris-rt-v0": {"falling"},
        "snake-rt-v0": {"head", "fruit"},
        "speed-hex-v0": {"stone", "empty"},
        "speed-go-v0": {"stone"},
    }[game]
    assert wanted <= kinds, (kinds, state)
    probes = [[r, c, hex_rgb(colour), TOLERANCE] for r, c, colour, _ in pieces]
    shares = page.evaluate(PROBE, probes)
    missing = [(what, r, c, share) for (r, c, _, what), share in zip(pieces, shares) if share < 0.2]
    assert not missing, f"{game} frame {state['frame']}: not drawn where the board says {missing}"
    if game == "speed-go-v0":  # an empty point shows neither stone's colour
        stones = palette["go"]["stones"]
        empty = [
            [r, c, hex_rgb(stones[i]), TOLERANCE]
            for r, row in enumerate(state["board"])
            for c, ch in enumerate(row)
            if ch == "."
            for i in (0, 1)
        ]
        assert max(page.evaluate(PROBE, empty)) < 0.2

    png = page.locator("#board").screenshot()
    image = Image.open(io.BytesIO(png)).convert("RGB")
    counts = sorted(image.getcolors(maxcolors=1 << 20), reverse=True)
    assert len(counts) >= 3 and counts[0][0] < 0.95 * image.width * image.height  # not blank
    if SHOTS and game in ("pacman-rt-v0", "speed-go-v0"):
        page.evaluate("window.rtplanViewer.paused = false")
        page.wait_for_timeout(1500)  # a few more frames in the panel's charts
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"watch-{game.split('-')[-2]}.png"))
