"""The boards a person reads, checked against the games' own rules in a real headless Chromium on
a phone (390 x 844, played by taps): a Speed Hex game played through the server to a win, whose
winning chain joins the two edges drawn in the winner's colour (the loser's colour on the other
two), with the board on the screen after every move; and Speed Go's drawn coordinates, which name
each point as GTP names its vertex."""

from __future__ import annotations

import heapq
import re
from types import SimpleNamespace

import pytest

from rtplan.games import go as go_rules
from rtplan.games import hex as hex_rules
from support import PIXELS, env_server, get_json, near, write_checkpoints

GAMES = ("speed-hex-v0", "speed-go-v0")
N = hex_rules.SIZE


@pytest.fixture(scope="module")
def server(chromium_path, tmp_path_factory):
    """The env server with tiny checkpoints of Speed Hex and Speed Go; no planner."""
    tmp = tmp_path_factory.mktemp("web-boards")
    root = write_checkpoints(tmp / "ckpt", GAMES)
    with env_server(tmp, root, GAMES, "--human-countdown-s", "0.5") as base:
        yield SimpleNamespace(base=base)


@pytest.fixture
def tab(phone_tab):
    return phone_tab


def start_from_lobby(tab, base: str, game: str) -> str:
    """Starts a human game of `game` against the random player from the lobby, by taps; returns
    the session id once this tab plays it and the countdown is over."""
    tab.goto(base)
    tab.wait_for_selector(f'select[name="game"] option[value="{game}"]', state="attached")
    tab.select_option('select[name="game"]', game)
    tab.select_option('select[name="agent"]', "human")
    tab.select_option('select[name="opponent"]', "random")
    tab.tap("form#start button")
    tab.wait_for_url("**/watch?session=*", timeout=60_000)
    tab.wait_for_function(
        "(() => { const v = window.rtplanViewer; return v && v.player && v.state && v.palette"
        " && !document.querySelector('#result.countdown'); })()",
        timeout=30_000,
    )
    # Once the countdown is over the "get ready" line gives way (frame 0 has no report yet).
    tab.wait_for_function(
        "!document.getElementById('play-status').textContent.startsWith('get ready')",
        timeout=5_000,
    )
    return tab.url.split("session=")[1]


def my_turn_or_end(tab) -> bool:
    """Waits for this tab's turn or the game's end; True on the turn."""
    tab.wait_for_function(
        "(() => { const v = window.rtplanViewer, f = v.frames[v.frames.length - 1];"
        " return v.ended || (f && f.done) || (v.state && v.state.to_play === v.player.player"
        " && v.frame === f.frame); })()",
        timeout=30_000,
    )
    return tab.evaluate(
        "(() => { const v = window.rtplanViewer, f = v.frames[v.frames.length - 1];"
        " return !(v.ended || f.done); })()"
    )


def colour_of(state: dict, player: int) -> int:
    """The colour (0: the first to move) of player id `player` in rendered state `state`."""
    return state["to_play_colour"] if state["to_play"] == player else 1 - state["to_play_colour"]


def neighbours(r: int, c: int):
    """pgx hex's six neighbours of (r, c)."""
    for dr, dc in ((0, -1), (1, -1), (-1, 0), (1, 0), (-1, 1), (0, 1)):
        if 0 <= r + dr < N and 0 <= c + dc < N:
            yield r + dr, c + dc


def edge_cells(which: str, end: int) -> list[tuple[int, int]]:
    """The cells of the first (`end` 0) or last (1) row ("rows") or column ("columns")."""
    i = 0 if end == 0 else N - 1
    return [(i, j) if which == "rows" else (j, i) for j in range(N)]


def next_cell(board: list[str], stone: str, goal: str) -> tuple[int, int]:
    """The first empty cell of a shortest chain of `stone` between `goal`'s two edges (own stones
    free, empty cells cost 1, the opponent's blocked): a plan that wins against a random player."""
    dist, prev, heap = {}, {}, []
    for r, c in edge_cells(goal, 0):
        if board[r][c] in (stone, "."):
            cost = int(board[r][c] == ".")
            dist[(r, c)] = cost
            heapq.heappush(heap, (cost, (r, c)))
    targets = set(edge_cells(goal, 1))
    while heap:
        d, cell = heapq.heappop(heap)
        if d > dist[cell]:
            continue
        if cell in targets:
            path = [cell]
            while path[-1] in prev:
                path.append(prev[path[-1]])
            return next(p for p in reversed(path) if board[p[0]][p[1]] == ".")
        for nb in neighbours(*cell):
            if board[nb[0]][nb[1]] in (stone, "."):
                nd = d + int(board[nb[0]][nb[1]] == ".")
                if nd < dist.get(nb, 1 << 30):
                    dist[nb], prev[nb] = nd, cell
                    heapq.heappush(heap, (nd, nb))
    raise AssertionError(f"no chain left for {stone!r}:\n" + "\n".join(board))


def joined_edges(board: list[str], stone: str) -> set[str]:
    """The pairs of opposite edges ("rows": top and bottom, "columns": left and right) that one
    connected group of `stone` joins, by pgx hex's neighbours."""
    seen: set[tuple[int, int]] = set()
    joined = set()
    for start in ((r, c) for r in range(N) for c in range(N) if board[r][c] == stone):
        if start in seen:
            continue
        group, todo = {start}, [start]
        while todo:
            for nb in neighbours(*todo.pop()):
                if board[nb[0]][nb[1]] == stone and nb not in group:
                    group.add(nb)
                    todo.append(nb)
        seen |= group
        for which in ("rows", "columns"):
            if all(group & set(edge_cells(which, end)) for end in (0, 1)):
                joined.add(which)
    return joined


def tap_cell(tab, r: int, c: int) -> None:
    """Taps the centre of cell (r, c) where the page draws it (the board may be shown smaller)."""
    x, y = tab.evaluate(
        """([r, c]) => {
            const v = window.rtplanViewer, box = document.getElementById('board')
                .getBoundingClientRect();
            const [x, y] = v.center(r, c), s = box.width / v.layout.width;
            return [box.left + x * s, box.top + y * s];
        }""",
        [r, c],
    )
    tab.touchscreen.tap(x, y)


def board_top(tab) -> float:
    """Where the board's top edge is on the screen (CSS pixels from the viewport's top)."""
    return tab.evaluate("document.getElementById('board').getBoundingClientRect().top")


def board_on_screen(tab) -> bool:
    return tab.evaluate(
        "(() => { const b = document.getElementById('board').getBoundingClientRect();"
        " return b.top >= 0 && b.bottom <= window.innerHeight && b.right <= window.innerWidth; })()"
    )


def contrast(a: str, b: str) -> float:
    """WCAG's contrast ratio of two CSS "rgb(r, g, b)" colours."""

    def luminance(css: str) -> float:
        channels = [int(v) / 255 for v in re.findall(r"\d+", css)[:3]]
        lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_a_watch_page_of_no_session_says_so_in_its_heading(server, tab):
    tab.goto(f"{server.base}/watch?session=0000000000000000")
    tab.wait_for_function(
        "document.getElementById('status').textContent.includes('no session')", timeout=10_000
    )
    assert tab.inner_text("#title") == "no session 0000000000000000"


def test_a_won_hex_game_joins_the_edges_drawn_in_the_winners_colour(server, tab):
    sid = start_from_lobby(tab, server.base, "speed-hex-v0")
    player = tab.evaluate("window.rtplanViewer.player.player")
    # The board at the top of the screen, as a person holds it to play.
    tab.evaluate(
        "window.scrollTo(0, window.scrollY"
        " + document.getElementById('board').getBoundingClientRect().top)"
    )
    top = board_top(tab)
    assert board_on_screen(tab)
    moves = 0
    while my_turn_or_end(tab):
        state = tab.evaluate("window.rtplanViewer.state")
        mine = colour_of(state, player)
        stone = "xo"[mine]
        if moves == 0:
            # The page tells a person the colour and the goal the game gives them.
            words = {"rows": "top and bottom", "columns": "left and right"}
            help_text = tab.inner_text("#play-help")
            assert f"You play {('red', 'blue')[mine]}" in help_text, help_text
            assert words[hex_rules.GOAL_EDGES[mine]] in help_text, help_text
        r, c = next_cell(state["board"], stone, hex_rules.GOAL_EDGES[mine])
        frame = tab.evaluate("window.rtplanViewer.frame")
        tap_cell(tab, r, c)
        tab.wait_for_function(
            f"window.rtplanViewer.frames.some(m => m.frame > {frame}"
            f" && m.state.board[{r}][{c}] !== '.')",
            timeout=15_000,
        )
        moves += 1
        assert moves <= N * N, "the game did not end"
        # A move leaves the page where it was: the board stays on the screen for the next tap.
        assert abs(board_top(tab) - top) <= 2, (
            "the board moved on the screen",
            board_top(tab),
            top,
        )
        assert board_on_screen(tab)
    tab.wait_for_function("window.rtplanViewer.ended", timeout=15_000)
    final = tab.evaluate("window.rtplanViewer.state")
    board = final["board"]
    # The game's verdict, from the server: who won.
    info = get_json(server.base, f"/v1/sessions/{sid}")
    assert info["status"] == "finished", info
    winner = max((0, 1), key=lambda p: final["rewards"][p])
    assert final["rewards"][winner] == 1.0 and final["rewards"][1 - winner] == -1.0, final
    assert winner == player  # the plan wins against a random player
    won, lost = colour_of(final, winner), colour_of(final, 1 - winner)
    # The rules the game played: the winner's chain joins one pair of opposite edges (the
    # loser's stones join none), and it is the pair pgx's rule gives the winner's colour.
    assert joined_edges(board, "xo"[won]) == {hex_rules.GOAL_EDGES[won]}, board
    assert joined_edges(board, "xo"[lost]) == set(), board
    # What the page draws: each edge's colour, read off the canvas in the band outside the
    # outer cells, and a stone of each colour.
    L = tab.evaluate(
        "(() => { const L = window.rtplanViewer.layout; return {R: L.radius, w: L.cell}; })()"
    )
    R, w, mid = L["R"], L["w"], N // 2
    centre = lambda r, c: tab.evaluate("([r, c]) => window.rtplanViewer.center(r, c)", [r, c])  # noqa: E731
    (tx, ty), (bx, by) = centre(0, mid), centre(N - 1, mid)
    (lx, ly), (rx, ry) = centre(mid, 0), centre(mid, N - 1)
    probes = {
        "top": [tx, ty - R - 4],
        "bottom": [bx, by + R + 4],
        "left": [lx - w / 2 - 4, ly],
        "right": [rx + w / 2 + 4, ry],
    }
    edges = dict(zip(probes, tab.evaluate(PIXELS, list(probes.values()))))
    palette = tab.evaluate("window.rtplanViewer.palette")["stones"]
    stones = {
        colour: tab.evaluate(PIXELS, [[x, y + 0.6 * R]])[0]
        for colour in (won, lost)
        for x, y in [
            centre(*next((r, c) for r in range(N) for c in range(N) if board[r][c] == "xo"[colour]))
        ]
    }
    for colour in (won, lost):
        assert near(stones[colour], palette[colour]), (stones, palette)
    sides = {"rows": ("top", "bottom"), "columns": ("left", "right")}
    theirs = hex_rules.GOAL_EDGES[won]
    other = "columns" if theirs == "rows" else "rows"
    for side in sides[theirs]:
        assert near(edges[side], palette[won]), (side, edges, palette, won)
    for side in sides[other]:
        assert near(edges[side], palette[lost]), (side, edges, palette, lost)
    # And the banner names the winner's colour.
    assert ("red", "blue")[won] in tab.inner_text("#result")


#: GTP's vertex names (GTP v2, section 2.11): columns A-T without I from the left, rows from 1
#: at the bottom.
GTP_COLUMNS = "ABCDEFGHJ"
GTP_ROWS = [str(9 - i) for i in range(9)]  # top to bottom


def test_speed_go_draws_each_point_under_the_coordinates_gtp_names_it(server, tab):
    start_from_lobby(tab, server.base, "speed-go-v0")
    player = tab.evaluate("window.rtplanViewer.player.player")
    labels = tab.evaluate("window.rtplanViewer.layout.labels")
    columns = sorted((x, text) for text, x, y in labels if text.isalpha())
    rows = sorted((y, text) for text, x, y in labels if text.isdigit())
    # The coordinates read as GTP's: A..J (no I) left to right, 9 at the top down to 1.
    assert [t for _, t in columns] == list(GTP_COLUMNS), columns
    assert [t for _, t in rows] == GTP_ROWS, rows
    x_of = {t: x for x, t in columns}
    y_of = {t: y for y, t in rows}
    cell = tab.evaluate("window.rtplanViewer.layout.cell")
    palette = tab.evaluate("window.rtplanViewer.palette")["stones"]
    # Each side's clock bar reads against its track: black's too (3:1, WCAG's non-text contrast).
    bars = tab.evaluate(
        """[...document.querySelectorAll('#clock-rows .bar')].map(b => [
            getComputedStyle(b).backgroundColor, getComputedStyle(b.firstChild).backgroundColor])"""
    )
    assert len(bars) == 2
    for track, fill in bars:
        assert contrast(track, fill) >= 3, (track, fill, contrast(track, fill))

    def stone_at(vertex: str) -> list[int]:
        """The canvas's colour inside the stone at `vertex`'s crossing of the drawn labels (off
        its centre, where the last move's mark is)."""
        return tab.evaluate(PIXELS, [[x_of[vertex[0]] + 0.25 * cell, y_of[vertex[1:]]]])[0]

    def last_move_said() -> str:
        return tab.evaluate("document.querySelector('#moves').lastElementChild.textContent")

    def tap(vertex: str) -> None:
        x, y = tab.evaluate(
            """([x, y]) => {
                const v = window.rtplanViewer, box = document.getElementById('board')
                    .getBoundingClientRect(), s = box.width / v.layout.width;
                return [box.left + x * s, box.top + y * s];
            }""",
            [x_of[vertex[0]], y_of[vertex[1:]]],
        )
        tab.touchscreen.tap(x, y)

    assert my_turn_or_end(tab)
    for vertex in ("C7", "G3"):
        frame = tab.evaluate("window.rtplanViewer.frame")
        if vertex == "G3":
            # A tap on a stone is a slip, not a move: nothing is sent, the page says why.
            sent = tab.evaluate("window.rtplanViewer.sent.length")
            tap("C7")
            assert tab.evaluate("window.rtplanViewer.sent.length") == sent
            assert "C7 is taken" in tab.inner_text("#play-status")
        tap(vertex)
        tab.wait_for_function(
            f"window.rtplanViewer.frames.some(m => m.frame === {frame + 1})"
            f" && window.rtplanViewer.frame >= {frame + 1}",
            timeout=15_000,
        )
        report = tab.evaluate(
            f"window.rtplanViewer.frames.find(m => m.frame === {frame + 1}).previous"
        )
        assert (report["answer_source"], report["provenance"]) == ("human", "on_time"), report
        # The action the tap played is the one the GTP engine calls by that name.
        assert go_rules.vertex_name(report["action"]) == vertex, report
        assert last_move_said().endswith(vertex), last_move_said()
        # The time to spare in a person's units (m:ss of a clock game's minutes, not "180398 ms").
        said = tab.inner_text("#play-status")
        assert re.search(r"on time \((\d+:\d\d|\d+\.\d s|\d{1,3} ms) to spare\)", said), said
        mine = colour_of(tab.evaluate("window.rtplanViewer.state"), player)
        assert near(stone_at(vertex), palette[mine]), (vertex, stone_at(vertex), palette)
        if not my_turn_or_end(tab):
            break
        # The opponent's reply, named by the server, is drawn under its coordinates too.
        reply = tab.evaluate("window.rtplanViewer.frames.at(-1).previous")
        name = go_rules.vertex_name(reply["action"])
        assert reply["answer_source"] == "opponent" and last_move_said().endswith(name)
        if name != "pass":
            assert near(stone_at(name), palette[1 - mine]), (name, stone_at(name), palette)
