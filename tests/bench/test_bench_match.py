"""bench.match's logic: the GTP referee, coordinates, openings, the binomial SE."""

from __future__ import annotations

import csv
import math
import random
import shutil
import sys
from pathlib import Path

import pytest

from bench import match
from support import FAKE_GTP_ENGINE

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake(tmp_path):
    script = tmp_path / "fake_gtp.py"
    script.write_text(FAKE_GTP_ENGINE)
    started = []

    def start(*flags: str):
        engine = match.GtpProcess([sys.executable, script, *flags], name=f"fake{len(started)}")
        started.append(engine)
        return engine

    yield start
    for engine in started:
        engine.close()


# ---- Referee ------------------------------------------------------------------------------


def test_referee_plays_the_opening_then_alternates_until_two_passes(fake):
    a, b = fake(), fake()
    record = match.referee(
        match.GtpPlayer(a), match.GtpPlayer(b), ["e5", "c3"], max_plies=match.GO_MAX_PLIES
    )
    assert record.moves[:2] == ["e5", "c3"] and record.opening == 2
    # Both fakes fill the other 79 points in order, then pass twice.
    assert record.end == "two passes"
    assert record.moves[-2:] == ["pass", "pass"] and len(record.moves) == 81 + 2
    board = record.moves[:-2]
    assert len(set(board)) == 81 and record.moves[2] == "a9"
    # Both engines saw every move: the same score (black 41 stones, white 40, komi 7.5).
    assert a.send("final_score") == b.send("final_score") == "W+6.5"
    assert match.parse_score(a.send("final_score")) == -6.5


def test_referee_stops_at_the_cap_on_resignation_and_on_a_refused_move(fake):
    a, b = fake(), fake()
    capped = match.referee(match.GtpPlayer(a), match.GtpPlayer(b), [], max_plies=10)
    assert (capped.end, len(capped.moves)) == ("ply cap", 10)

    resigner = fake("--resign-after", "3")
    record = match.referee(match.GtpPlayer(a), match.GtpPlayer(resigner), ["e5"], max_plies=162)
    assert (record.end, record.resigned) == ("resign", 1)
    assert len(record.moves) == 1 + 3 + 3  # the opening, then 3 moves each: white resigns

    class Stubborn(match.GtpPlayer):
        def genmove(self, colour):
            return "e5"  # always the same point: the other engine refuses it the second time

    record = match.referee(Stubborn(a), match.GtpPlayer(b), [], max_plies=162)
    assert record.end.startswith("refused: fake1: 'play b e5'") and "illegal move" in record.end
    assert record.moves == ["e5", "a9", "e5"]


def test_gtp_process_raises_on_error_answers(fake):
    engine = fake()
    assert engine.send("name") == "fake"
    with pytest.raises(match.Refused, match="unknown command"):
        engine.send("fly_away")
    engine.send("play b e5")
    with pytest.raises(match.Refused, match="illegal move"):
        engine.send("play w e5")


# ---- Numbers, openings, coordinates ------------------------------------------------------------


def test_summarise_counts_unique_games_and_margins():
    record = match.GameRecord(["e5", "c3", "pass", "pass"], 2, "two passes")
    other = match.GameRecord(["e5", "c3", "d4", "pass", "pass"], 2, "two passes")
    results = [
        match.Result(0, 1.0, record, margin=4.5, margin_rtplan=4.5),
        match.Result(1, 0.0, record, margin=-10.5, margin_rtplan=2.5, disagree=True),
        match.Result(0, 1.0, other, margin=0.5, margin_rtplan=0.5),
    ]
    s = match.summarise(results)
    assert (s["n"], s["wins"], s["unique"], s["disagreements"]) == (3, 2.0, 2, 1)
    assert s["win_rate"] == pytest.approx(2 / 3)
    assert s["margin"] == pytest.approx(-5.5 / 3)
    assert s["margin_rtplan"] == pytest.approx(7.5 / 3)


def test_append_csv_writes_the_header_once(tmp_path):
    path = tmp_path / "results" / "match.csv"
    match.append_csv(path, {"game": "speed-go-v0", "n": 2, "margin": None})
    match.append_csv(path, {"game": "speed-hex-v0", "n": 4, "wins": "3"})
    lines = path.read_text().splitlines()
    assert lines[0] == ",".join(match.CSV_FIELDS) and len(lines) == 3
    rows = list(csv.DictReader(lines))
    assert (rows[0]["game"], rows[0]["n"], rows[0]["margin"]) == ("speed-go-v0", "2", "")
    assert (rows[1]["game"], rows[1]["wins"]) == ("speed-hex-v0", "3")


def test_games_csv_pairs_two_matches_game_by_game(tmp_path, capsys):
    """Two matches on the same seed: `compare` pairs them by game number (the same opening and
    colour) and gives the difference +- the SE of the per-game differences."""
    opening = match.GameRecord([5, 7, 9], 2, "game over")
    other = match.GameRecord([6, 8, 9], 2, "game over")
    a = [
        match.Result(i % 2, s, opening if i < 2 else other, number=i + 1)
        for i, s in enumerate([1.0, 1.0, 0.0, 1.0])
    ]
    b = [
        match.Result(i % 2, s, opening if i < 2 else other, number=i + 1)
        for i, s in enumerate([0.0, 1.0, 0.0, 0.0, 1.0])
    ]  # a fifth game A did not play
    b[4].record = match.GameRecord([1, 2, 3], 2, "game over")
    match.write_games(tmp_path / "a.csv", 0, a)
    match.write_games(tmp_path / "b.csv", 0, b)
    rows = list(csv.DictReader((tmp_path / "a.csv").open()))
    assert rows[0]["moves"] == "5 7 9" and rows[0]["plies"] == "3"
    assert [(r["game"], r["colour"], r["opening"], r["score"]) for r in rows[:2]] == [
        ("1", "b", "5 7", "1"),
        ("2", "w", "5 7", "1"),
    ]
    assert (
        match.main(["compare", "--a", str(tmp_path / "a.csv"), "--b", str(tmp_path / "b.csv")]) == 0
    )
    c = match.paired_comparison(
        match.read_games([tmp_path / "a.csv"]), match.read_games([tmp_path / "b.csv"])
    )
    # differences 1, 0, 0, 1: mean 0.5, sd sqrt(1/3), SE sd / 2
    assert (c["n"], c["a"], c["b"], c["only_b"]) == (4, 0.75, 0.25, 1)
    assert c["diff"] == 0.5 and c["se"] == pytest.approx(math.sqrt(1 / 3) / 2)
    assert "+0.50 +- 0.29" in capsys.readouterr().out
    # Matches on two seeds pool; another seed alone shares no game; a game twice is refused.
    match.write_games(tmp_path / "a1.csv", 1, a)
    match.write_games(tmp_path / "b1.csv", 1, b)
    pooled = match.compare(
        [tmp_path / "a.csv", tmp_path / "a1.csv"], [tmp_path / "b.csv", tmp_path / "b1.csv"]
    )
    assert (pooled["n"], pooled["diff"]) == (8, 0.5)
    assert pooled["se"] == pytest.approx(math.sqrt(2 / 7) / math.sqrt(8))
    with pytest.raises(SystemExit, match="fewer than 2 games in common"):
        match.compare([tmp_path / "a.csv"], [tmp_path / "b1.csv"])
    with pytest.raises(SystemExit, match=r"game \(0, 1\) twice"):
        match.compare([tmp_path / "a.csv", tmp_path / "a.csv"], [tmp_path / "b.csv"])
    b[0].record = other
    match.write_games(tmp_path / "b.csv", 0, b)
    with pytest.raises(SystemExit, match=r"game \(0, 1\) has different openings"):
        match.compare([tmp_path / "a.csv"], [tmp_path / "b.csv"])
    (tmp_path / "bad.csv").write_text("date,n\n1,2\n")
    with pytest.raises(SystemExit, match="is not a --games-csv file"):
        match.compare([tmp_path / "a.csv"], [tmp_path / "bad.csv"])


def test_random_openings_are_seeded_short_distinct_and_varied():
    points = match.GO_OPENING_POINTS
    first = [match.random_opening(i, points, seed=0) for i in range(200)]
    assert first == [match.random_opening(i, points, seed=0) for i in range(200)]
    assert first != [match.random_opening(i, points, seed=1) for i in range(200)]
    assert all(2 <= len(o) <= 4 and len(set(o)) == len(o) for o in first)
    assert {len(o) for o in first} == {2, 3, 4}
    assert len({tuple(o) for o in first}) >= 195  # two-ply ones can repeat (49 x 48)
    # Go openings stay off the edge: no capture or suicide is possible there with four stones.
    for opening in first:
        for vertex in map(match.go_vertex, opening):
            assert vertex[0] not in "aj" and vertex[1] not in "19", vertex


def test_go_vertices_match_pgx_and_round_trip():
    from rtplan.games.go import SpeedGo

    for point in range(81):
        vertex = match.go_vertex(point)
        assert vertex == SpeedGo.action_names[point].lower()  # pgx: row 0 at the top
        assert match.go_point(vertex) == point
    assert (match.go_vertex(0), match.go_vertex(8), match.go_vertex(80)) == ("a9", "j9", "j1")
    assert match.parse_score("B+3.5") == 3.5 and match.parse_score("0") == 0.0
    with pytest.raises(ValueError):
        match.parse_score("W+Resign")


@pytest.mark.skipif(
    not (shutil.which("gnugo") or Path(match.DEBIAN_GNUGO).exists()), reason="no GNU Go"
)
def test_gnu_go_puts_our_vertices_where_pgx_does():
    """A random opening sent to GNU Go: its stones are on pgx's points for those vertices."""
    engine = match.GtpProcess([match.ensure_gnugo(), "--mode", "gtp"], name="gnugo")
    with engine:
        engine.send("boardsize 9")
        opening = match.random_opening(7, range(81), plies=(4, 4))
        for ply, point in enumerate(opening):
            engine.send(f"play {'bw'[ply % 2]} {match.go_vertex(point)}")
        for colour, name in enumerate(("black", "white")):
            listed = engine.send(f"list_stones {name}").split()
            assert sorted(match.go_point(v) for v in listed) == sorted(opening[colour::2])


@pytest.mark.skipif(
    not (shutil.which("gnugo") or Path(match.DEBIAN_GNUGO).exists()), reason="no GNU Go"
)
def test_dead_stones_left_on_the_board_are_counted_by_gnu_go(capsys):
    """`--dead-stones`: black walls rows 3 and 7, white's lone stone at E5 is left on the board
    by two passes. GNU Go calls it dead and scores black; a game that pgx (which counts it
    alive) gave to white counts as a flipped winner."""
    cols = "abcdefghj"
    blacks = [f"{c}3" for c in cols] + [f"{c}7" for c in cols]
    whites = ["e5"] + ["pass"] * (len(blacks) - 1)
    moves = [m for pair in zip(blacks, whites, strict=True) for m in pair] + ["pass", "pass"]
    record = match.GameRecord(moves, 0, "two passes")
    as_black = match.Result(0, 1.0, record, number=1)
    as_white = match.Result(1, 1.0, record, number=2)  # a win for white by some other count
    engine = match.GtpProcess([match.ensure_gnugo(), "--mode", "gtp"], name="gnugo")
    with engine:
        engine.send("boardsize 9")
        for r in (as_black, as_white):
            match.judge_dead_stones(engine, r, replay=True)
    assert as_black.dead == as_white.dead == (0, 1)
    assert (as_black.dead_verdict, as_white.dead_verdict) == (1.0, -1.0)
    match.print_dead_stones([as_black, as_white])
    out = capsys.readouterr().out
    assert "2 of 2 games, 0 black and 2 white stones in all" in out
    assert "GNU Go's winner differs in 1 of 2" in out


def test_hex_translation_rejects_swap():
    assert [match.hex_to_spiel(a) for a in (0, 12, 120)] == [0, 12, 120]
    assert match.spiel_to_hex(60) == 60
    with pytest.raises(ValueError, match="swap"):
        match.hex_to_spiel(match.HEX_SWAP)


def test_hex_games_agree_in_both_engines():
    """Random games played move by move in our Speed Hex and open_spiel's hex: the same board
    after every move, the same end, the same winner (the last mover)."""
    pyspiel = pytest.importorskip("pyspiel")
    import jax

    from rtplan import games

    game = games.make(match.HEX_GAME, initial_time=games.UNLIMITED_CLOCK)
    step = jax.jit(game.step)
    spiel_game = pyspiel.load_game("hex", {"board_size": 11})
    rng = random.Random(0)
    for g in range(6):
        ours, theirs = game.init(jax.random.PRNGKey(g)), spiel_game.new_initial_state()
        cells = list(range(match.HEX_CELLS))
        rng.shuffle(cells)
        for ply, cell in enumerate(cells):
            ours = step(ours, cell, 0)
            theirs.apply_action(match.hex_to_spiel(cell))
            assert match.our_hex_board(ours) == match.spiel_hex_board(theirs), (g, ply)
            assert bool(ours.terminated) == theirs.is_terminal(), (g, ply)
            if theirs.is_terminal():
                break
        winner = ply % 2  # black (x) moved first
        assert theirs.returns()[winner] == 1.0
        mover_id = int(ours.inner.board._player_order[winner])
        assert float(ours.inner.rewards[mover_id]) == 1.0


@pytest.mark.slow
def test_rtplan_gtp_plays_full_games_against_gnu_go(tmp_path, capsys):
    """`make test-slow`: the shipped Speed Go planner, through `rtplan gtp`, plays a full game
    with each colour against GNU Go level 1 (installed from Debian when missing), to two passes
    or the ply cap, and the match's row reaches the CSV."""
    out = tmp_path / "match.csv"
    assert match.main(["go", "--games", "2", "--option", "16", "--csv", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("game ") >= 2 and "we play black" in printed and "we play white" in printed
    (row,) = csv.DictReader(out.open())
    assert row["game"] == "speed-go-v0" and row["opponent"] == "gnugo level 1"
    assert int(row["n"]) == 2 and 0 <= float(row["wins"]) <= 2


def test_open_spiel_go_vertices_and_rules_match_pgx():
    """open_spiel's 9x9 go names its actions as GTP does (a1 bottom left) and plays by pgx's
    rules: random games with captures, replayed move by move in both, keep the same legal moves
    and end together; at the end pgx's area winner is open_spiel's."""
    pyspiel = pytest.importorskip("pyspiel")
    import jax
    import numpy as np

    from rtplan import games

    spiel_game = pyspiel.load_game("go", {"board_size": 9, "komi": match.KOMI})
    actions = match.spiel_go_actions(spiel_game)
    assert actions["a1"] == 0 and actions["j9"] == 80 and actions["pass"] == 81
    vertices = {a: v for v, a in actions.items()}
    game = games.make(match.GO_GAME, initial_time=games.UNLIMITED_CLOCK)
    step = jax.jit(game.step)
    rng = random.Random(0)
    for g in range(3):
        ours, theirs = game.init(jax.random.PRNGKey(g)), spiel_game.new_initial_state()
        for ply in range(match.GO_MAX_PLIES):
            legal_ours = {
                match.go_vertex(p) if p < 81 else "pass"
                for p in np.flatnonzero(np.asarray(ours.legal_action_mask))
            }
            legal_theirs = {vertices[a] for a in theirs.legal_actions()}
            assert legal_ours == legal_theirs, (g, ply)
            # Mostly board moves (so stones get captured), a pass now and then.
            vertex = rng.choice(sorted(legal_ours - {"pass"}) or ["pass"])
            if rng.random() < 0.03:
                vertex = "pass"
            ours = step(ours, 81 if vertex == "pass" else match.go_point(vertex), 0)
            theirs.apply_action(actions[vertex])
            assert bool(ours.terminated) == theirs.is_terminal(), (g, ply)
            if theirs.is_terminal():
                break
        assert theirs.is_terminal(), g
        order = np.asarray(ours.inner.board._player_order)  # player id of black, of white
        rewards = np.asarray(ours.inner.board.rewards)[order]  # black's, white's
        assert rewards.tolist() == theirs.returns(), g


def test_the_one_go_rule_difference_is_positional_superko():
    """The move that voids a match game: a move that recreates an earlier position (not a simple
    ko) is legal in both engines and ends the game at once, but open_spiel's go scores it a draw
    (0, 0) while pgx scores it a loss for the mover (and `rtplan gtp` refuses it)."""
    pyspiel = pytest.importorskip("pyspiel")
    import jax
    import numpy as np

    from rtplan import games
    from support import SUPERKO_MOVES, SUPERKO_REPEAT

    spiel_game = pyspiel.load_game("go", {"board_size": 9, "komi": match.KOMI})
    actions = match.spiel_go_actions(spiel_game)
    game = games.make(match.GO_GAME, initial_time=games.UNLIMITED_CLOCK)
    step = jax.jit(game.step)
    ours, theirs = game.init(jax.random.PRNGKey(0)), spiel_game.new_initial_state()
    for vertex in SUPERKO_MOVES:
        ours = step(ours, 81 if vertex == "pass" else match.go_point(vertex), 0)
        theirs.apply_action(actions[vertex])
    assert not bool(ours.terminated) and not theirs.is_terminal()
    point = match.go_point(SUPERKO_REPEAT)
    assert bool(ours.legal_action_mask[point]) and actions[SUPERKO_REPEAT] in theirs.legal_actions()
    ours = step(ours, point, 0)
    theirs.apply_action(actions[SUPERKO_REPEAT])
    assert bool(ours.terminated) and theirs.is_terminal()
    assert int(ours.frame) < match.GO_MAX_PLIES
    assert theirs.returns() == [0.0, 0.0]
    # White (the mover) lost: its reward is -1.
    order = np.asarray(ours.inner.board._player_order)  # player id of black, of white
    assert np.asarray(ours.inner.board.rewards)[order].tolist() == [1.0, -1.0]


def test_planner_opponent_needs_its_checkpoint():
    with pytest.raises(SystemExit, match="--opponent-planner"):
        match.main(["go", "--opponent", "planner", "--games", "2", "--option", "16"])


@pytest.mark.slow
@pytest.mark.parametrize(("game", "option"), [("go", "16"), ("hex", "8")])
def test_a_planner_against_itself_wins_exactly_half(game, option, tmp_path):
    """`make test-slow`: head to head, the shipped planner against itself. Both sides are the
    same deterministic player, so each opening's two games are the same moves with the colours
    swapped: one win each, 0.50 exactly."""
    shipped = ROOT / "checkpoints" / f"speed-{game}-v0" / "planner.msgpack"
    out = tmp_path / "match.csv"
    argv = [game, "--opponent", "planner", "--opponent-planner", str(shipped)]
    games = tmp_path / "games.csv"
    argv += ["--games", "4", "--option", option, "--csv", str(out), "--games-csv", str(games)]
    assert match.main(argv) == 0
    scores = [float(r["score"]) for r in csv.DictReader(games.open())]
    assert len(scores) == 4 and scores[0] + scores[1] == scores[2] + scores[3] == 1.0
    (row,) = csv.DictReader(out.open())
    assert row["opponent"] == f"planner {shipped}" and int(row["n"]) == 4
    assert float(row["wins"]) == 2 and int(row["unique"]) == 2
    if game == "go":
        assert float(row["margin"]) == 0.0 and int(row["disagreements"]) == 0


def test_handicap_openings_place_black_stones_with_white_passing_then_a_ply_each():
    for stones in range(2, 10):
        points = match.GO_HANDICAP[stones].split()
        for index in range(20):
            opening = match.handicap_opening(stones, index, seed=0)
            assert opening[: 2 * stones - 1 : 2] == points  # black's stones, in order
            assert opening[1 : 2 * stones - 1 : 2] == ["pass"] * (stones - 1)
            white, black = opening[2 * stones - 1 :]
            assert len(opening) == 2 * stones + 1  # white moves next
            assert len({*points, white, black}) == stones + 2
            assert all(match.go_point(v) in match.GO_OPENING_POINTS for v in (white, black))
        assert len({tuple(match.handicap_opening(stones, i)) for i in range(20)}) > 10
    with pytest.raises(ValueError, match="2 to 9"):
        match.handicap_opening(10, 0)
    with pytest.raises(SystemExit, match="--handicap"):
        match.main(
            ["go", "--opponent", "mcts", "--handicap", "4", "--games", "2", "--option", "16"]
        )


@pytest.mark.skipif(
    not (shutil.which("gnugo") or Path(match.DEBIAN_GNUGO).exists()), reason="no GNU Go"
)
def test_handicap_points_are_gnu_gos_own():
    with match.GtpProcess([match.ensure_gnugo(), "--mode", "gtp"], name="gnugo") as engine:
        engine.send("boardsize 9")
        for stones, points in match.GO_HANDICAP.items():
            engine.send("clear_board")
            assert engine.send(f"fixed_handicap {stones}").lower().split() == points.split()
