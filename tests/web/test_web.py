"""The browser pages in a real headless Chromium against a real env server: lobby, watch page,
every game's board checked pixel by pixel where the rendered frame says a piece is, replays,
human play, a throttled page, the page's frame rate, and the results page."""

from __future__ import annotations

import io
import json
import os
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench._page import DRAWN
from support import (
    PROBE,
    TOLERANCE,
    env_server,
    gated_replay,
    get_json,
    hex_rgb,
    post_session,
    write_checkpoints,
)

ROOT = Path(__file__).resolve().parents[2]
GAMES = ("pacman-rt-v0", "tetris-rt-v0", "snake-rt-v0", "speed-hex-v0", "speed-go-v0")
#: Where the watch-page screenshots of the docs go when set (docs/img).
SHOTS = os.environ.get("RTPLAN_SCREENSHOT_DIR")
#: Each draw of the throttled page takes this long: a server that waited for it would lag
#: ~120 ms more each 33 ms frame, ~3 s by the end of a session.
SLOW_DRAW_MS = 150
#: The calibration output of a shipped planner, under results/ (the results page's test lists it).
CALIBRATION = Path("snake-rt-v0/calibration")


@pytest.fixture(scope="module")
def server(chromium_path, tmp_path_factory):
    """The env server with tiny checkpoints of every game, each game compiled; no planner."""
    tmp = tmp_path_factory.mktemp("web")
    root = write_checkpoints(tmp / "ckpt", GAMES)
    # The figures and table `rtplan calibrate` wrote for the shipped Snake planner.
    shutil.copytree(ROOT / "results" / CALIBRATION, tmp / "results" / CALIBRATION)
    (tmp / "results" / "summary.json").write_text('{"games": 5}')
    # No countdown before a person's frame 0 here: its own tests are in test_web_play.py.
    with env_server(tmp, root, GAMES, "--human-countdown-s", "0") as base:
        yield SimpleNamespace(base=base)


@pytest.fixture(scope="module")
def planner_server(chromium_path, tmp_path_factory):
    """The env server for Speed Hex (budgets 2 and 4) with the real Planner service (on a thread
    of this process) at its `planner_address`, which plans Speed Hex at k=2 only; the env server
    also has a Snake checkpoint, which the planner service does not serve."""
    from support import start_planner, write_planner

    tmp = tmp_path_factory.mktemp("web-planner")
    root = write_checkpoints(tmp / "ckpt", ("speed-hex-v0", "snake-rt-v0"))
    planner = start_planner(
        write_planner(tmp / "planner", "speed-hex-v0", budgets=(2,), simulations=(2,))
    )
    try:
        with env_server(tmp, root, ("speed-hex-v0",), "--planner-address", planner.address) as b:
            yield SimpleNamespace(base=b)
    finally:
        planner.stop()


def test_pages_are_served_beside_the_api(server):
    html = urllib.request.urlopen(f"{server.base}/", timeout=10).read().decode()
    assert "<title>rtplan · lobby</title>" in html and "cdn" not in html.lower()
    watch = urllib.request.urlopen(f"{server.base}/watch?session=x", timeout=10).read().decode()
    assert 'src="/web/watch.js"' in watch
    for name in ("lobby.js", "watch.js", "draw.js", "style.css"):
        text = urllib.request.urlopen(f"{server.base}/web/{name}", timeout=10).read().decode()
        assert "http://" not in text and "https://" not in text  # nothing from elsewhere
    assert get_json(server.base, "/healthz")["status"] == "ok"  # the API still answers


def test_lobby_lists_a_live_session_and_starts_one(server, page):
    live = post_session(server.base, game="snake-rt-v0", agent="reflex", fps=2.0)
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
    page.wait_for_url("**/watch?session=*", timeout=30_000)  # Start opens the game it started
    sid = page.url.split("session=")[1]
    info = get_json(server.base, f"/v1/sessions/{sid}")
    assert (info["game"], info["agent"]) == ("tetris-rt-v0", "reflex")
    assert (info["config"]["fps"], info["config"]["seed"]) == (7.0, 3)
    page.goto(f"{server.base}/")
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
    sid = post_session(server.base, game="tetris-rt-v0", agent="reflex", fps=fps)["id"]
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
    assert get_json(server.base, f"/v1/sessions/{sid}")["viewers"] >= 1


def expected_pieces(state: dict, palette: dict) -> list[tuple[int, int, str, str]]:
    """(row, col, colour, what) for every piece the rendered state places on the board, in the
    colours of the game's drawing module (`palette`)."""
    game, board = state["game"], state["board"]
    out = []
    P = palette
    if game == "pacman-rt-v0":
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
        out += [
            (r, c, P["body"], "body")
            for r, row in enumerate(board)
            for c, ch in enumerate(row)
            if ch == "s"
        ]
        out.append((*state["head"], P["head"], "head"))
        out.append((*state["fruit"], P["fruit"], "fruit"))
    else:
        stones = palette["stones"]
        out += [
            (r, c, stones["xo".index(ch)], f"stone {ch}")
            for r, row in enumerate(board)
            for c, ch in enumerate(row)
            if ch in "xo"
        ]
        if game == "speed-hex-v0":
            empty = palette["empty"]
            out += [
                (r, c, empty, "empty")
                for r, row in enumerate(board)
                for c, ch in enumerate(row)
                if ch == "."
            ]
    return out


def has_pieces(game: str) -> str:
    """A JS condition: the drawn state shows what this game's check needs."""
    if game in ("speed-hex-v0", "speed-go-v0"):  # stones of both colours
        return "s.board.join('').includes('x') && s.board.join('').includes('o')"
    return "s.frame >= 1"


@pytest.mark.parametrize("game", GAMES)
def test_board_shows_the_pieces(server, page, game, tmp_path):
    from PIL import Image

    sid = post_session(server.base, game=game, agent="reflex", fps=4.0)["id"]
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
        stones = palette["stones"]
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


def watch_live(ws_url: str, frames: dict, timeout: float = 60.0) -> None:
    """Collects a session's viewer frames by number until its end message."""
    from websockets.sync.client import connect

    with connect(ws_url, max_size=2**22, open_timeout=30) as ws:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            msg = json.loads(ws.recv(timeout=30))
            if msg["type"] == "frame":
                frames[msg["frame"]] = msg
            elif msg["type"] == "end":
                return


def test_replay_scrubs_to_the_recorded_frame(server, page):
    """A recorded session opens from the lobby's replay list; scrubbing to frame n (slider) and
    stepping to n+1 shows the board the live session showed at those frames."""
    created = post_session(
        server.base, game="tetris-rt-v0", agent="reflex", fps=8.0, max_frames=24, record=True
    )
    ws_url = server.base.replace("http", "ws") + created["viewer_path"]
    live: dict[int, dict] = {}
    watch_live(ws_url, live)
    name = Path(get_json(server.base, f"/v1/sessions/{created['id']}")["replay"]).name
    n = max(live) - 6  # a frame the live viewer saw (it joins a few frames late at most)
    assert n - 1 in live and n + 1 in live, sorted(live)

    page.goto(f"{server.base}/")
    link = page.locator(f'tr[data-replay="{name}"] a')
    link.wait_for(timeout=15_000)
    link.click()
    page.wait_for_url(f"**/watch?replay={name}")
    page.wait_for_function("window.rtplanViewer.frame === 0", timeout=20_000)
    assert page.get_attribute("#scrub", "max") == "24"

    page.evaluate(
        "n => { const s = document.getElementById('scrub'); s.value = String(n);"
        " s.dispatchEvent(new Event('input')); }",
        n,
    )
    page.wait_for_function(f"window.rtplanViewer.frame === {n}", timeout=20_000)
    assert page.evaluate("window.rtplanViewer.state") == live[n]["state"]
    assert page.inner_text("#frame") == str(n)
    palette = page.evaluate("window.rtplanViewer.palette")
    pieces = expected_pieces(live[n]["state"], palette)
    shares = page.evaluate(PROBE, [[r, c, hex_rgb(col), TOLERANCE] for r, c, col, _ in pieces])
    assert min(shares) >= 0.2, list(zip(pieces, shares))
    # The panels show frame n's report: the strip's last entry, and its counters.
    # (A loaded machine may make a reflex frame late: the replay shows the live counts.)
    counts = " / ".join(
        str(live[n]["stats"][k]) for k in ("on_time", "late", "fallback", "invalid")
    )
    assert counts in page.inner_text("#stats")

    page.click("#fwd")
    page.wait_for_function(f"window.rtplanViewer.frame === {n + 1}", timeout=20_000)
    assert page.evaluate("window.rtplanViewer.state") == live[n + 1]["state"]

    page.select_option("#speed", "32")
    page.click("#playpause")  # plays on to the last frame
    page.wait_for_function("window.rtplanViewer.frame === 24", timeout=20_000)
    assert page.evaluate("window.rtplanViewer.state")["frame"] == 24


def test_a_replay_link_opens_at_its_frame_and_the_keys_step(server, page):
    """?frame=N opens a replay at frame N and the address follows; ←/→ step one, Shift ten,
    Home/End to the ends, space plays; an out-of-range frame is clamped with a note; the agent
    is labelled as in the lobby's list; the GIF button links to the replay's GIF."""
    record_dir = Path(get_json(server.base, "/v1/replays")["record_dir"])
    name = gated_replay(record_dir, "gated-web.jsonl").name  # 11 frames: 0 .. 10
    at = "window.rtplanViewer.frame === "
    page.goto(f"{server.base}/watch?replay={name}&frame=4")
    page.wait_for_function(at + "4", timeout=20_000)
    assert page.inner_text("#agent").startswith("planner (gate) ·")
    assert page.get_attribute("#gif", "href") == f"/v1/replays/{name}/gif"
    for key, frame in [("ArrowRight", 5), ("ArrowLeft", 4), ("Shift+ArrowRight", 10)]:
        page.keyboard.press(key)
        page.wait_for_function(at + str(frame), timeout=5_000)
    assert page.url.endswith(f"replay={name}&frame=10")
    page.keyboard.press("Home")
    page.wait_for_function(at + "0", timeout=5_000)
    page.keyboard.press("End")
    page.wait_for_function(at + "10", timeout=5_000)
    page.keyboard.press("Home")
    page.select_option("#speed", "32")
    page.locator("body").click(position={"x": 5, "y": 5})  # focus off the speed field
    page.keyboard.press(" ")  # plays to the end
    page.wait_for_function(at + "10", timeout=10_000)
    page.wait_for_function("location.search.endsWith('frame=10')", timeout=5_000)

    page.goto(f"{server.base}/watch?replay={name}&frame=99")
    page.wait_for_function(at + "10", timeout=20_000)
    assert "frame 99 is out of range" in page.inner_text("#replay-note")
    page.goto(f"{server.base}/")
    row = page.locator(f'tr[data-replay="{name}"]')
    row.wait_for(timeout=15_000)
    assert "planner (gate)" in row.inner_text()


def frame_with(page, condition: str, timeout: float = 20_000) -> dict:
    """The first frame message the page received for which the JS `condition(m)` holds."""
    page.wait_for_function(
        f"window.rtplanViewer.frames.some(m => m.previous && ({condition}))", timeout=timeout
    )
    return page.evaluate(f"window.rtplanViewer.frames.find(m => m.previous && ({condition}))")


def test_human_tetris_keys_move_the_piece_and_missed_frames_fall_back(server, page):
    fps = 3.0
    created = post_session(server.base, game="tetris-rt-v0", agent="human", fps=fps)
    sid = created["id"]
    assert created["session"]["status"] == "waiting"  # until the player's page joins
    page.goto(f"{server.base}/watch?session={sid}#token={created['token']}")
    page.wait_for_function("window.rtplanViewer.player !== null", timeout=20_000)
    assert "left: ←" in page.inner_text("#play-help")

    # Nothing pressed yet: the frame plays the reflex (a fair start), and the page says so.
    frame_with(page, "m.previous.provenance === 'fallback'")
    page.wait_for_function(
        "document.getElementById('play-status').textContent.includes('the reflex steers')",
        timeout=10_000,
    )
    page.keyboard.press("ArrowLeft")
    after = frame_with(
        page, "m.previous.answer_source === 'human' && m.previous.provenance === 'on_time'"
    )
    assert after["previous"]["action"] == 0  # "left"
    before = page.evaluate(
        f"window.rtplanViewer.frames.find(m => m.frame === {after['frame'] - 1})"
    )
    cols = lambda m: [c for _, c in m["state"]["piece_cells"]]  # noqa: E731
    assert before["state"]["piece"] == after["state"]["piece"]
    assert min(cols(after)) == min(cols(before)) - 1, (before["state"], after["state"])
    # From the first key on, a frame with no key plays the fallback, and the page says so.
    page.wait_for_function(
        "document.getElementById('play-status').textContent.includes('no input by the deadline')",
        timeout=10_000,
    )
    stats = get_json(server.base, f"/v1/sessions/{sid}")["stats"]
    assert stats["on_time"] >= 1 and stats["fallback"] >= 1


def test_human_speed_hex_click_places_a_stone_on_a_running_clock(server, page):
    # 0.125 FPS: a clock tick is 250 ms (32 per frame period), the 12-tick clock 3 s.
    created = post_session(server.base, game="speed-hex-v0", agent="human", fps=0.125, seed=0)
    page.goto(f"{server.base}/watch?session={created['id']}#token={created['token']}")
    page.wait_for_function(
        "(() => { const v = window.rtplanViewer;"
        " return v.player && v.state && v.state.to_play === 0; })()",
        timeout=20_000,
    )
    start = page.evaluate("window.rtplanViewer.frame")
    clock = "Number(document.querySelector('#clock-rows span:nth-child(3)').textContent)"
    first = page.evaluate(clock)
    page.wait_for_function(f"{clock} < {first}", timeout=2_000)  # it runs down before the click
    r, c = 5, 3
    page.click(
        "#board", position=dict(zip("xy", page.evaluate(f"window.rtplanViewer.center({r}, {c})")))
    )
    moved = frame_with(page, f"m.frame === {start + 1}", timeout=10_000)
    assert moved["state"]["board"][r][c] == "x", moved["state"]["board"]
    report = moved["previous"]
    assert (report["answer_source"], report["provenance"]) == ("human", "on_time")
    assert report["action"] == r * 11 + c and report["cost"] >= 1
    assert moved["clocks"][0] == 12 - report["cost"]  # the click's thinking time, in ticks


def my_turn(page) -> None:
    page.wait_for_function(
        "(() => { const v = window.rtplanViewer;"
        " return v.player && v.state && v.state.to_play === 0; })()",
        timeout=30_000,
    )


def empty_point(state: dict) -> tuple[int, int]:
    """An empty cell near the middle of a clock game's board."""
    n = len(state["board"])
    near = sorted(
        ((r, c) for r in range(n) for c in range(n)),
        key=lambda p: abs(p[0] - n // 2) + abs(p[1] - n // 2),
    )
    return next((r, c) for r, c in near if state["board"][r][c] == ".")


CLOCK0 = "Number(document.querySelector('#clock-rows span:nth-child(3)').textContent)"


def test_human_speed_go_click_places_a_stone_on_a_running_clock(server, page):
    # 0.125 FPS: a clock tick is 250 ms (32 per frame period), the 300-tick clock 75 s.
    created = post_session(server.base, game="speed-go-v0", agent="human", fps=0.125, seed=0)
    assert created["session"]["config"]["opponent"] == "reflex"  # no planner service here
    page.goto(f"{server.base}/watch?session={created['id']}#token={created['token']}")
    my_turn(page)
    start = page.evaluate("window.rtplanViewer.frame")
    before = page.evaluate(f"window.rtplanViewer.frames.find(m => m.frame === {start})")
    assert "You play black against the reflex" in page.inner_text("#play-help")
    first = page.evaluate(CLOCK0)
    page.wait_for_function(f"{CLOCK0} < {first}", timeout=2_000)  # it runs down before the click
    r, c = empty_point(before["state"])
    colour = before["state"]["to_play_colour"]
    page.click(
        "#board", position=dict(zip("xy", page.evaluate(f"window.rtplanViewer.center({r}, {c})")))
    )
    moved = frame_with(page, f"m.frame === {start + 1}", timeout=10_000)
    assert moved["state"]["board"][r][c] == "xo"[colour], moved["state"]["board"]
    report = moved["previous"]
    assert (report["answer_source"], report["provenance"]) == ("human", "on_time")
    assert report["action"] == r * 9 + c and report["cost"] >= 1
    assert moved["clocks"][0] == before["clocks"][0] - report["cost"]  # the click's thinking
    # The stone is drawn where clicked, in the mover's colour (black or white).
    page.wait_for_function(f"window.rtplanViewer.frame >= {start + 1}", timeout=10_000)
    page.evaluate("window.rtplanViewer.paused = true")
    stone = page.evaluate("window.rtplanViewer.palette.stones")[colour]
    assert page.evaluate(PROBE, [[r, c, hex_rgb(stone), TOLERANCE]])[0] >= 0.2


def test_lobby_offers_only_what_the_planner_service_serves(planner_server, page):
    base = planner_server.base
    page.goto(f"{base}/")
    page.wait_for_function(
        "document.querySelector('select[name=\"game\"]').options.length > 0", timeout=10_000
    )
    planner = page.locator('select[name="agent"] option[value="planner"]')
    page.select_option('select[name="game"]', "snake-rt-v0")
    assert planner.is_disabled()
    assert "does not serve snake-rt-v0" in planner.get_attribute("title")
    assert page.locator('select[name="agent"]').input_value() == "reflex"
    title = page.locator('select[name="game"] option[value="snake-rt-v0"]').get_attribute("title")
    assert "does not serve snake-rt-v0" in title
    # The API refuses it too, before a session starts.
    r = urllib.request.Request(
        f"{base}/v1/sessions",
        data=json.dumps({"game": "snake-rt-v0", "agent": "planner", "k": 2}).encode(),
        headers={"content-type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(r, timeout=30)
    assert refused.value.code == 409
    page.select_option('select[name="game"]', "speed-hex-v0")
    assert planner.is_enabled() and not planner.get_attribute("title")
    k4 = page.locator('select[name="k"] option[value="4"]')
    assert k4.is_disabled() and "does not plan speed-hex-v0 at k=4" in k4.get_attribute("title")
    assert page.locator('select[name="k"]').input_value() == "2"
    page.select_option('select[name="agent"]', "human")
    opponent = page.locator('select[name="opponent"]')
    assert opponent.locator('option[value="planner:4"]').is_disabled()
    assert opponent.input_value() == "planner:2"  # the largest budget the service plans


def test_lobby_offers_an_agent_the_watched_pace_and_a_person_3_plus_2(server, page):
    """A clock game's form says the pace the server gives an agent (`WATCHED`: 1 FPS, 1+1) and
    a person's 3+2 at 9 FPS; a game without a clock goes back to 9 FPS."""
    page.goto(f"{server.base}/")
    page.wait_for_function(
        "document.querySelector('select[name=\"game\"]').options.length > 0", timeout=30_000
    )

    def pace() -> tuple[str, str]:
        fps = page.input_value('input[name="fps"]')
        return fps, page.input_value('select[name="time_control"]')

    page.select_option('select[name="game"]', "speed-hex-v0")
    page.select_option('select[name="agent"]', "reflex")
    assert pace() == ("1", "1+1")
    page.select_option('select[name="agent"]', "human")
    assert pace() == ("9", "3+2")
    page.select_option('select[name="agent"]', "reflex")
    page.select_option('select[name="game"]', "snake-rt-v0")
    assert page.input_value('input[name="fps"]') == "9"


def test_lobby_starts_a_human_speed_hex_game_against_the_planner(planner_server, page):
    base = planner_server.base
    page.goto(f"{base}/")
    page.wait_for_function(
        "document.querySelector('select[name=\"game\"]').options.length > 0", timeout=30_000
    )
    page.select_option('select[name="game"]', "speed-hex-v0")
    page.select_option('select[name="agent"]', "human")
    opponent = page.locator('select[name="opponent"]')
    assert opponent.is_visible()
    labels = opponent.locator("option").all_inner_texts()
    # The gated planner is offered, disabled: this service has no clock gate.
    assert labels == ["planner (gate)", "planner (k=2)", "planner (k=4)", "reflex", "random"]
    assert opponent.locator('option[value="gate"]').is_disabled()
    assert opponent.input_value() == "planner:2"  # the largest budget the service plans
    page.select_option('select[name="opponent"]', "planner:2")
    # A clock tick is 250 ms; a person's clock is the lobby's 3+2: 720 ticks, 8 back a move.
    page.fill('input[name="fps"]', "0.125")
    assert page.input_value('select[name="time_control"]') == "3+2"
    page.click('form#start button[type="submit"]')
    page.wait_for_url("**/watch?session=*", timeout=30_000)  # the lobby opens it; this tab plays
    sid = page.url.split("session=")[1]
    info = get_json(base, f"/v1/sessions/{sid}")
    assert (info["agent"], info["opponent"], info["opponent_k"]) == ("human", "planner", 2)
    lobby = page.context.new_page()  # the lobby lists it, labelled
    try:
        lobby.goto(f"{base}/")
        row = lobby.locator(f'tr[data-session="{sid}"]')
        row.wait_for(timeout=10_000)
        assert row.locator("td").nth(2).inner_text() == "human vs planner k=2"
    finally:
        lobby.close()
    my_turn(page)
    assert "against the planner (k=2)" in page.inner_text("#play-help")
    start = page.evaluate("window.rtplanViewer.frame")
    before = page.evaluate(f"window.rtplanViewer.frames.find(m => m.frame === {start})")
    r, c = empty_point(before["state"])
    page.click(
        "#board", position=dict(zip("xy", page.evaluate(f"window.rtplanViewer.center({r}, {c})")))
    )
    mine = frame_with(page, f"m.frame === {start + 1}", timeout=10_000)
    assert mine["previous"]["answer_source"] == "human" and mine["state"]["board"][r][c] != "."
    # The planner answers at once (no pacing), on its own clock, through the planner service.
    reply = frame_with(page, f"m.frame === {start + 2}", timeout=30_000)
    rep = reply["previous"]
    assert (rep["answer_source"], rep["provenance"], rep["k"]) == ("opponent", "on_time", 2)
    assert rep["latency_ms"] > 0 and rep["cost"] >= 1
    assert rep["credit"] == 8 and mine["state"]["initial_time"] == 720
    assert reply["clocks"][1] == mine["clocks"][1] - rep["cost"] + rep["credit"]
    assert reply["clocks"][0] == mine["clocks"][0]
    page.wait_for_function(
        "document.getElementById('play-status').textContent.includes('(planner k=2')",
        timeout=10_000,
    )
    stats = get_json(base, f"/v1/sessions/{sid}")["stats"]
    assert stats["decisions"] >= 1 and set(stats["k_histogram"]) == {"2"}


def test_a_throttled_page_never_delays_a_tick(server, page):
    """A page whose every draw takes `SLOW_DRAW_MS` (a busy wait before each animation frame's
    callbacks, on the thread that also reads the socket) draws Pac-Man slower than a 30 FPS
    session makes frames; no tick of the session is late (`LATE_TICK_MS`).

    The page is slowed where it is slow, not as a whole: Chrome's 100x CPU throttling of the
    whole page took over 90 s just to load it on a loaded 2-core CI machine, and could then
    stall the DevTools connection for a minute."""
    fps = 30.0
    page.add_init_script(
        "{ const raf = window.requestAnimationFrame.bind(window);"
        " window.requestAnimationFrame = (cb) => raf((t) => {"
        f" const until = performance.now() + {SLOW_DRAW_MS};"
        " while (performance.now() < until) {} cb(t); }); }"
    )
    # A human session starts when the page joins, so the page is slow from frame 0.
    created = post_session(server.base, game="pacman-rt-v0", agent="human", fps=fps)
    page.goto(f"{server.base}/watch?session={created['id']}#token={created['token']}")
    # 150 frames (5 s) are plenty to see the page fall behind; the game need not end.
    page.wait_for_function(
        "window.rtplanViewer.ended || (window.rtplanViewer.frames.at(-1) || {}).frame >= 150",
        timeout=60_000,
    )
    drawn = page.evaluate(DRAWN)
    stats = get_json(server.base, f"/v1/sessions/{created['id']}")["stats"]
    # The page was slow: it skipped frames the session made.
    assert drawn["drawn"] < drawn["received"], drawn
    assert stats["ticks"] >= 20 and stats["late_ticks"] == 0, stats


@pytest.mark.slow
def test_the_page_keeps_up_with_a_30_fps_pacman_session(server, page):
    """The page draws every frame of 30 FPS Pac-Man sessions, each soon after it arrives.

    Slow suite: its lag bounds are the machine's, not the page's (bench/bench_viewer.py measures
    them); `test_a_throttled_page_never_delays_a_tick` keeps the behaviour in the default suite.

    Pac-Man sessions of the tiny test network end within ~28 frames, so the page plays three
    (agent "human", no key pressed: each starts when the page joins, and no frame is missed).
    """
    fps, runs = 30.0, []
    for seed in range(3):
        created = post_session(server.base, game="pacman-rt-v0", agent="human", fps=fps, seed=seed)
        page.goto(f"{server.base}/watch?session={created['id']}#token={created['token']}")
        page.wait_for_function("window.rtplanViewer.ended", timeout=30_000)
        page.wait_for_timeout(100)  # the end message's draw
        runs.append(page.evaluate(DRAWN))
    print(f"page at {fps:.0f} FPS Pac-Man: {runs}")
    refreshes_2 = 2 * 1000 / 60 + 10  # two display refreshes, and 10 ms of timer slack
    for got in runs:
        assert got["received"] >= 20 and got["lastDrawn"] == got["last"], got
        # Frames are on screen (themselves, or a newer one that came with them) within two
        # display refreshes of arriving: the page does not fall behind the socket. A loaded
        # 2-core CI box may stall the browser once (a 78 ms pause was seen in CI), so a single
        # frame's lag is bounded loosely here; the exact figures are bench/bench_viewer.py's.
        assert got["lagP50"] <= refreshes_2 and got["lagMax"] <= 250, got
    # At least one whole session has no frame later than two refreshes.
    assert min(g["lagMax"] for g in runs) <= refreshes_2, runs
    # Frames that come a period apart are each drawn: the draw rate follows the session's.
    best = max(runs, key=lambda g: g["drawnPerS"])
    assert best["drawnPerS"] >= 0.5 * fps, runs


def test_results_page_lists_the_calibration_figures(server, page):
    listed = get_json(server.base, "/v1/results")["groups"]
    titles = [g["title"] for g in listed]
    assert titles == ["results", "snake-rt-v0 · calibration"], titles
    page.goto(f"{server.base}/")
    page.click("text=results")
    # Each game's section and each of its folders fold to a line; a click opens them.
    page.locator("section[data-game='snake-rt-v0'] > details > summary").click()
    section = page.locator('details[data-group="snake-rt-v0 · calibration"]')
    section.locator("> summary").click()
    img = section.locator("img")
    assert img.get_attribute("src").endswith("/calibration.png")
    caption = section.locator("figcaption").inner_text()
    assert "made by rtplan calibrate --game snake-rt-v0" in caption
    page.wait_for_function(
        "document.querySelector('details[data-group] img').naturalWidth > 0", timeout=10_000
    )
    rows = (ROOT / "results" / CALIBRATION / "calibration.csv").read_text().strip().splitlines()
    table = section.locator('details[data-file="calibration.csv"] tr')
    assert table.count() == len(rows)
    assert table.first.locator("th").all_inner_texts() == rows[0].split(",")
    page.locator("section[data-game='results'] > details > summary").click()
    assert "summary.json" in page.inner_text('details[data-group="results"]')
