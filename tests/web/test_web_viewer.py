"""The viewer's thinking, TV page, paged lobby and phone layout in a real headless Chromium: the
gate's strip and the evaluation bar follow the decisions' values, a Hex replay's move list
jumps, /tv follows the next game and a finished session keeps its last board and result, the
lobby pages its lists, and the pages fit a 390 x 844 screen."""

# ruff: noqa: F811 (the browser fixtures of test_web.py, imported, are the tests' arguments)
from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from support import REPLAY_V1, env_server, get_json, post_session, session_ended, write_checkpoints

GAMES = ("snake-rt-v0", "speed-hex-v0")
#: Seconds /tv shows a live game before the next one's turn (the server's --tv-turn-s).
TV_TURN_S = 3.0


@pytest.fixture(scope="module")
def server(chromium_path, tmp_path_factory):  # noqa: F811
    """The env server with tiny checkpoints of Snake and Speed Hex, both compiled; no planner;
    /tv gives each live game turns of `TV_TURN_S`."""
    tmp = tmp_path_factory.mktemp("web-viewer")
    root = write_checkpoints(tmp / "ckpt", GAMES)
    with env_server(tmp, root, GAMES, "--tv-turn-s", str(TV_TURN_S)) as base:
        # The server makes it on its first recording; tests that write replays themselves may
        # run first.
        (tmp / "replays").mkdir(exist_ok=True)
        yield SimpleNamespace(base=base, record_dir=tmp / "replays")


def decided_replay(base: str, folder: Path, name: str) -> tuple[Path, list[int]]:
    """`REPLAY_V1` (Snake, 10 frames) as if a gated planner had played it: options of 2 frames,
    the gate sure of the smallest budget with value 1 over frames 0-3, of the largest with value
    8 from frame 4, each option's first frame following the last search's plan (committed
    "plan"); the header's game description is the server's (its budgets). Returns the file and
    the budgets."""
    spec = next(g for g in get_json(base, "/v1/games")["games"] if g["id"] == "snake-rt-v0")
    spec.pop("planner")
    budgets = spec["budgets"]
    lines = [json.loads(x) for x in REPLAY_V1.read_text().splitlines()]
    header = lines[0]
    header["settings"] = {**header["settings"], "agent": "planner", "ks": []}
    header["gated"] = True
    header["spec"] = spec
    K = len(budgets)
    for line in lines[1:]:
        if line["type"] != "frame":
            continue
        late = line["frame"] >= 4
        probs = [0.0] * K
        probs[-1 if late else 0] = 0.8
        probs[0 if late else -1] += 0.2
        k = budgets[-1] if late else budgets[0]
        decision_frame = line["frame"] - line["frame"] % 2
        line["source"] = "plan" if line["frame"] == decision_frame else "planned"
        line["k"] = k
        line["decision"] = {
            "frame": decision_frame,
            "k": k,
            "gated": True,
            "probabilities": probs,
            "value": 8.0 if late else 1.0,
        }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path, budgets


#: The share of the pixels of canvas `id`'s column x (CSS pixels) in colour [r, g, b] (+-24).
COLUMN = """([id, x, rgb]) => {
    const c = document.getElementById(id), dpr = c.width / c.clientWidth;
    const d = c.getContext('2d').getImageData(Math.round(x * dpr), 0, 1, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4)
        if (Math.abs(d[i] - rgb[0]) <= 24 && Math.abs(d[i + 1] - rgb[1]) <= 24 &&
            Math.abs(d[i + 2] - rgb[2]) <= 24) n++;
    return n / (d.length / 4);
}"""

#: A colour of the page as [r, g, b] (the budgets' colours are hsl()).
RGB = """(css) => {
    const c = document.createElement('canvas').getContext('2d');
    c.fillStyle = css; c.fillRect(0, 0, 1, 1);
    return Array.from(c.getImageData(0, 0, 1, 1).data.slice(0, 3));
}"""


def test_the_gate_strip_and_the_evaluation_bar_follow_the_decisions(server, page):
    path, budgets = decided_replay(server.base, server.record_dir, "decided.jsonl")
    name = path.name
    at = "window.rtplanViewer.frame === "
    page.goto(f"{server.base}/watch?replay={name}&frame=3")
    page.wait_for_function(at + "3", timeout=20_000)
    page.wait_for_timeout(200)  # the next draw of the panels
    low = page.evaluate("({...window.rtplanViewer.thinking})")
    assert low["value"] == 1.0 and low["k"] == budgets[0], low
    small, large = (page.evaluate(RGB, f"hsl({h}, 70%, {lt}%)") for h, lt in ((210, 58), (10, 52)))
    width = 334
    last_column = width * 3 / 118 - 1  # frame 3's column of the strip (a column per frame)
    assert page.evaluate(COLUMN, ["gatechart", last_column, small]) >= 0.7
    assert page.evaluate(COLUMN, ["gatechart", last_column, large]) <= 0.25
    assert f"k={budgets[0]} at p 0.80" in page.inner_text("#gate")
    green = [0x5B, 0xD6, 0x8A]
    bar_low = page.evaluate(COLUMN, ["evalbar", 7, green])
    # The provenance strip: each option's committed frame in the plan's colour, in the legend.
    step = width / 118
    teal = page.evaluate(RGB, "#2e9e8f")
    shares = [page.evaluate(COLUMN, ["strip", (i + 0.4) * step, teal]) for i in range(3)]
    assert max(shares) >= 0.9 and min(shares) <= 0.1, shares  # plan, planned, plan
    assert "plan" in page.inner_text("#legend").split()

    page.keyboard.press("End")  # frame 10: the last decision, value 8, the largest budget
    page.wait_for_function(at + "10", timeout=10_000)
    page.wait_for_timeout(200)
    high = page.evaluate("({...window.rtplanViewer.thinking})")
    assert high["value"] == 8.0 and high["k"] == budgets[-1] and high["share"] > low["share"]
    column = width * 9 / 118 - 1  # frame 9's column: the gate sure of the largest budget
    assert page.evaluate(COLUMN, ["gatechart", column, large]) >= 0.7
    bar_high = page.evaluate(COLUMN, ["evalbar", 7, green])
    assert bar_high > bar_low + 0.5, (bar_low, bar_high)  # value 1 of 8.4, then 8 of 8.4
    assert "value" in page.inner_text("#thinking") and page.inner_text("#value") == "8.0"
    # The k chart labels the budgets (an index scale: every budget a row).
    assert page.evaluate("document.getElementById('gate-legend').textContent") == "".join(
        f"k={k}" for k in budgets
    )


def test_a_hex_replay_lists_its_moves_and_a_click_jumps_to_one(server, page):
    created = post_session(
        server.base, game="speed-hex-v0", agent="reflex", fps=50.0, max_frames=12, record=True
    )
    sid = created["id"]
    name = Path(session_ended(server.base, sid, timeout=60)["replay"]).name
    page.goto(f"{server.base}/watch?replay={name}")
    page.wait_for_function("window.rtplanViewer.frame === 0", timeout=20_000)
    moves = page.locator("#moves li")
    moves.first.wait_for(timeout=10_000)
    assert moves.count() == 12
    index = get_json(server.base, f"/v1/replays/{name}")
    names = index["hello"]["spec"]["action_names"]
    fifth = index["frames"][5]["previous"]  # frame 4's report: the fifth move
    colours = index["hello"]["spec"]["view"]["colour_names"]
    assert moves.nth(4).inner_text() == f"{colours[0]} {names[fifth['action']]}"  # even plies
    moves.nth(4).click()
    page.wait_for_function("window.rtplanViewer.frame === 5", timeout=10_000)
    assert "current" in moves.nth(4).get_attribute("class")
    board = page.evaluate("window.rtplanViewer.state.board")
    r, c = divmod(fifth["action"], len(board))
    assert board[r][c] == "x"
    page.keyboard.press("End")
    page.wait_for_function("!document.getElementById('result').hidden", timeout=10_000)
    assert "(max frames)" in page.inner_text("#result")


def test_tv_follows_the_next_game_and_a_finished_game_keeps_its_board(server, page):
    first = post_session(server.base, game="snake-rt-v0", agent="reflex", fps=10.0, max_frames=15)
    page.goto(f"{server.base}/tv")
    page.wait_for_function(
        f"window.rtplanViewer.tv.session === '{first['id']}' && window.rtplanViewer.frame !== null",
        timeout=20_000,
    )
    assert page.inner_text("#title").startswith("TV · snake-rt-v0")
    page.wait_for_function("window.rtplanViewer.ended", timeout=20_000)
    page.wait_for_function("!document.getElementById('result').hidden", timeout=5_000)
    assert page.inner_text("#result").startswith("the agent scored")
    # The next game (featured: the demo's) follows once the result has been on screen.
    second = post_session(server.base, game="speed-hex-v0", agent="reflex", fps=4.0, featured=True)
    t0 = time.monotonic()
    page.wait_for_function(
        f"window.rtplanViewer.tv.session === '{second['id']}'"
        " && window.rtplanViewer.frame !== null",
        timeout=20_000,
    )
    print(f"/tv switched {time.monotonic() - t0:.1f} s after the next game started")
    assert page.inner_text("#title").startswith("TV · speed-hex-v0")
    assert page.evaluate("window.rtplanViewer.tv.shown") == 2
    assert page.locator("#result").is_hidden()

    # A finished session's own page shows its last board and its result, not a blank board.
    page.goto(f"{server.base}/watch?session={first['id']}")
    page.wait_for_function(
        "window.rtplanViewer.state !== null && window.rtplanViewer.ended", timeout=20_000
    )
    final = get_json(server.base, f"/v1/sessions/{first['id']}")
    assert page.evaluate("window.rtplanViewer.frame") == final["frame"]
    assert page.inner_text("#result").startswith("the agent scored")
    assert page.inner_text("#frame") == str(final["frame"])


#: Samples, at every animation frame of the TV page, whose game each part of the page shows:
#: the title's session, the board's, the panels' (their frame number), and that number against
#: the frame the page drew last.
TV_SAMPLES = """() => {
    window.tvSamples = [];
    const sample = () => {
        const frame = document.getElementById('frame');
        const title = document.getElementById('title').textContent.match(/^TV · \\S+ · (\\S+)$/);
        window.tvSamples.push({
            title: title ? title[1] : null,
            board: document.getElementById('board').dataset.session || null,
            panels: frame.dataset.session || null,
            frameText: frame.textContent,
            frame: window.rtplanViewer.frame,
            tuned: window.rtplanViewer.tv.session,
        });
        requestAnimationFrame(sample);
    };
    requestAnimationFrame(sample);
}"""


def test_tv_shows_the_live_games_in_turn_and_never_one_games_numbers_over_another(server, page):
    # Snake (seed 1: 200 frames, 25 s) and Speed Hex (118 frames, 20 s) live together.
    snake = post_session(server.base, game="snake-rt-v0", agent="reflex", fps=8.0, seed=1)
    hex_ = post_session(server.base, game="speed-hex-v0", agent="reflex", fps=6.0)
    ours = {snake["id"], hex_["id"]}
    try:
        page.goto(f"{server.base}/tv")
        page.evaluate(TV_SAMPLES)
        # In turn: one, the other, and the first again (a turn is TV_TURN_S).
        page.wait_for_function(
            f"""(() => {{
                const on = window.tvSamples.filter(s => s.frame !== null).map(s => s.tuned);
                const turns = on.filter((id, i) => i === 0 || id !== on[i - 1]);
                const ours = turns.filter(id => {sorted(ours)!r}.includes(id));
                return new Set(ours).size === 2 && ours.length >= 3;
            }})()""",
            timeout=4 * 6_000 * TV_TURN_S,
        )
        samples = page.evaluate("window.tvSamples")
    finally:
        for created in (snake, hex_):
            req = urllib.request.Request(
                f"{server.base}/v1/sessions/{created['id']}",
                method="DELETE",
                headers={"Authorization": f"Bearer {created['token']}"},
            )
            urllib.request.urlopen(req, timeout=30)
    drawn = [s for s in samples if s["frameText"] != "–"]
    assert len(drawn) > 10 and {s["panels"] for s in drawn} >= ours
    for s in samples:
        # Numbers on screen are the drawn frame's, of the game whose board and title show.
        if s["frameText"] != "–":
            assert s["frameText"] == str(s["frame"]), s
            assert s["panels"] == s["board"] == s["title"], s
        if s["board"] is not None:
            assert s["board"] == s["title"], s


def test_the_lobby_pages_its_lists_live_first(server, page):
    for i in range(22):  # more than a page (20) of replays, newest first
        path = server.record_dir / f"snake-rt-v0_page{i:04d}.jsonl"
        path.write_text(REPLAY_V1.read_text())
    live = post_session(server.base, game="snake-rt-v0", agent="reflex", fps=1.0)
    page.goto(f"{server.base}/")
    first = page.locator("#sessions tbody tr").first
    first.wait_for(timeout=10_000)
    assert first.get_attribute("data-session") == live["id"]  # live first
    page.locator("#replays tbody tr").first.wait_for(timeout=10_000)
    total = get_json(server.base, "/v1/replays?limit=1")["total"]
    assert page.locator("#replays tbody tr").count() == 20
    assert page.inner_text("#replays-pager [data-range]") == f"1–20 of {total}"
    page.click("#replays-pager [data-step='1']")
    page.wait_for_function(
        f"document.querySelector('#replays-pager [data-range]').textContent === "
        f"'21–{min(40, total)} of {total}'",
        timeout=10_000,
    )
    page.select_option("#sessions-status", "ended")
    page.wait_for_function(
        f"!document.querySelector('tr[data-session=\"{live['id']}\"]')", timeout=10_000
    )


@pytest.mark.parametrize("where", ["watch", "replay", "tv"])
def test_the_pages_fit_a_phone(server, browser, where):  # noqa: F811
    tab = browser.new_page()
    tab.set_viewport_size({"width": 390, "height": 844})
    try:
        if where == "replay":
            name = decided_replay(server.base, server.record_dir, "phone.jsonl")[0].name
            tab.goto(f"{server.base}/watch?replay={name}")
        else:
            sid = post_session(server.base, game="speed-hex-v0", agent="reflex", fps=2.0)["id"]
            tab.goto(
                f"{server.base}/watch?session={sid}" if where == "watch" else f"{server.base}/tv"
            )
        tab.wait_for_function("window.rtplanViewer.frame !== null", timeout=20_000)
        tab.wait_for_timeout(300)
        wide = tab.evaluate(
            "() => [document.documentElement.scrollWidth, ...[...document.querySelectorAll("
            "'body *')].filter(e => e.getBoundingClientRect().right > 391)"
            ".map(e => e.id || e.tagName)]"
        )
        assert wide == [390], wide
        board = tab.locator("#board").bounding_box()
        bar = tab.locator("#evalbar").bounding_box()
        side = tab.locator(".side").bounding_box()
        assert board["y"] < side["y"] and bar["y"] < side["y"]  # the board and its bar first
        assert abs(bar["height"] - board["height"]) <= 2
    finally:
        tab.close()


def test_the_lobby_fits_a_phone(server, browser):  # noqa: F811
    tab = browser.new_page()
    tab.set_viewport_size({"width": 390, "height": 844})
    try:
        tab.goto(f"{server.base}/")
        tab.wait_for_function(
            "document.querySelectorAll('form.start select[name=game] option').length > 0",
            timeout=20_000,
        )
        # Wide tables scroll in their own box; nothing else is wider than the screen.
        assert tab.evaluate("document.documentElement.scrollWidth") == 390
        start = tab.locator("form.start button[type=submit]").bounding_box()
        assert start["x"] + start["width"] <= 390
    finally:
        tab.close()
