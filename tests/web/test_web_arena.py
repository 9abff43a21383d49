"""The arena's pages in a real headless Chromium: a real env server process and the arena (on a
thread, the `smoke` seed set), filled through the real API (a reference run the arena plays
itself, an agent's run over the Env API), then what a person reads checked against the API's
own numbers: the leaderboard, an agent's page with its figure and replays, and the env server's
lobby showing a ranked episode while it plays."""

# ruff: noqa: F811 (the browser fixtures of conftest.py are the tests' arguments)
from __future__ import annotations

import concurrent.futures
import json
import time
import urllib.error
import urllib.request
from decimal import ROUND_HALF_UP, Decimal
from types import SimpleNamespace

import pytest

from rtplan.arena import ArenaSettings, Repository, create_app, ranked
from support import AgentStream, env_server, free_port, uvicorn_app, write_checkpoints

GAME = "snake-rt-v0"
SMOKE = ranked.SEED_SETS["smoke"]
BOARD = f"game={GAME}&tier=fast&seed_set=smoke"
#: Seconds an agent has to join: what a no-show costs, and what the lobby test has to see the
#: episode waiting.
JOIN_WITHIN_S = 8.0


def call(base: str, method: str, path: str, token: str | None = None, body=None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def get(base: str, path: str) -> dict:
    status, body = call(base, "GET", path)
    assert status == 200, body
    return body


def register(arena: str, name: str) -> str:
    status, body = call(arena, "POST", "/v1/agents", body={"name": name, "version": "1"})
    assert status == 201, body
    return body["token"]


def next_episode(arena: str, run: int, token: str) -> dict:
    status, episode = call(arena, "POST", f"/v1/runs/{run}/episodes", token)
    assert status == 201, episode
    return episode


def play(episode: dict) -> None:
    """Joins an assigned episode and answers each frame with its first legal action, to its end."""
    agent = AgentStream(episode["env"]["grpc"])
    agent.join(session_id=episode["session_id"], token=episode["session_token"])
    while (msg := agent.next()) is not None:
        if msg.WhichOneof("message") == "frame":
            mask = msg.frame.legal_action_mask.data
            agent.act(msg.frame.frame, next(i for i, b in enumerate(mask) if b))
    agent.close()


def until(check, timeout: float = 60.0, what: str = ""):
    end = time.monotonic() + timeout
    while not (got := check()):
        assert time.monotonic() < end, what
        time.sleep(0.1)
    return got


@pytest.fixture(scope="module")
def servers(chromium_path, tmp_path_factory):
    """The env server (Snake, its lobby linking the arena) and the arena over it, playing the
    `smoke` seed set; the arena is filled with a reference run and an agent's run of the fast
    tier, the agent's first episode a no-show, played again."""
    tmp = tmp_path_factory.mktemp("web-arena")
    root = write_checkpoints(tmp / "ckpt", (GAME,))
    port = free_port()
    with env_server(tmp, root, (GAME,), "--arena-url", f"http://127.0.0.1:{port}") as env:
        db = str(tmp / "arena.db")
        repository = Repository.open(db)
        settings = ArenaSettings(
            database=db, port=0, env=env, seed_set="smoke", join_within_s=JOIN_WITHIN_S
        )
        try:
            with uvicorn_app(create_app(settings, repository=repository), port=port) as arena:
                yield SimpleNamespace(env=env, arena=arena, **_fill(arena))
        finally:
            repository.close()


def _fill(arena: str) -> dict:
    body = {"game": GAME, "tier": "fast", "players": ["policy-only"]}
    status, refs = call(arena, "POST", "/v1/references", body=body)
    assert status == 202, refs
    token = register(arena, "steady")
    status, run = call(arena, "POST", "/v1/runs", token, {"game": GAME, "tier": "fast"})
    assert status == 201, run
    next_episode(arena, run["id"], token)  # never joined: a no-show, while the reference plays
    until(
        lambda: get(arena, f"/v1/runs/{run['id']}")["episodes"][0]["status"] == "no_show",
        what="the no-show",
    )
    for _ in range(SMOKE.episodes):
        play(next_episode(arena, run["id"], token))
    for done in (run["id"], refs["runs"][0]["id"]):
        path = f"/v1/runs/{done}"
        until(lambda path=path: get(arena, path)["status"] == "finished", what=path)
    return {"run": run["id"], "reference": refs["runs"][0]["id"]}


def _table(page, selector: str) -> list[dict]:
    """The rows of a table as a person reads them: header -> cell text, per row."""
    return page.evaluate(
        """(selector) => {
          const table = document.querySelector(selector);
          const heads = [...table.tHead.rows[0].cells].map((th) => th.textContent);
          return [...table.tBodies[0].rows].map((tr) =>
            Object.fromEntries([...tr.cells].map((td, i) => [heads[i], td.textContent])));
        }""",
        selector,
    )


def _fixed(x: float, digits: int) -> str:
    """`Number(x).toFixed(digits)` as the browser writes it: the double's exact value, halves
    rounded up (Python's format rounds 26.25 to 26.2; the page shows 26.3)."""
    return str(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def _pm(mean, se, signed=False) -> str:
    """What the pages show of a number ± its standard error (web/arena.js `pm`)."""
    if mean is None:
        return "—"
    return f"{'+' if signed and mean > 0 else ''}{_fixed(mean, 2)} ± {_fixed(se, 2)}"


def _pct(x) -> str:
    return f"{_fixed(x * 100, 1)}%"


def test_the_leaderboard_shows_the_api_s_numbers_and_sorts_by_a_column(servers, page):
    board = get(servers.arena, f"/v1/leaderboard?{BOARD}")
    assert [r["agent"] for r in board["rows"]] == sorted(
        ["steady", "rtplan-policy-only"],
        key=lambda a: -next(r["mean_return"] for r in board["rows"] if r["agent"] == a),
    )
    page.goto(f"{servers.arena}/")  # the arena's root opens the leaderboard
    page.wait_for_url("**/arena**")
    page.goto(f"{servers.arena}/arena?{BOARD}")
    page.locator("#board tbody tr").first.wait_for(timeout=10_000)
    assert page.locator("#json").get_attribute("href") == f"/v1/leaderboard?{BOARD}"
    rows = _table(page, "#board")
    best = next(r["best_reference"] for r in board["rows"] if r["best_reference"])
    assert best.startswith("rtplan-policy-only ")
    assert f"best reference: {best}" in page.locator("#best").text_content()
    for rank, (shown, api) in enumerate(zip(rows, board["rows"], strict=True), 1):
        reference = api["kind"] == "reference"
        assert shown == {
            "rank": str(rank),
            "agent": api["agent"],
            "version": api["version"],
            "kind": api["kind"],
            "episodes": str(SMOKE.episodes),
            "return ± SE": _pm(api["mean_return"], api["se_return"]),
            "vs best reference ± SE": "best reference"
            if reference
            else _pm(api["vs_best_reference"], api["vs_best_reference_se"], signed=True),
            "on time": _pct(api["on_time"]),
            "late": _pct(api["late"]),
            "fallback": _pct(api["fallback"]),
            "invalid": _pct(api["invalid"]),
            "slack p50 ms": _fixed(api["slack_median_ms"], 1),
            "slack p5 ms": _fixed(api["slack_p5_ms"], 1),
            "frame used": _pct(api["frame_share_mean"]),
        }, api
        marked = page.locator(f'#board tr[data-run="{api["run"]}"]').get_attribute("class")
        assert (marked == "reference") == reference
    # A click on a header sorts by its column (numbers by value, rows without one last); a
    # second click reverses.
    by_agent = {r["agent"]: r for r in board["rows"]}
    for header, key, first in [
        ("agent", "agent", "ascending"),
        ("return ± SE", "mean_return", "descending"),
        ("frame used", "frame_share_mean", "descending"),
        ("slack p5 ms", "slack_p5_ms", "descending"),
        ("vs best reference ± SE", "vs_best_reference", "descending"),
    ]:
        th = page.locator("#board th", has_text=header).first
        for direction in (first, "ascending" if first == "descending" else "descending"):
            th.click()
            assert th.get_attribute("aria-sort") == direction
            shown = [by_agent[r["agent"]][key] for r in _table(page, "#board")]
            valued = [v for v in shown if v is not None]
            assert shown == valued + [None] * (len(shown) - len(valued)), (header, shown)
            assert valued == sorted(valued, reverse=direction == "descending"), (header, shown)
    # Each agent links to its page, at its run.
    steady = next(r for r in board["rows"] if r["agent"] == "steady")
    link = page.locator("#board a", has_text="steady")
    assert link.get_attribute("href") == f"/arena/agents/steady#run-{steady['run']}"
    link.click()
    page.wait_for_url("**/arena/agents/steady#run-*")
    page.locator(f"#run-{steady['run']}").wait_for(timeout=10_000)

    # A board with no finished run says how to enter one, and the address follows the choice.
    page.go_back()
    page.locator("#board tbody tr").first.wait_for(timeout=10_000)
    page.select_option("#game", "pacman-rt-v0")
    page.locator("#empty").wait_for(timeout=10_000)
    assert "game=pacman-rt-v0" in page.url and page.locator("#board-box").is_hidden()
    commands = page.locator("#commands").text_content()
    assert f"rtplan arena register my-agent --version 1 --arena {servers.arena}" in commands
    assert (
        f"python -m rtplan.examples.random_agent --ranked --arena {servers.arena} "
        "--game pacman-rt-v0 --tier fast" in commands
    )


def test_an_agent_page_shows_its_runs_with_the_timing_figure_and_replays(servers, page):
    (run,) = get(servers.arena, "/v1/runs?agent=steady")["runs"]
    assert run["id"] == servers.run
    page.goto(f"{servers.arena}/arena/agents/steady")
    section = page.locator(f"#run-{servers.run}")
    section.wait_for(timeout=10_000)
    assert page.locator("#runs-json").get_attribute("href") == "/v1/runs?agent=steady"
    assert page.locator("#agent-json").get_attribute("href") == "/v1/agents/steady"
    assert section.locator('[data-field="mean"]').text_content() == _pm(
        run["mean_return"], run["se_return"]
    )
    # Every attempt, the no-show too, with the seed of each played episode.
    rows = _table(page, f"#run-{servers.run} table.episodes")
    assert [(r["episode"], r["attempt"], r["status"], r["seed"]) for r in rows] == [
        (str(e["episode"]), str(e["attempt"]), e["status"], str(e["seed"])) for e in run["episodes"]
    ]
    assert [r["status"] for r in rows] == ["no_show", "finished", "finished"]
    played = [e for e in run["episodes"] if e["status"] == "finished"]
    assert sorted(e["seed"] for e in played) == list(SMOKE.seeds)

    # The figure: its bars sum to the frames the JSON says were judged, one dot an episode.
    counts = section.locator("svg.hist rect.bar").evaluate_all(
        "(bars) => bars.map((b) => Number(b.dataset.count))"
    )
    judged = sum(
        e["timing"]["on_time"] + e["timing"]["late"] + e["timing"]["invalid"] for e in played
    )
    assert len(counts) == 21 and sum(counts) == judged > 0
    summed = [sum(bins) for bins in zip(*(e["timing"]["frame_share_hist"] for e in played))]
    assert counts == summed
    dots = section.locator("svg.scatter circle.dot").evaluate_all(
        "(dots) => dots.map((d) => [Number(d.dataset.episode), Number(d.dataset.return)])"
    )
    assert sorted(dots) == sorted([e["episode"], e["episode_return"]] for e in played)

    # Each played episode links to its replay on the env server's watch page, which plays it.
    links = section.locator("a.replay")
    assert links.count() == len(played)
    for e, link in zip(played, links.all(), strict=True):
        name = e["replay"].rsplit("/", 1)[1]
        assert e["replay"] == f"{servers.env}/v1/replays/{name}"
        assert link.get_attribute("href") == f"{servers.env}/watch?replay={name}"
    name = played[0]["replay"].rsplit("/", 1)[1]
    links.first.click()
    page.wait_for_url(f"{servers.env}/watch?replay=*")
    page.wait_for_function(
        "document.getElementById('replay-pos').textContent.startsWith('frame 0 /')",
        timeout=20_000,
    )
    index = get(servers.env, f"/v1/replays/{name}")
    assert page.locator("#replay-pos").text_content() == f"frame 0 / {len(index['frames']) - 1}"
    assert GAME in page.locator("#title").text_content()
    assert index["hello"]["config"]["seed"] == played[0]["seed"]


def test_the_lobby_shows_a_ranked_episode_while_it_plays_and_links_the_arena(servers, page):
    page.goto(f"{servers.env}/")
    arena = page.locator("header a#arena")
    arena.wait_for(timeout=10_000)
    assert arena.get_attribute("href") == f"{servers.arena}/arena"
    page.locator("#sessions tbody tr").first.wait_for(timeout=20_000)  # the lobby lists

    token = register(servers.arena, "watched")  # the standard tier: 30 frames last 3.3 s
    status, run = call(servers.arena, "POST", "/v1/runs", token, {"game": GAME})
    assert status == 201, run
    episode = next_episode(servers.arena, run["id"], token)
    row = page.locator(f'tr[data-session="{episode["session_id"]}"]')
    row.wait_for(timeout=JOIN_WITHIN_S * 1000)
    assert row.locator(".tag").text_content() == "ranked"
    # Its watch link, opened before the agent joins, shows the episode as it plays.
    watch = page.context.new_page()
    errors: list[str] = []
    watch.on("pageerror", lambda e: errors.append(str(e)))
    watch.goto(servers.env + row.locator("a").first.get_attribute("href"))
    watch.wait_for_function(
        f"document.getElementById('title').textContent.includes({episode['session_id']!r})",
        timeout=10_000,
    )
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        agent = pool.submit(play, episode)
        page.wait_for_function(
            f"""(document.querySelector('tr[data-session="{episode["session_id"]}"]') || {{}})
                .textContent?.includes('running')""",
            timeout=10_000,
        )
        assert get(servers.env, f"/v1/sessions/{episode['session_id']}")["status"] == "running"
        watch.wait_for_function("window.rtplanViewer.frame > 0", timeout=10_000)
        agent.result(timeout=60)
    watch.close()
    assert errors == []
