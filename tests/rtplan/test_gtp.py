"""`rtplan gtp` driven as a GTP controller drives it: a real subprocess over pipes."""

from __future__ import annotations

import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from rtplan import games
from rtplan.games import go
from rtplan.games.go import PASS
from rtplan.gtp import (
    COMMANDS,
    LAG_S,
    Clock,
    GtpEngine,
    TimeSettings,
    choose_budget,
    ladder,
    move_allowance,
    parse_vertex,
    told_clock,
    vertex_name,
)
from rtplan.gtp._board import (
    area_score,
    capture_move,
    dead_stones,
    own_eye,
    seki_stones,
    self_atari,
)
from rtplan.gtp._game import BIG_SELF_ATARI
from support import SUPERKO_MOVES, SUPERKO_REPEAT, write_checkpoints

GAME = "speed-go-v0"


@pytest.fixture(scope="module")
def planner_file(tmp_path_factory) -> Path:
    root = write_checkpoints(tmp_path_factory.mktemp("ck"), (GAME,))
    return root / GAME / "planner.msgpack"


class Controller:
    """Writes GTP commands to the engine's stdin and reads one answer per command."""

    def __init__(self, planner_file: Path, log: Path, *flags: str) -> None:
        self.log = log
        self._err = open(log, "w")  # noqa: SIM115 (closed in `close`)
        cmd = [sys.executable, "-m", "rtplan", "gtp", "--game", GAME, "--planner", planner_file]
        cmd += flags
        self.proc = subprocess.Popen(
            [str(c) for c in cmd],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            bufsize=1,
        )

    def raw(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def answer(self) -> str:
        """The next answer, its trailing blank line stripped."""
        lines = []
        while True:
            line = self.proc.stdout.readline()
            assert line, f"engine closed its stdout; stderr:\n{self.log.read_text()}"
            if line == "\n":
                return "".join(lines).rstrip("\n")
            lines.append(line)

    def __call__(self, line: str) -> str:
        self.raw(line)
        return self.answer()

    def ok(self, line: str) -> str:
        """The result of a command that must succeed."""
        text = self(line)
        assert text.startswith("="), f"{line!r} -> {text!r}"
        return text[1:].strip()

    def board(self) -> dict[str, str]:
        """Vertex -> "X" / "O" for every stone `showboard` shows."""
        stones = {}
        for row in self.ok("showboard").splitlines()[1:10]:
            number, *cells = row.split()[:10]
            for letter, cell in zip("ABCDEFGHJ", cells):
                if cell in "XO":
                    stones[f"{letter}{number}"] = cell
        return stones

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._err.close()


@pytest.fixture(scope="module")
def engines(planner_file, tmp_path_factory):
    """The module's engine process, started again only if a test made it quit."""
    started: list[Controller] = []

    def live() -> Controller:
        if not started or started[-1].proc.poll() is not None:
            log = tmp_path_factory.mktemp("gtp") / "stderr.txt"
            # One ladder rung (8 simulations): the rungs compile in the background of every test.
            started.append(Controller(planner_file, log, "--max-simulations", "8"))
        return started[-1]

    yield live
    for controller in started:
        controller.close()


@pytest.fixture
def gtp(engines) -> Controller:
    return engines()


@pytest.fixture
def fresh(gtp):
    assert gtp("clear_board") == "="
    gtp.ok("komi 7.5")
    gtp.ok("time_settings 0 1 0")  # byo-yomi time without stones: no time limit
    return gtp


def test_handshake_ids_comments_and_unknown_commands(fresh):
    gtp = fresh
    assert gtp("protocol_version") == "= 2"
    assert gtp("name") == "= rtplan"
    assert gtp("version").startswith("= 0.")
    assert set(gtp.ok("list_commands").split()) == set(COMMANDS)
    assert gtp("known_command genmove") == "= true"
    assert gtp("known_command fly") == "= false"
    # Ids are echoed on success and on failure; comments and blank lines get no answer.
    gtp.raw("# a comment line")
    gtp.raw("")
    assert gtp("12 name  # trailing comment") == "=12 rtplan"
    assert gtp("13 fly_away") == "?13 unknown command"
    assert gtp("known_command").startswith("? syntax error")


def test_boardsize_only_9(fresh):
    assert fresh("boardsize 9") == "="
    assert fresh("boardsize 19").startswith("? unacceptable size")
    assert fresh("boardsize nine").startswith("? syntax error")
    assert fresh("name") == "= rtplan"  # still alive


def test_play_showboard_and_bad_moves(fresh):
    gtp = fresh
    assert gtp("play B e5") == "="  # colours and vertices in any case
    assert gtp("play white D4") == "="
    assert gtp.board() == {"E5": "X", "D4": "O"}
    assert gtp("play b e5") == "? illegal move"  # occupied
    assert gtp("play b d4") == "? illegal move"
    for vertex in ("z9", "e10", "i5", "e0", "5e", "e"):
        assert gtp(f"play b {vertex}").startswith("? invalid coordinate"), vertex
    assert gtp("play red a1").startswith("? invalid color")
    assert gtp("play b").startswith("? syntax error")
    # Suicide: white A1 inside black A2 + B1.
    for move in ("b a2", "w j9", "b b1"):
        assert gtp(f"play {move}") == "="
    assert gtp("play w a1") == "? illegal move"
    assert gtp.board() == {"E5": "X", "D4": "O", "A2": "X", "J9": "O", "B1": "X"}


def test_a_superko_repetition_is_refused_with_its_reason(fresh):
    gtp = fresh
    for i, vertex in enumerate(SUPERKO_MOVES):
        assert gtp(f"play {'bw'[i % 2]} {vertex}") == "=", (i, vertex)
    before = gtp.board()
    assert len(SUPERKO_MOVES) % 2 == 1  # white to move
    answer = gtp(f"play w {SUPERKO_REPEAT}")
    assert answer == "? illegal move (repeats an earlier position: positional superko)"
    assert gtp.board() == before  # nothing played; white is still to move, the game goes on
    assert gtp("play w pass") == "="
    # White again (no black move between): the position is still an earlier one.
    assert gtp(f"play w {SUPERKO_REPEAT}").endswith("positional superko)")
    assert gtp.board() == before


def test_consecutive_moves_of_one_colour(fresh):
    """GTP v2 lets either colour move at any time (GUIs set up positions so)."""
    gtp = fresh
    assert gtp("play b e5") == "="
    assert gtp("play b d5") == "="
    assert gtp("play black c5") == "="
    assert gtp.board() == {"E5": "X", "D5": "X", "C5": "X"}
    assert gtp.ok("showboard").splitlines()[-1].startswith("White to play")
    # White to move now, but black moves again, by genmove too; captures work as usual.
    for vertex in ("a2", "b1"):
        assert gtp(f"play w {vertex}") == "="
    assert gtp("play b a1") == "? illegal move"  # suicide for black
    for vertex in ("b2", "a3", "c1"):
        assert gtp(f"play b {vertex}") == "="
    assert gtp("play b a1") == "="  # now it captures A2 and B1
    board = gtp.board()
    assert "A2" not in board and "B1" not in board and board["A1"] == "X"
    vertex = gtp.ok("genmove b")
    assert vertex.lower() == "pass" or gtp.board()[vertex] == "X"
    gtp.ok("undo")
    # A pass and then the same colour's move: one pass only, the game goes on.
    assert gtp("play w pass") == "="
    assert gtp("play w g7") == "="
    assert gtp("play b pass") == "="
    assert gtp("play w pass") == "="
    assert gtp("play b e1") == "="  # two passes end pgx's game, but GTP plays on


def test_undo(fresh):
    gtp = fresh
    assert gtp("undo") == "? cannot undo"
    gtp.ok("play b c3")
    gtp.ok("play w g7")
    assert gtp("undo") == "="
    assert gtp.board() == {"C3": "X"}
    gtp.ok("play w g3")  # white to move again after the undo
    assert gtp.board() == {"C3": "X", "G3": "O"}
    gtp.ok("undo")
    gtp.ok("undo")
    assert gtp.board() == {}
    assert gtp("undo") == "? cannot undo"


def test_genmove_plays_a_legal_move_that_shows_on_the_board(fresh):
    gtp = fresh
    gtp.ok("play b e5")
    vertex = gtp.ok("genmove W")
    assert vertex.lower() == "pass" or (vertex != "E5" and parse_vertex(vertex) < 81)
    expected = {"E5": "X"} if vertex.lower() == "pass" else {"E5": "X", vertex: "O"}
    assert gtp.board() == expected
    black = gtp.ok("genmove black")
    assert black.lower() == "pass" or gtp.board()[black] == "X"


def test_self_play_to_the_end(fresh):
    """genmove for both sides until two passes end the game (the controller's passes end it if
    the tiny planners play on for 200 plies: no ply cap ends it any more); play goes on."""
    gtp = fresh
    moves = []
    while moves[-2:] != ["pass", "pass"]:
        if len(moves) < 200:
            moves.append(gtp.ok(f"genmove {'bw'[len(moves) % 2]}").lower())
        else:
            gtp.ok(f"play {'bw'[len(moves) % 2]} pass")
            moves.append("pass")
    assert re.fullmatch(r"= (0|[BW]\+\d+(\.5)?)", gtp("final_score"))
    # The engine passes only once its board moves are eyes, self-ataris or repetitions
    # (`SpeedGo.served_mask`), so some empty points are suicides for black: one is not.
    empties = [v for v in (vertex_name(a) for a in range(81)) if v not in gtp.board()]
    assert any(gtp(f"play b {v}") == "=" for v in empties)


def test_time_controls_choose_the_budget(fresh):
    gtp = fresh

    def budget() -> int:
        return int(gtp.ok("rtplan-budget").split()[0])

    assert budget() == 4  # no time limit: the largest budget (tiny planner: k in (2, 4))
    gtp.ok("time_settings 600 0 0")
    # 600 s over ~81 moves: plenty for a few-ms search (and the ladder's rung of 8 simulations,
    # once the background has timed it)
    assert budget() in (4, 8)
    gtp.ok("time_left b 0 0")
    assert budget() == 0  # out of time: the policy-only move
    assert gtp("time_left b -1 0").startswith("? syntax error")
    assert gtp("time_left x 1 0").startswith("? invalid color")
    vertex = gtp.ok("genmove b")
    log = gtp.log.read_text().splitlines()
    assert f"genmove B: {vertex} k=0 (0 simulations)" in log[-1]
    gtp.ok("time_left w 1 1")  # byo-yomi: one second for one stone
    assert budget() >= 4
    gtp.ok("kgs-time_settings byoyomi 0 0 1")  # a period of 0 s: nothing fits
    assert budget() == 0
    gtp.ok("kgs-time_settings none")
    assert budget() == 4
    assert gtp("kgs-time_settings fischer 1 2").startswith("? syntax error")


def test_final_score_komi_and_game_over(fresh):
    gtp = fresh
    assert gtp("final_score") == "= W+7.5"  # empty board: 81 points each, komi to white
    gtp.ok("komi 0")
    assert gtp("final_score") == "= 0"
    assert gtp("komi lots").startswith("? syntax error")
    gtp.ok("play b e5")  # every empty point now reaches black only
    assert gtp("final_score") == "= B+81"
    gtp.ok("komi 7.5")  # the game is rebuilt with the new komi, the stone kept
    assert gtp.board() == {"E5": "X"}
    assert gtp("final_score") == "= B+73.5"
    gtp.ok("play w pass")
    gtp.ok("play b PASS")  # two passes end the game ...
    assert gtp("play w d4") == "="  # ... but GTP has no game-over state: play goes on
    gtp.ok("undo")
    gtp.ok("undo")
    assert gtp("play b d4") == "="


def test_handicap_commands(fresh):
    """fixed_handicap, place_free_handicap, set_free_handicap: setup stones, white to move."""
    gtp = fresh
    assert gtp("fixed_handicap 2") == "= C3 G7"
    assert gtp.board() == {"C3": "X", "G7": "X"}
    assert gtp.ok("showboard").splitlines()[-1].startswith("White to play")
    assert gtp("fixed_handicap 3") == "? board not empty"
    assert gtp("set_free_handicap e5 d5") == "? board not empty"
    vertex = gtp.ok("genmove w")
    assert vertex.lower() == "pass" or gtp.board()[vertex] == "O"
    gtp.ok("clear_board")
    for n in ("1", "10"):
        assert gtp(f"fixed_handicap {n}") == "? invalid number of stones"
    assert gtp("fixed_handicap two").startswith("? syntax error")
    assert gtp("fixed_handicap 9") == "= C3 G7 C7 G3 C5 G5 E3 E7 E5"
    assert gtp("undo") == "="  # the setup is one step
    assert gtp.board() == {}
    assert gtp("fixed_handicap 5") == "= C3 G7 C7 G3 E5"
    gtp.ok("clear_board")
    vertices = gtp.ok("place_free_handicap 4").split()
    assert gtp.board() == dict.fromkeys(vertices, "X") and len(vertices) == 4
    gtp.ok("clear_board")
    assert len(gtp.ok("place_free_handicap 12").split()) == 12
    gtp.ok("clear_board")
    for bad in ("c3", "c3 c3", "c3 pass", "c3 z9"):
        assert gtp(f"set_free_handicap {bad}").startswith("? bad vertex list"), bad
    assert gtp("set_free_handicap c3 g7 e5") == "="
    assert gtp.board() == {"C3": "X", "G7": "X", "E5": "X"}
    assert gtp("play w d4") == "="


def test_fixed_handicap_points_are_gnu_gos():
    """The same points as GNU Go's `fixed_handicap` (bench.match's table; GTP: any order)."""
    from bench.match import GO_HANDICAP
    from rtplan.gtp._protocol import handicap_vertices

    for n, points in GO_HANDICAP.items():
        assert {v.lower() for v in handicap_vertices(n)} == set(points.split()), n


def test_handicap_stones_spend_no_plies(local):
    """A setup starts pgx's state afresh from the position: ply 1, white to move, not ply 18."""
    local.handle("clear_board")
    assert local.handle("fixed_handicap 9")[0] == "= C3 G7 C7 G3 C5 G5 E3 E7 E5\n\n"
    pos = go.position(local.states[-1])
    assert pos.ply == 1 and pos.passes == 0
    assert local.to_play == 1


#: Black everywhere but nine one-point eyes (B2, E2, H2, B5, ..., H8): every legal board move
#: of black's fills one of its own eyes.
EYES = {f"{c}{r}" for c in "BEH" for r in (2, 5, 8)}
ALL_BLACK = [vertex_name(a) for a in range(81) if vertex_name(a) not in EYES]


def test_genmove_passes_rather_than_fill_its_own_eyes(fresh):
    gtp = fresh
    assert gtp(f"set_free_handicap {' '.join(ALL_BLACK)}") == "="
    gtp.ok("play w pass")
    assert gtp("genmove b") == "= pass"


def test_komi_answers_at_once_and_the_score_uses_it(fresh):
    """komi is an input of the compiled functions: no recompiling (it once took 42 s)."""
    gtp = fresh
    gtp.ok("genmove b")  # the engine is warm
    gtp.ok("clear_board")
    gtp.ok("play b e5")
    for komi, score in (("80.5", "B+0.5"), ("81.5", "W+0.5"), ("6.5", "B+74.5")):
        start = time.perf_counter()
        assert gtp(f"komi {komi}") == "="
        assert time.perf_counter() - start < 1.0
        assert gtp("final_score") == f"= {score}"
    start = time.perf_counter()
    gtp.ok("genmove w")  # the searches were not compiled again either
    assert time.perf_counter() - start < 1.0


def test_final_score_removes_dead_stones(fresh):
    """Black owns A-E, white F-J; a white stone in black's area and a black one in white's.
    Counted alive they spoil both areas (W+7.5); dead, the areas count (B+1.5)."""
    gtp = fresh
    blacks = [f"E{r}" for r in range(1, 10)] + ["H5"]
    assert gtp(f"set_free_handicap {' '.join(blacks)}") == "="
    for vertex in [f"F{r}" for r in range(1, 10)] + ["B5"]:
        assert gtp(f"play w {vertex}") == "="
    assert gtp("final_score") == "= B+1.5"  # 45 - 36 - 7.5


def test_play_and_genmove_go_on_after_two_passes(fresh):
    """GTP v2 has no game-over state: GUIs play on after two passes to settle dead stones."""
    gtp = fresh
    gtp.ok("play b e5")
    gtp.ok("play w pass")
    gtp.ok("play b pass")  # two passes: pgx's game is over
    assert gtp("final_score") == "= B+73.5"
    assert gtp("play w d4") == "="
    assert gtp.board() == {"E5": "X", "D4": "O"}
    vertex = gtp.ok("genmove b")
    assert f"genmove B: {vertex} k=4 (4 simulations)" in gtp.log.read_text()  # it searched
    for line in ("play w pass", "play b pass", "play w pass"):  # over again, and on again
        gtp.ok(line)
    vertex = gtp.ok("genmove b")
    assert f"genmove B: {vertex} k=4" in gtp.log.read_text().splitlines()[-1]


def test_genmove_plays_the_colour_asked_when_the_other_is_to_move(fresh):
    """`genmove b` with white to move plays a black stone; black's own pass just before is not
    an opponent's pass (the policy-only move may not pass then)."""
    gtp = fresh
    gtp.ok("fixed_handicap 2")  # white to move
    gtp.ok("play b pass")  # black again: white to move again
    gtp.ok("time_settings 600 0 0")
    gtp.ok("time_left b 0 0")  # black's clock is out: the policy-only move, which must not pass
    vertex = gtp.ok("genmove b")
    assert vertex.lower() != "pass" and gtp.board()[vertex] == "X"
    assert gtp.ok("showboard").splitlines()[-1].startswith("White to play")
    gtp.ok("kgs-time_settings none")
    vertex = gtp.ok("genmove b")  # searched, out of turn again
    assert f"genmove B: {vertex} k=4" in gtp.log.read_text().splitlines()[-1]
    assert vertex.lower() == "pass" or gtp.board()[vertex] == "X"


def test_final_status_list_and_final_score_agree(fresh):
    """The final-score position: white's B5 and black's H5 are dead; final_score removes
    exactly the stones final_status_list calls dead."""
    gtp = fresh
    blacks = [f"E{r}" for r in range(1, 10)] + ["H5"]
    assert gtp(f"set_free_handicap {' '.join(blacks)}") == "="
    whites = [f"F{r}" for r in range(1, 10)] + ["B5"]
    for vertex in whites:
        assert gtp(f"play w {vertex}") == "="
    assert gtp.ok("final_status_list dead").split() == ["B5", "H5"]
    assert gtp.ok("final_status_list seki") == ""
    alive = gtp.ok("final_status_list alive").splitlines()
    assert sorted(alive) == sorted(
        [" ".join(f"E{r}" for r in range(9, 0, -1)), " ".join(f"F{r}" for r in range(9, 0, -1))]
    )
    assert gtp("final_status_list maybe").startswith("? syntax error")
    board = np.zeros(81, int)
    for vertex in blacks:
        board[parse_vertex(vertex)] = 1
    for vertex in whites:
        board[parse_vertex(vertex)] = -1
    for vertex in gtp.ok("final_status_list dead").split():
        board[parse_vertex(vertex)] = 0
    black, white = area_score(board)
    assert gtp("final_score") == f"= B+{black - white - 7.5:g}"
    assert "final_status_list" in gtp.ok("list_commands").split()


def test_quit_ends_the_engine(gtp):
    """The last test of the shared engine (a later one would start another)."""
    assert gtp("5 quit") == "=5"
    assert gtp.proc.wait(timeout=60) == 0


def test_fixed_budget_plays_its_option_whatever_the_clock(planner_file, tmp_path):
    """`--budget 2` (bench.match's matches): option 2 on every move, even out of time."""
    gtp = Controller(planner_file, tmp_path / "stderr.txt", "--budget", "2")
    try:
        assert gtp("rtplan-budget") == "= 2 inf"  # the time manager would pick 4
        gtp.ok("time_settings 600 0 0")
        gtp.ok("time_left b 0 0")
        assert gtp.ok("rtplan-budget").split()[0] == "2"
        vertex = gtp.ok("genmove b")
        assert f"genmove B: {vertex} k=2 (2 simulations)" in gtp.log.read_text()
        assert gtp("quit") == "="
    finally:
        gtp.close()
    times = next(line for line in gtp.log.read_text().splitlines() if "search times:" in line)
    assert "k=2 " in times and "k=4" not in times  # only the fixed option is compiled


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--game", "speed-hex-v0"], "must be speed-go-v0"),
        (["--planner", "no/such/planner.msgpack"], "no planner checkpoint"),
        (["--budget", "3"], "budget 3 is not one of the planner's (2, 4)"),
    ],
)
def test_cli_refuses_other_games_missing_planners_and_unknown_budgets(args, message, planner_file):
    if args[0] == "--budget":
        args = [*args, "--planner", str(planner_file)]
    cmd = [sys.executable, "-m", "rtplan", "gtp", *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert message in result.stderr


# ---- In process: scoring agrees with pgx, and the time manager's arithmetic -------------


@pytest.fixture(scope="module")
def local(planner_file) -> GtpEngine:
    """An engine in this process (its step compiled; the searches only when a test plans)."""
    return GtpEngine(planner_file)


def test_a_game_goes_on_past_pgx_ply_cap(local):
    """pgx ends a 9x9 game at ply 162; the engine plays on (and genmove still plans)."""
    engine = local
    engine.handle("clear_board")
    rng = random.Random(1)
    for ply in range(180):
        colour = "bw"[engine.to_play]
        answer = "?"
        for action in [*rng.sample(range(81), 81), 81]:  # pass only when nothing else is legal
            answer, _ = engine.handle(f"play {colour} {vertex_name(action)}")
            if answer.startswith("="):
                break
        assert answer.startswith("="), (ply, answer)
        assert go.position(engine.states[-1]).ply < 162
    assert len(engine.moves) == 180 and not engine.over
    assert engine.handle(f"genmove {'bw'[engine.to_play]}")[0].startswith("=")


def test_move_guard(local):
    """No opening pass, no own eye filled, no play on after the opponent's pass when lost."""
    engine = local
    engine.handle("clear_board")
    empty = engine.states[-1]
    assert engine._guard(empty, PASS, 0.0) < PASS  # the first move as black: never a pass
    engine.handle(f"set_free_handicap {' '.join(ALL_BLACK)}")
    black = engine._ready(engine.states[-1], 0)
    for eye in EYES:
        assert engine._guard(black, parse_vertex(eye), 0.9) == PASS, eye
    assert engine._guard(black, PASS, 0.9) == PASS  # stones of its own: passing is allowed
    # Policy-only (no search) the move is a served one (`SpeedGo.served_mask`, tested in
    # tests/games/test_go_served_moves.py): no pass while a board move that is no own eye is
    # left; here only eyes are.
    assert engine._search(black, 0)[0] == PASS
    engine.handle("clear_board")
    engine.handle("set_free_handicap c3 g7")
    handicap = engine._ready(engine.states[-1], 0)
    instead = engine._search(handicap, 0)[0]
    assert instead < PASS and not own_eye(np.zeros(81, int), instead)
    assert engine._guard(handicap, PASS, 0.4) == PASS  # a pass the search chose stands
    for line in ("play b d4", "play w e5", "play b pass"):  # after black's pass ...
        engine.handle(line)
    # ... white may pass too, winning 1-1 on komi: the game can end
    white = engine._ready(engine.states[-1], 1)
    assert np.asarray(engine._fns.game.served_mask(white))[PASS]
    engine.handle("clear_board")
    for line in ("play b e5", "play w pass"):
        engine.handle(line)
    d4 = parse_vertex("d4")
    assert engine._guard(engine.states[-1], d4, 0.0) == d4
    assert engine._guard(engine.states[-1], d4, -0.95) == PASS  # lost: pass too
    # own_eye's false eye: two of the opponent's stones on the diagonals.
    board = np.zeros(81, int)
    for vertex in ("d5", "f5", "e4", "e6"):
        board[parse_vertex(vertex)] = 1
    assert own_eye(board, parse_vertex("e5"))
    board[parse_vertex("d4")] = board[parse_vertex("f6")] = -1
    assert not own_eye(board, parse_vertex("e5"))


def test_dead_stones_are_captured_before_passing_when_the_count_depends_on_them(local):
    """The final-score position: white's B5 is dead in black's area and black's H5 in white's.
    Counted alive they give W+7.5, removed B+1.5; so black, about to pass, takes B5's
    liberties until it is captured, then passes. With komi 20 black loses either way: a pass."""
    engine = local
    engine.handle("clear_board")
    engine.handle("komi 7.5")
    blacks = [f"E{r}" for r in range(1, 10)] + ["H5"]
    engine.handle(f"set_free_handicap {' '.join(blacks)}")
    for vertex in [f"F{r}" for r in range(1, 10)] + ["B5"]:
        assert engine.handle(f"play w {vertex}")[0].startswith("=")
    liberties = {parse_vertex(v) for v in ("A5", "B4", "B6", "C5")}
    taken = []
    while True:
        move = engine._guard(engine._ready(engine.states[-1], 0), PASS, 0.0)
        if move == PASS:
            break
        assert move in liberties - set(taken), move
        taken.append(move)
        assert engine.handle(f"play b {vertex_name(move)}")[0].startswith("=")
        assert engine.handle("play w pass")[0].startswith("=")
    assert sorted(taken) == sorted(liberties)  # the fourth captured B5
    assert engine.handle("final_score")[0].split() == ["=", "B+1.5"]
    engine.handle("clear_board")
    engine.handle("komi 20")
    engine.handle(f"set_free_handicap {' '.join(blacks)}")
    for vertex in [f"F{r}" for r in range(1, 10)] + ["B5"]:
        engine.handle(f"play w {vertex}")
    assert engine._guard(engine._ready(engine.states[-1], 0), PASS, 0.0) == PASS
    engine.handle("komi 7.5")


#: Game 14 of bench/results/games/go-shipped-gate-gnugo-h7-sd3s-seed0-fixed.csv (we are black
#: with 7 handicap stones) to ply 92: black's big group shares its last two liberties, D7 and F6,
#: with white's E6-E7 inside it (a seki). Black filled D7, white took the group with F6 and the
#: game ended W+88.5: the raw policy passed, and the old guard played D7 instead of that pass.
SEKI_GAME = (
    "c7 pass g7 pass c5 pass e5 pass g5 pass c3 pass g3 h5 d6 e3 h6 g2 e4 h3 h4 f3 f2 g4 d2 j4 "
    "f5 e2 f8 d3 b4 c2 d8 b2 b3 a3 d1 a2 b7 d4 f4 c4 d5 b5 a4 b6 h8 a7 b8 a8 c6 j6 h7 j7 a6 a5 "
    "h2 j8 f1 h9 h1 g9 g8 j5 j2 j9 e1 f9 g1 g3 b9 e9 e8 d9 g6 c9 c8 e7 f7 e6 j3 h4 c1 b4 b1 a6 "
    "c3 a9 pass b3 pass a1"
)


def test_the_guard_never_fills_a_seki_liberty_of_a_big_group(local):
    engine = local
    engine.handle("clear_board")
    for ply, move in enumerate(SEKI_GAME.split()):
        assert engine.handle(f"play {'bw'[ply % 2]} {move}")[0].startswith("="), (ply, move)
    state = engine._ready(engine.states[-1], 0)
    mine = go.position(state).own()  # black to move: black's stones are +1
    d7, f6 = parse_vertex("D7"), parse_vertex("F6")
    assert self_atari(mine, d7) == self_atari(mine, f6) >= BIG_SELF_ATARI
    served = np.asarray(engine._fns.game.served_mask(state))  # policy-only and the search root
    assert not served[d7] and not served[f6]  # no filling instead of a pass
    assert engine._guard(state, d7, -0.97) == PASS  # not even when a search picks it


def test_self_atari_counts_the_stones_it_puts_in_atari():
    board = np.zeros(81, int)  # the mover's view
    for vertex in ("A2", "A3"):
        board[parse_vertex(vertex)] = 1
    for vertex in ("B1", "B2", "B3", "B4"):
        board[parse_vertex(vertex)] = -1
    assert self_atari(board, parse_vertex("A4")) == 0  # A2-A5... keeps A1 and A5
    assert self_atari(board, parse_vertex("A1")) == 3  # A1-A3 keep only A4: two liberties lost
    board[parse_vertex("A4")] = -1  # A2-A3 already in atari: running loses nothing but A1
    assert self_atari(board, parse_vertex("A1")) == 1
    board = np.zeros(81, int)
    for vertex in ("A1", "A2", "C1", "C2", "C3", "B4"):
        board[parse_vertex(vertex)] = 1
    for vertex in ("B1", "B2", "B3", "A4"):
        board[parse_vertex(vertex)] = -1
    assert self_atari(board, parse_vertex("A3")) == 0  # it captures B1-B3: three liberties


def test_capture_move_takes_the_last_liberty_and_never_a_self_atari():
    board = np.zeros(81, int)  # the mover's view: +1 its stones, -1 the opponent's
    for vertex in ("A9", "B9", "C9", "A8", "C8", "A7", "B7", "C7", "D8", "D9", "D7", "E8"):
        board[parse_vertex(vertex)] = 1
    board[parse_vertex("B8")] = -1  # enclosed, no liberty left (a position for the function only)
    legal = np.ones(82, bool)
    legal[[p for p in range(81) if board[p]]] = False
    assert capture_move(board, legal) is None  # no liberty to take: nothing to do
    board[parse_vertex("C8")] = 0  # now its one liberty, C8: taking it captures
    legal[parse_vertex("C8")] = True
    assert capture_move(board, legal) == parse_vertex("C8")
    legal[parse_vertex("C8")] = False  # illegal (a superko, say): no other move
    assert capture_move(board, legal) is None


def test_komi_is_an_input_of_the_compiled_step(local):
    """The game's own result (pgx's reward at two passes) follows the komi of the moment."""
    for komi, black_wins in ((80.5, True), (81.5, False), (7.5, True)):
        for line in ("clear_board", f"komi {komi}", "play b e5", "play w pass", "play b pass"):
            assert local.handle(line)[0].startswith("="), line
        state = local.states[-1]
        assert bool(state.terminated)
        assert (float(state.inner.rewards[local.black_id]) > 0) == black_wins, komi
    assert local._fns.step._cache_size() == 1  # one compile for every komi


def test_final_score_agrees_with_pgx_at_the_end_of_random_games(local):
    """Random games to two passes: final_score's winner is the one pgx pays."""
    engine = local
    rng = random.Random(0)
    for game in range(3):
        engine.handle("clear_board")
        for _ in range(30 + 10 * game):
            colour = "bw"[engine.to_play]
            legal = np.flatnonzero(np.asarray(engine.states[-1].legal_action_mask)[:81])
            for action in rng.sample(list(legal), len(legal)):
                answer, _ = engine.handle(f"play {colour} {vertex_name(int(action))}")
                if answer.startswith("="):
                    break
        engine.handle("play b pass" if engine.to_play == 0 else "play w pass")
        engine.handle("play b pass" if engine.to_play == 0 else "play w pass")
        state = engine.states[-1]
        assert bool(state.terminated)
        black_reward = float(state.inner.rewards[engine.black_id])
        # The area count (before dead stones are removed) is pgx's.
        black, white = area_score(np.sign(go.position(state).stones))
        assert (black - white - 7.5 > 0) == (black_reward > 0), (black, white, black_reward)


def test_dead_stone_estimate():
    board = np.zeros(81, int)
    # A white group in the corner with two one-point eyes (A9, C9) lives inside black's area.
    for vertex in ("B9", "D9", "A8", "B8", "C8", "D8"):
        board[parse_vertex(vertex)] = -1
    for vertex in ("E9", "E8", "A7", "B7", "C7", "D7", "E7", "G3"):
        board[parse_vertex(vertex)] = 1
    assert not dead_stones(board).any()
    board[parse_vertex("C9")] = -1  # one eye only: dead
    dead = dead_stones(board)
    assert {vertex_name(p) for p in np.flatnonzero(dead)} == {
        "B9",
        "C9",
        "D9",
        "A8",
        "B8",
        "C8",
        "D8",
    }
    assert area_score(np.where(dead, 0, board)) == (81, 0)


def test_time_left_in_whole_seconds_keeps_the_engines_finer_clock():
    """GTP's whole seconds would show the gate one clock for a whole game (2 s of 3 s, every
    move): the engine's own count stands while it agrees with what the controller said."""
    own = TimeSettings(3.0).spend(Clock(3.0, 0), 0.35)  # 2.65 s left by our count
    assert told_clock(own, Clock(2, 0)) == own  # "2" agrees with 2.65: keep the finer one
    assert told_clock(own, Clock(1, 0)) == Clock(1, 0)  # the controller charged more
    assert told_clock(own, Clock(3, 0)) == Clock(3, 0)  # ... or less: its word stands
    assert told_clock(own, Clock(2.5, 0)) == Clock(2.5, 0)  # it states fractions: precise
    assert told_clock(Clock(2.5, 3), Clock(2, 2)) == Clock(2, 2)  # another stone count
    assert told_clock(Clock(), Clock(2, 0)) == Clock(2, 0)  # no clock of our own yet


def test_a_clock_kept_by_our_count_never_runs_out_before_the_controllers():
    """Byo-yomi of 1 s per 60 stones, GTP's whole seconds from the controller before each move,
    our own finer count kept while it agrees (`told_clock`), and a controller that also charges
    3 ms of pipes per move: charged with the `LAG_S` the allowance reserves, our count never
    runs ahead of the controller's, and no move overdraws its clock (measured: without that
    charge, 25 of 100 games against GNU Go were lost on time)."""
    import math

    settings = TimeSettings(main=0.0, byo_time=1.0, byo_stones=60)
    times = {16: 0.011, 32: 0.015, 64: 0.025, 96: 0.043}
    policy_s, overhead_s, pipes_s = 0.005, 0.004, 0.003
    theirs = ours = settings.fresh()
    for move in range(90):
        ours = told_clock(ours, Clock(math.floor(theirs.remaining), theirs.stones))
        k = choose_budget(times, times.get, move_allowance(settings, ours, ply=2 * move))
        took = times.get(k, policy_s) + overhead_s
        assert theirs.remaining - took - pipes_s >= 0, move  # never out of time
        theirs = settings.spend(theirs, took + pipes_s)
        ours = settings.spend(ours, took + LAG_S)  # as `GtpGame.genmove` charges it


def test_time_manager():
    settings = TimeSettings(main=81.0)
    allowance = move_allowance(settings, settings.fresh(), ply=0)
    assert allowance == pytest.approx(0.8 * 81.0 / 81 - LAG_S)
    assert move_allowance(TimeSettings(), Clock(), ply=0) == float("inf")
    byo = TimeSettings(main=10.0, byo_time=30.0, byo_stones=5)
    assert move_allowance(byo, Clock(10.0, 0), ply=0) == pytest.approx(0.8 * 6.0 - LAG_S)
    assert move_allowance(byo, Clock(3.0, 2), ply=0) == pytest.approx(0.8 * 1.5 - LAG_S)
    # Spending: main time runs into byo-yomi, a period's last stone starts a new period.
    assert byo.spend(Clock(10.0, 0), 4.0) == Clock(6.0, 0)
    assert byo.spend(Clock(1.0, 0), 3.0) == Clock(28.0, 5)
    assert byo.spend(Clock(3.0, 2), 1.0) == Clock(2.0, 1)
    assert byo.spend(Clock(3.0, 1), 1.0) == Clock(30.0, 5)
    times = {16: 0.01, 32: 0.02, 64: 0.04, 96: 0.06}
    assert choose_budget(times, times.get, 1.0) == 96
    assert choose_budget(times, times.get, 0.03) == 32
    assert choose_budget(times, times.get, 0.001) == 0


def test_time_manager_searches_whenever_the_clock_affords_it():
    """`time_settings 3 0 0` with searches of 4-18 ms (96 simulations: 15-20 ms measured): the
    manager searched on none of 90 moves when it kept 50 ms per move for lag."""
    times = {16: 0.004, 32: 0.008, 64: 0.012, 96: 0.018}  # a measured table, as warm_up's
    policy_s, overhead_s = 0.002, 0.004  # the reflex move; the engine around each search
    settings = TimeSettings(main=3.0)
    assert choose_budget(times, times.get, move_allowance(settings, settings.fresh(), 0)) == 96
    clock, searched = settings.fresh(), []
    for move in range(90):  # our 90 moves of a 180-ply game, longer than pgx's cap
        k = choose_budget(times, times.get, move_allowance(settings, clock, ply=2 * move))
        searched.append(k)
        clock = settings.spend(clock, times.get(k, policy_s) + overhead_s)
        assert clock.remaining > 0, move  # never out of time
    assert sum(k > 0 for k in searched) >= 60
    assert searched[0] == 96


def test_one_slow_move_does_not_price_a_budget_out_and_an_unplayed_rung_is_estimated_long():
    """A match at 10 s of sudden death went policy-only for good after one k=16 move waited
    6.6 s behind the ladder's timing search (a running average kept k=16 at 2 s). The lower
    median of the last five times shrugs it off; a compiled rung not yet played costs 4x the
    measured budget below it per doubling, until its own first move times it."""
    from rtplan.gtp._time import TIMES_KEPT, SearchTimes

    times = SearchTimes(sims=lambda k: k)
    times.measured(16, 0.0096)
    times.measured(16, 6.6)
    assert times[16] == 0.0096 and choose_budget([16], times.__getitem__, 0.1) == 16
    times.measured(16, 6.6)  # twice in a row: the machine is slower now
    assert times[16] == 6.6
    for _ in range(TIMES_KEPT):
        times.measured(16, 0.01)
    assert times[16] == 0.01  # only the last five count
    times.compiled(64)
    assert 32 not in times and 64 in times and times[64] == pytest.approx(0.01 * 16)
    times.measured(32, 0.02)
    assert times[64] == pytest.approx(0.02 * 4)  # from the nearest budget below, measured
    times.measured(64, 0.05)
    assert times[64] == 0.05 and [k for k, _ in times.items()] == [16, 32, 64]
    copy = times.copy()
    copy.measured(64, 0.0)
    assert times[64] == 0.05


def test_go_repositions_a_state_through_its_public_api():
    """`games.go`'s position edits, which the engine builds on: handing the move to the other
    colour keeps the stones, recomputes who moves and the legal moves; komi is an input."""
    import jax

    game = games.make("speed-go-v0", initial_time=games.UNLIMITED_CLOCK)
    start = game.init(jax.random.PRNGKey(0))
    black = int(start.current_player)
    state = game.step(start, jnp.int32(go.parse_vertex("E5")))
    before = go.position(state)
    assert (before.ply, before.to_play, before.passes, before.superko) == (1, 1, 0, False)
    moved = game.reposition(state, np.int32(2), before.hashes, np.int32(-1))
    after = go.position(moved)
    assert after.to_play == 0 and np.array_equal(after.stones, before.stones)
    assert int(moved.current_player) != int(state.current_player)
    assert not bool(moved.legal_action_mask[go.parse_vertex("E5")])
    assert after.own()[go.parse_vertex("E5")] == 1  # black's stone, black to move

    # Two passes end the game: black's one stone owns the board, 81 points against komi.
    def finish(komi):
        with game.traced_komi(komi):
            s = game.step(moved, jnp.int32(PASS))
            return game.step(s, jnp.int32(PASS)).inner.rewards

    assert float(jax.jit(finish)(jnp.float32(7.5))[black]) == 1.0  # 81 points beat 7.5
    assert float(jax.jit(finish)(jnp.float32(90.0))[black]) == -1.0


def test_start_up_answers_at_once_and_genmove_waits_for_the_searches(planner_file):
    """`start` compiles in the background: the handshake, boardsize, clear_board and komi
    answer while the searches are still held back, the board's commands once the step is
    compiled, and genmove waits until the searches are ready (it once took 31 s to answer
    protocol_version)."""
    engine = GtpEngine(planner_file)
    hold, search = threading.Event(), engine._search

    def held(*args, **kwargs):
        hold.wait()
        return search(*args, **kwargs)

    engine._search = held  # the warm-up's first search waits here
    start = time.perf_counter()
    engine.start()
    first = [
        "protocol_version",
        "name",
        "version",
        "list_commands",
        "boardsize 9",
        "clear_board",
        "komi 6.5",
        "time_settings 60 0 0",
    ]
    for line in first:
        assert engine.handle(line)[0].startswith("="), line
    assert time.perf_counter() - start < 5.0
    assert not engine.planner_ready.is_set()
    assert engine.handle("play b e5")[0] == "=\n\n"  # the board is up before the searches
    answers = []
    thread = threading.Thread(target=lambda: answers.append(engine.handle("genmove w")[0]))
    thread.start()
    thread.join(1.0)
    assert thread.is_alive() and not answers  # genmove waits for the searches
    hold.set()
    thread.join(600)
    assert engine.planner_ready.is_set() and answers[0].startswith("= ")
    assert engine.komi == 6.5 and len(engine.moves) == 2  # nothing lost while it compiled


#: A black group of 6 on the first row (A1-F1) whose liberties are F2 and G1 (white on A2-E2,
#: F3, G2, H1): either leaves 7 black stones with the other one alone.
ROW_BLACK = ["A1", "B1", "C1", "D1", "E1", "F1"]
ROW_WHITE = ["A2", "B2", "C2", "D2", "E2", "F3", "G2", "H1"]


def test_the_guard_plays_the_next_best_safe_move_instead_of_a_big_self_atari(local):
    """A search that picks a move leaving 6+ own stones in atari gets the move it visited most
    among the safe ones, not a pass mid-game; with none visited, the network's best safe
    move; a pass only where no safe move is left (the seki test) or after the opponent's pass."""
    engine = local
    engine.handle("clear_board")
    engine.handle("komi 7.5")
    assert engine.handle(f"set_free_handicap {' '.join(ROW_BLACK)}")[0].startswith("=")
    for vertex in ROW_WHITE:
        assert engine.handle(f"play w {vertex}")[0].startswith("="), vertex
    state = engine._ready(engine.states[-1], 0)
    mine = go.position(state).own()
    g1, f2, e5, c7 = (parse_vertex(v) for v in ("G1", "F2", "E5", "C7"))
    assert self_atari(mine, g1) == self_atari(mine, f2) == 7
    visits = np.zeros(82, int)
    visits[[g1, f2, e5, c7]] = (50, 40, 30, 5)
    assert engine._guard(state, g1, 0.0, visits=visits) == e5  # not F2: a self-atari too
    visits[[e5, c7]] = 0
    instead = engine._guard(state, g1, 0.0, visits=visits)  # no safe move visited
    assert instead not in (PASS, g1, f2) and self_atari(mine, instead) == 0
    assert engine._guard(state, g1, 0.0) == instead  # no visits known: the same policy move
    engine.handle("play b pass")
    engine.handle("play w pass")  # the opponent passed: no visited safe move, a pass
    state = engine._ready(engine.states[-1], 0)
    assert engine._guard(state, g1, 0.0, visits=visits) == PASS


def test_a_pass_out_of_turn_is_replaced_by_a_board_move(local):
    """`play b e5`, `genmove b`: the shipped planner's search passed there (black to move right
    after its own move, a position the network never saw). Out of turn, a pass becomes the
    most-visited safe move (else the policy's); in turn, or after the opponent's pass, it
    stands."""
    engine = local
    engine.handle("clear_board")
    engine.handle("play b e5")
    state = engine._ready(engine.states[-1], 0)  # black again
    visits = np.zeros(82, int)
    d4 = parse_vertex("D4")
    visits[[PASS, d4]] = (80, 10)
    assert engine._guard(state, PASS, 0.0, visits=visits, out_of_turn=True) == d4
    policy = engine._guard(state, PASS, 0.0, visits=np.zeros(82, int), out_of_turn=True)
    assert policy < PASS and policy != parse_vertex("E5")
    assert engine._guard(state, PASS, 0.0, visits=visits) == PASS  # in turn: a searched pass
    engine.handle("play w pass")  # the opponent's pass: a pass of black's stands
    state = engine._ready(engine.states[-1], 0)
    assert engine._guard(state, PASS, 0.0, visits=visits, out_of_turn=True) == PASS


def test_seki_stones_are_neither_dead_nor_captured(local):
    """SEKI_GAME's seki: white's E6-E7 inside black's big group, sharing its last liberties D7
    and F6. Both are in seki; neither is dead, and final_status_list says so."""
    engine = local
    engine.handle("clear_board")
    for ply, move in enumerate(SEKI_GAME.split()):
        assert engine.handle(f"play {'bw'[ply % 2]} {move}")[0].startswith("="), (ply, move)
    board = np.sign(go.position(engine.states[-1]).stones)
    seki = seki_stones(board)
    assert seki[parse_vertex("E6")] and seki[parse_vertex("E7")]
    assert seki[parse_vertex("D8")] and board[parse_vertex("D8")] == 1  # black's big group
    assert not (dead_stones(board) & seki).any()
    listed = engine.handle("final_status_list seki")[0]
    assert "E6" in listed and "E7" in listed
    assert "E6" not in engine.handle("final_status_list dead")[0]
    # No seki where filling the shared liberty captures (a race the mover wins).
    board = np.zeros(81, int)
    for vertex in ("A1", "A2", "B2", "C2"):
        board[parse_vertex(vertex)] = 1
    for vertex in ("B1", "A3", "B3", "C3", "D2", "D1"):
        board[parse_vertex(vertex)] = -1
    assert not seki_stones(board).any()


def test_a_long_clock_plays_the_ladder_and_a_short_one_does_not(planner_file):
    """Budgets grow with the clock: once a clock is set, the ladder's rung (8 simulations past
    the tiny planner's 4; one rung keeps the compile short) compiles in the background, and an
    hour's clock plays it while a second's plays at most the planner's own."""
    assert ladder(96, 1536) == (192, 384, 768, 1536) and ladder(96, 191) == ()
    engine = GtpEngine(planner_file, max_simulations=8)
    assert engine.ladder == (8,)
    engine.warm_up()
    assert engine.budgets == (2, 4) and not engine.ladder_ready.is_set()  # no clock: no ladder
    assert engine.handle("time_settings 3600 0 0")[0] == "=\n\n"
    assert engine.ladder_ready.wait(600)
    assert engine.budgets == (2, 4, 8)
    # Compiled, never run in the background (a rung's search would hold the device while a
    # move waits): it is estimated until its first move.
    assert engine.search_s[8] == pytest.approx(4 * engine.search_s[4])
    assert engine.handle("genmove b")[0].startswith("= ")
    long = engine.last_choice.k
    assert engine.search_s[8] != pytest.approx(4 * engine.search_s[4])  # timed by its move
    engine.handle("time_settings 1 0 0")
    assert engine.handle("genmove w")[0].startswith("= ")
    short = engine.last_choice.k
    assert long == 8 and short <= 4, (long, short)
    assert len(engine.states[-1].inner.clocks) == 2  # the game's clocks still in ticks
