"""The pages a newcomer meets, in a real headless Chromium (issue 43, "the pages"): a game joined
mid-way shows the game so far, the clocks sit beside the board with each player's colour and
honest move times, the Hex board is labelled, a person's game speaks to them and starts fairly,
the lobby starts what is ready and opens it, and /results leads with what was pre-registered."""

# ruff: noqa: F811 (the browser fixtures of conftest.py are the tests' arguments)
from __future__ import annotations

import re
import time
from types import SimpleNamespace

import pytest

from support import (
    env_server,
    get_json,
    hex_rgb,
    post_session,
    start_planner,
    write_checkpoints,
    write_planner,
)

GAMES = ("speed-hex-v0", "snake-rt-v0")


@pytest.fixture(scope="module")
def server(chromium_path, tmp_path_factory):
    """The env server for Speed Hex and Snake, with the real Planner service (a thread of this
    process) planning Speed Hex at k=2."""
    tmp = tmp_path_factory.mktemp("web-pages")
    root = write_checkpoints(tmp / "ckpt", GAMES)
    planner = start_planner(
        write_planner(tmp / "planner", "speed-hex-v0", budgets=(2,), simulations=(2,))
    )
    try:
        flags = ("--planner-address", planner.address, "--human-countdown-s", "1")
        with env_server(tmp, root, GAMES, *flags) as base:
            yield SimpleNamespace(base=base, tmp=tmp)
    finally:
        planner.stop()


def wait_frame(base: str, sid: str, at_least: int, timeout: float = 60.0) -> dict:
    """The session's details once it has played `at_least` frames."""
    deadline = time.monotonic() + timeout
    while (info := get_json(base, f"/v1/sessions/{sid}"))["frame"] < at_least:
        assert info["status"] in ("waiting", "running"), info
        assert time.monotonic() < deadline, info
        time.sleep(0.1)
    return info


def planner_hex(base: str, **body) -> dict:
    """A Speed Hex session of the planner at k=2 against the reflex."""
    return post_session(base, game="speed-hex-v0", agent="planner", k=2, opponent="reflex", **body)


def test_a_game_joined_mid_way_shows_the_game_so_far(server, page):
    sid = planner_hex(server.base, fps=4.0, featured=True)["id"]
    joined_at = wait_frame(server.base, sid, 8)["frame"]
    page.goto(f"{server.base}/tv")
    page.wait_for_function(
        f"window.rtplanViewer.tv.session === '{sid}' && window.rtplanViewer.frame !== null",
        timeout=20_000,
    )
    page.wait_for_timeout(300)  # the next draw of the panels
    thinking = page.evaluate("({...window.rtplanViewer.thinking})")
    # The planner's decisions from the game's start, not from the join (its first move may be
    # the fallback when a loaded machine makes the first search late: then it decides at 2).
    assert thinking["decisions"][0] <= 2 < joined_at and len(thinking["decisions"]) >= 2, thinking
    moves = page.locator("#moves li")
    assert moves.count() >= joined_at
    assert moves.first.get_attribute("data-frame") == "0"
    assert "no planner" not in page.inner_text("#k")
    assert page.inner_text("#k").startswith("2 (frame")
    assert page.locator("#clocks").is_visible()


KCHART_PIXELS = """([left, rgb, tol]) => {
    const canvas = document.getElementById('kchart'), ctx = canvas.getContext('2d');
    const dpr = canvas.width / Number(canvas.dataset.w), cut = Math.round(left * dpr);
    const d = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
    const n = [0, 0];
    for (let i = 0; i < d.length; i += 4) {
        const like = Math.abs(d[i] - rgb[0]) <= tol && Math.abs(d[i + 1] - rgb[1]) <= tol &&
                     Math.abs(d[i + 2] - rgb[2]) <= tol;
        if (like) n[((i / 4) % canvas.width) < cut ? 0 : 1]++;
    }
    return n;
}"""


def test_the_k_charts_labels_sit_beside_its_bars(server, page):
    sid = planner_hex(server.base, fps=4.0)["id"]
    page.goto(f"{server.base}/watch?session={sid}")
    page.wait_for_function("window.rtplanViewer.thinking.decisions.length >= 2", timeout=30_000)
    page.wait_for_timeout(300)  # the next draw of the panels
    left = page.evaluate("import('/web/panels.js').then(m => m.KCHART_GUTTER)")
    bars = page.evaluate(KCHART_PIXELS, [left, hex_rgb("#4fb3ff"), 8])
    labels = page.evaluate(KCHART_PIXELS, [left, hex_rgb("#dde3ea"), 60])
    assert bars[0] == 0 and bars[1] > 0, bars  # no bar in the label column
    assert labels[0] > 0, labels  # "k=2" is written there


def test_the_clocks_sit_beside_the_board_above_the_fold(server, browser):
    tab = browser.new_page()
    tab.set_viewport_size({"width": 1280, "height": 900})
    try:
        sid = post_session(server.base, game="speed-hex-v0", agent="reflex", fps=2.0)["id"]
        tab.goto(f"{server.base}/watch?session={sid}")
        tab.wait_for_function("window.rtplanViewer.frame !== null", timeout=20_000)
        tab.locator("#clocks").wait_for(timeout=10_000)
        tab.wait_for_timeout(300)
        board = tab.locator("#board").bounding_box()
        clocks = tab.locator("#clocks").bounding_box()
        assert clocks["x"] >= board["x"] + board["width"], (board, clocks)  # beside it
        assert clocks["y"] + clocks["height"] <= 900, clocks  # above the fold
        # Nothing runs off the screen's right edge.
        assert tab.evaluate("document.documentElement.scrollWidth") == 1280
    finally:
        tab.close()


#: The clock rows: [label, the bar's colour as rgb(), the move-cost line].
CLOCKS = """() => [...document.querySelectorAll('#clock-rows .bar')].map(b => [
    b.previousElementSibling.textContent, getComputedStyle(b.firstElementChild).backgroundColor,
])"""


def test_move_times_are_never_negative_and_each_clock_has_its_players_colour(server, page):
    # An increment far over what a reflex move costs: the clock grows at each move.
    sid = post_session(
        server.base, game="speed-hex-v0", agent="reflex", fps=2.0, time_s=60, increment_s=10
    )["id"]
    page.goto(f"{server.base}/watch?session={sid}")
    page.wait_for_function("window.rtplanViewer.frame >= 3", timeout=30_000)
    page.wait_for_timeout(300)
    text = page.inner_text("#move-cost")
    assert re.match(r"last move took \d+\.\d s \((agent|opponent)\)", text), text
    rows = page.evaluate(CLOCKS)
    stones = page.evaluate("window.rtplanViewer.palette.stones")
    names = get_json(server.base, "/v1/games")["games"]
    colour_names = next(g for g in names if g["id"] == "speed-hex-v0")["view"]["colour_names"]
    for label, colour in rows:
        # "agent (red)": the bar has the red stones' colour.
        which = next(i for i, n in enumerate(colour_names) if f"({n})" in label)
        assert colour == "rgb({}, {}, {})".format(*hex_rgb(stones[which])), (label, colour)


#: The share of the pixels around (x, y) (CSS pixels of the board) in colour [r, g, b] (+-40).
AROUND = """([x, y, rgb]) => {
    const c = document.getElementById('board'), dpr = c.width / window.rtplanViewer.layout.width;
    const d = c.getContext('2d').getImageData(Math.round((x - 6) * dpr), Math.round((y - 6) * dpr),
                                             Math.round(12 * dpr), Math.round(12 * dpr)).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4)
        if (Math.abs(d[i] - rgb[0]) <= 40 && Math.abs(d[i + 1] - rgb[1]) <= 40 &&
            Math.abs(d[i + 2] - rgb[2]) <= 40) n++;
    return n / (d.length / 4);
}"""


def test_the_hex_board_is_labelled_as_its_moves_are_named(server, page):
    sid = post_session(server.base, game="speed-hex-v0", agent="reflex", fps=2.0)["id"]
    page.goto(f"{server.base}/watch?session={sid}")
    page.wait_for_function("window.rtplanViewer.frame !== null", timeout=20_000)
    page.wait_for_timeout(300)
    spec = next(g for g in get_json(server.base, "/v1/games")["games"] if g["id"] == "speed-hex-v0")
    board = spec["view"]["board"]
    labels = page.evaluate("window.rtplanViewer.layout.labels") or []
    assert sorted(t for t, _, _ in labels) == sorted([*board["columns"], *board["rows"]])
    ink = list(hex_rgb(page.evaluate("window.rtplanViewer.palette.label")))
    for text, x, y in labels:
        assert page.evaluate(AROUND, [x, y, ink]) > 0.02, text  # painted, not just listed
    # A cell's name (the move list's "f6") is its column's letter over it and its row's number
    # beside its row.
    r, c = 2, 5
    name = spec["action_names"][board["actions"][r][c]]
    assert name == f"{board['columns'][c]}{board['rows'][r]}"
    cx, cy = page.evaluate(f"window.rtplanViewer.center(0, {c})")
    top = next(lab for lab in labels if lab[0] == board["columns"][c])
    assert abs(top[1] - cx) < 1 and top[2] < cy


def play(page, base: str, created: dict) -> None:
    """Opens the watch page as the session's player (the token in the address)."""
    page.goto(f"{base}/watch?session={created['id']}#token={created['token']}")
    page.wait_for_function("window.rtplanViewer.player !== null", timeout=30_000)


def test_a_persons_game_speaks_to_them(server, page):
    # Snake: the person takes the snake over, it runs into a wall; the banner says what *you*
    # scored.
    created = post_session(server.base, game="snake-rt-v0", agent="human", fps=9.0)
    play(page, server.base, created)
    page.wait_for_function("window.rtplanViewer.frame >= 1", timeout=20_000)
    page.keyboard.press("ArrowUp")
    page.wait_for_function("window.rtplanViewer.ended", timeout=60_000)
    page.wait_for_function("!document.getElementById('result').hidden", timeout=5_000)
    assert page.inner_text("#result").startswith("you scored"), page.inner_text("#result")

    # Speed Hex against the planner: its value is shown for you (its own, negated).
    created = post_session(
        server.base,
        game="speed-hex-v0",
        agent="human",
        opponent="planner",
        opponent_k=2,
        fps=0.125,
    )
    play(page, server.base, created)
    page.wait_for_function(
        "(() => { const v = window.rtplanViewer; return v.state && v.state.to_play === 0; })()",
        timeout=30_000,
    )
    state = page.evaluate("window.rtplanViewer.state")
    n = len(state["board"])
    r, c = next((r, c) for r in range(n) for c in range(n) if state["board"][r][c] == ".")
    xy = page.evaluate(f"window.rtplanViewer.center({r}, {c})")
    page.click("#board", position=dict(zip("xy", xy)))
    page.wait_for_function(
        "window.rtplanViewer.frames.some(m => m.previous && m.previous.decision)", timeout=60_000
    )
    page.wait_for_function("window.rtplanViewer.thinking.value !== null", timeout=10_000)
    decision = page.evaluate(
        "window.rtplanViewer.frames.filter(m => m.previous && m.previous.decision)"
        ".at(-1).previous.decision"
    )
    assert page.inner_text("#value").endswith("for you"), page.inner_text("#value")
    assert "for you" in page.get_attribute("#evalbar", "title")
    assert page.evaluate("window.rtplanViewer.thinking.value") == pytest.approx(-decision["value"])
    said = page.inner_text("#thinking") + page.inner_text("#clocks") + page.inner_text("#moves")
    said += " ".join(page.locator("#moves li").evaluate_all("els => els.map(e => e.title)"))
    assert "agent" not in said and "you (" in page.inner_text("#clocks"), said


def test_a_person_who_presses_nothing_does_not_lose_before_they_could_react(server, page):
    # Snake at seed 0 starts two cells from a wall, heading into it: the game's fallback (keep
    # heading) would end it 3 frames after the countdown. Until the first key the reflex steers.
    fps = 9.0
    created = post_session(server.base, game="snake-rt-v0", agent="human", fps=fps, seed=0)
    play(page, server.base, created)
    page.wait_for_function(
        "window.rtplanViewer.frame >= 12 || window.rtplanViewer.ended", timeout=30_000
    )
    assert not page.evaluate("window.rtplanViewer.ended"), page.inner_text("#status")
    assert get_json(server.base, f"/v1/sessions/{created['id']}")["status"] == "running"
    assert "the reflex steers" in page.inner_text("#play-status")
    reports = page.evaluate(
        "window.rtplanViewer.frames.filter(m => m.previous).map(m => m.previous)"
    )
    assert {r["provenance"] for r in reports} == {"fallback"}
    # The first key takes over: from then on the session's fallback rules, as for any agent.
    # The key counts as the first whether its frame takes it on time or it lands late (a loaded
    # machine's page can be a frame behind): either way a frame reports what it received, the
    # late one as a LATE report of the frame it missed, carried by the next frame message.
    page.keyboard.press("ArrowUp")
    took = "window.rtplanViewer.frames.flatMap(m => [m.previous, ...m.late])" + (
        ".filter(r => r && r.provenance !== 'fallback')"
    )
    page.wait_for_function(f"{took}.length > 0 || window.rtplanViewer.ended", timeout=20_000)
    took = page.evaluate(took)
    assert took and took[0]["provenance"] in ("on_time", "late", "invalid"), took
    sent = page.evaluate("window.rtplanViewer.sent[0].action")
    assert took[0]["provenance"] != "late" or took[0]["received_action"] == sent, took
    page.wait_for_function(  # the next frame's line
        "!document.getElementById('play-status').textContent.includes('the reflex steers')",
        timeout=5_000,
    )


def test_the_lobby_starts_a_ready_game_opens_it_and_offers_a_rematch(server, page):
    page.goto(f"{server.base}/")
    page.wait_for_function(
        "document.querySelectorAll('form.start select[name=game] option').length > 0",
        timeout=20_000,
    )
    # Only Speed Hex has a planner here: the form offers it, not the first game listed.
    assert page.input_value('select[name="game"]') == "speed-hex-v0"
    # No empty k selector: k shows only for the planner, with its budgets.
    k = page.locator('select[name="k"]')
    for game in ("snake-rt-v0", "speed-hex-v0"):
        page.select_option('select[name="game"]', game)
        for agent in ("reflex", "planner", "human"):
            if page.locator(f'select[name="agent"] option[value="{agent}"]').is_disabled():
                continue
            page.select_option('select[name="agent"]', agent)
            assert not k.is_visible() or k.locator("option").count() > 0, (game, agent)
    page.select_option('select[name="game"]', "snake-rt-v0")
    page.select_option('select[name="agent"]', "reflex")
    page.fill('input[name="max_frames"]', "5")
    page.fill('input[name="fps"]', "20")
    page.click('form#start button[type="submit"]')
    page.wait_for_url("**/watch?session=*", timeout=30_000)  # Start opens the game
    first = page.url.split("session=")[1]
    page.wait_for_function("window.rtplanViewer.ended", timeout=30_000)
    rematch = page.locator("#rematch")
    rematch.wait_for(timeout=5_000)
    assert page.locator("#after a[href='/']").is_visible()  # and a new game
    rematch.click()
    page.wait_for_url(lambda url: "session=" in url and first not in url, timeout=30_000)
    second = page.url.split("session=")[1]
    a, b = (get_json(server.base, f"/v1/sessions/{s}")["config"] for s in (first, second))
    assert a == b  # the same game and settings


def test_every_column_of_the_lobby_tables_is_reachable_on_a_phone(server, browser):
    post_session(server.base, game="snake-rt-v0", agent="reflex", fps=1.0)
    tab = browser.new_page()
    tab.set_viewport_size({"width": 390, "height": 844})
    # A phone, as Chromium emulates one: the page's viewport meta tag rules its layout width.
    metrics = {"width": 390, "height": 844, "deviceScaleFactor": 3, "mobile": True}
    browser.new_cdp_session(tab).send("Emulation.setDeviceMetricsOverride", metrics)
    try:
        tab.goto(f"{server.base}/")
        tab.locator("#sessions tbody tr").first.wait_for(timeout=10_000)
        # Scroll each table's box to its right end: its last column is then on the screen.
        right = tab.evaluate(
            """() => [...document.querySelectorAll('#sessions, #replays')].map(t => {
                let box = t;
                while (box && getComputedStyle(box).overflowX !== 'auto') box = box.parentElement;
                if (!box) return 9999;
                box.scrollLeft = box.scrollWidth;
                const th = t.querySelector('thead th:last-child');
                return th.getBoundingClientRect().right;
            })"""
        )
        assert all(r <= 390 for r in right), right
        assert tab.evaluate("document.documentElement.scrollWidth") == 390
    finally:
        tab.close()
