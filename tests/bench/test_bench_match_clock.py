"""bench.match under real time controls: the referee's clocks, losses on time, `time_left`."""

from __future__ import annotations

import csv
import sys

import pytest

from bench import match
from support import FAKE_GTP_ENGINE, write_checkpoints

# ---- The clock ------------------------------------------------------------------------------


def test_a_clock_spends_main_time_then_byo_yomi_periods():
    sudden = match.TimeControl(10)
    assert sudden.fresh() == match.Clock(10.0, 0) and sudden.gtp == "10 0 0"
    assert match.charge(sudden, match.Clock(10.0), 3.5) == match.Clock(6.5, 0)
    assert match.charge(sudden, match.Clock(6.5), 6.5) is None  # nothing left: the flag falls
    assert match.charge(sudden, match.Clock(6.5), 7.0) is None

    # 10 s main, then 6 s for every 3 moves.
    byo = match.TimeControl(10, 6, 3)
    assert match.charge(byo, match.Clock(10.0), 4.0) == match.Clock(6.0, 0)
    # Past the main time: the overrun (2 s) is the first period's, this move its first stone.
    assert match.charge(byo, match.Clock(6.0), 8.0) == match.Clock(4.0, 2)
    assert match.charge(byo, match.Clock(6.0), 12.0) == match.Clock(0.0, 2)
    assert match.charge(byo, match.Clock(6.0), 12.5) is None  # overran the period too
    assert match.charge(byo, match.Clock(4.0, 2), 1.0) == match.Clock(3.0, 1)
    # The period's last stone in time: a fresh period.
    assert match.charge(byo, match.Clock(3.0, 1), 2.9) == match.Clock(6.0, 3)
    assert match.charge(byo, match.Clock(3.0, 1), 3.1) is None
    # No main time: the game starts in byo-yomi.
    assert match.TimeControl(0, 5, 1).fresh() == match.Clock(5.0, 1)
    # time_left's arguments: whole seconds, rounded down.
    assert match.Clock(6.99, 0).gtp == "6 0" and match.Clock(0.4, 2).gtp == "0 2"


@pytest.mark.parametrize("bad", [(0, 0, 0), (10, 5, 0), (10, 0, 5), (-1, 0, 0), (1.5, 0, 0)])
def test_time_settings_refuse_what_gtp_would_read_otherwise(bad):
    """Byo-yomi time without stones is no limit in GTP, stones without time a 0 s period, and
    GTP's arguments are whole seconds."""
    with pytest.raises(ValueError):
        match.TimeControl(*bad)
    argv = ["go", "--games", "2", "--option", "16", "--time-settings", *map(str, bad)]
    with pytest.raises(SystemExit, match=None if isinstance(bad[0], float) else "--time-settings"):
        match.main(argv)  # argparse refuses 1.5 itself


def test_the_clock_flags_mix_as_documented():
    for argv, message in [
        (["--games", "2"], "--option K"),
        (["--games", "2", "--time-manager", "gate"], "give it --time-settings"),
        (["--games", "2", "--option", "16", "--time-manager", "gate"], "no --time-manager"),
        (["--games", "2", "--option", "16", "--clock-gate", "g"], "needs --time-manager gate"),
        (["--games", "2", "--option", "16", "--opponent-time-settings", "9", "0", "0"], "ours"),
        (["--games", "2", "--option", "16", "--max-simulations", "0"], "--time-manager prop"),
        (
            [
                "--games",
                "2",
                "--time-manager",
                "proportional",
                "--time-settings",
                "9",
                "0",
                "0",
                "--max-simulations",
                "-1",
            ],
            ">= 0",
        ),  # fmt: skip
    ]:
        with pytest.raises(SystemExit, match=message):
            match.main(["go", *argv])


def test_the_ladder_flag_reaches_the_engine_and_names_the_manager():
    from bench.match._engines import gtp_planner_argv

    argv = [str(x) for x in gtp_planner_argv("p", None, 0, max_simulations=0)]
    assert argv[argv.index("--max-simulations") + 1] == "0"
    assert "--max-simulations" not in map(str, gtp_planner_argv("p", None, 0))
    assert "--max-simulations" not in map(str, gtp_planner_argv("p", 16, 0, max_simulations=0))


# ---- The referee, in process with a fake timer ------------------------------------------------


class FakeTimer:
    """The referee's timer: time moves only when a player thinks."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Scripted:
    """A `Player` that plays the first empty point of `ORDER`, thinking `think` fake seconds a
    move, and notes every clock command it gets."""

    ORDER = [f"{c}{r}" for r in range(9, 0, -1) for c in "abcdefghj"]

    def __init__(self, timer: FakeTimer, think: float) -> None:
        self.timer, self.think = timer, think
        self.heard: list[str] = []

    def new_game(self) -> None:
        self.stones: set[str] = set()
        self.heard = []

    def play(self, colour, move) -> None:
        self.stones.add(move)

    def genmove(self, colour):
        self.timer.now += self.think
        move = next(v for v in self.ORDER if v not in self.stones)
        self.stones.add(move)
        return move

    def over(self) -> bool:
        return False

    def time_settings(self, control) -> None:
        self.heard.append(f"time_settings {control.gtp}")

    def time_left(self, colour, clock) -> None:
        self.heard.append(f"time_left {'bw'[colour]} {clock.gtp}")


def test_referee_charges_each_genmove_and_sends_the_mover_its_clock():
    timer = FakeTimer()
    black, white = Scripted(timer, 0.5), Scripted(timer, 1.25)
    control = match.TimeControl(3, 3, 2)  # 3 s main, then 3 s per 2 moves
    record = match.referee(black, white, ["e5"], max_plies=9, time=control, timer=timer)
    # After the opening (free) white moves first: w b w b w b w b.
    assert record.end == "ply cap" and record.lost_on_time is None
    assert record.seconds == [1.25, 0.5] * 4
    assert white.heard == [
        "time_settings 3 3 2",
        "time_left w 3 0",  # main time
        "time_left w 1 0",  # 1.75 s, rounded down
        "time_left w 0 0",  # 0.5 s
        "time_left w 2 1",  # 0.75 s over the main time: 2.25 s of the period for its last stone
    ]
    assert black.heard == ["time_settings 3 3 2"] + [f"time_left b {t} 0" for t in (3, 2, 2, 1)]
    # White's fourth move (1.25 of its 2.25 s) finished the period in time: a fresh one.
    assert record.clocks == (match.Clock(1.0, 0), match.Clock(3.0, 2))


def test_a_slow_engine_loses_on_time_and_the_match_counts_it(tmp_path, capsys):
    timer = FakeTimer()
    fast, slow = Scripted(timer, 0.1), Scripted(timer, 2.0)
    record = match.referee(
        fast, slow, [], max_plies=162, time=match.TimeControl(5), timer=timer
    )  # white needs 2 s a move against 5 s sudden death: its third move is too late
    assert (record.end, record.lost_on_time) == ("time", 1)
    assert len(record.moves) == 5  # b w b w b; white's third move is not played
    assert record.clocks == (match.Clock(pytest.approx(4.7), 0), match.Clock(0.0, 0))
    assert slow.heard[-1] == "time_left w 1 0"
    # With a clock of its own (60 s), the slow side plays on and the fast one's flag stays up.
    both = (match.TimeControl(5), match.TimeControl(60))
    record = match.referee(fast, slow, [], max_plies=20, time=both, timer=timer)
    assert (record.end, record.lost_on_time) == ("ply cap", None)
    assert (fast.heard[0], slow.heard[0]) == ("time_settings 5 0 0", "time_settings 60 0 0")
    assert record.clocks == (match.Clock(pytest.approx(4.0), 0), match.Clock(pytest.approx(40.0)))
    record = match.referee(fast, slow, [], max_plies=162, time=match.TimeControl(5), timer=timer)

    # The same game from each side: a win on time as black, a loss on time as white.
    results = [match.Result(0, 1.0, record, number=1), match.Result(1, 0.0, record, number=2)]
    results[1].mean_k = 16.0
    assert results[0].won_on_time and results[1].lost_on_time
    assert results[0].time_left(0) == pytest.approx(4.7) and results[1].time_left(0) == 0.0
    assert results[0].move_seconds() == pytest.approx(0.1)
    assert results[1].move_seconds() == pytest.approx(2.0)  # its too-late move included
    s = match.summarise(results)
    assert (s["time_losses"], s["time_wins"], s["mean_k"]) == (1, 1, 16.0)
    assert s["time_left"] == pytest.approx(2.35)
    assert s["time_left_se"] == pytest.approx(2.35)  # harness.stats: sd 3.32 / sqrt(2)
    match.print_table("timed", results)
    both = capsys.readouterr().out.splitlines()[-1]
    assert both.startswith("| both | 2 | 1 | 1 | 0.50 +- 0.35 | 1 |")
    assert both.endswith("| 1 / 1 | 16.0 |")

    # Per-game rows carry the clocks; `compare` pairs two time managers' files on them.
    for name, scores in (("prop", (1.0, 0.0)), ("gate", (1.0, 1.0))):
        rows = [match.Result(i, s, record, number=i + 1) for i, s in enumerate(scores)]
        settings = {"time_manager": name, "time_settings": "5 0 0"}
        match.write_games(tmp_path / f"{name}.csv", 0, rows, **settings)
    rows = list(csv.DictReader((tmp_path / "prop.csv").open()))
    assert [(r["end"], r["lost_on_time"], r["time_left_ours"]) for r in rows] == [
        ("time", "0", "4.7"),
        ("time", "1", "0.0"),
    ]
    assert rows[0]["time_manager"] == "prop" and rows[0]["time_settings"] == "5 0 0"
    c = match.compare([tmp_path / "gate.csv"], [tmp_path / "prop.csv"])
    assert (c["n"], c["diff"], c["time_a"]["time_losses"], c["time_b"]["time_losses"]) == (
        2,
        0.5,
        1,
        1,
    )
    out = capsys.readouterr().out
    assert "B: prop at time_settings 5 0 0: our mean time left" in out
    assert "lost on time 1 of 2, our mean k -" in out


# ---- Over GTP: a fake engine, then rtplan gtp against GNU Go ---------------------------------


def test_a_slow_gtp_engine_loses_on_the_wall_clock(tmp_path):
    """A real engine over pipes, the referee's real timer: 0.4 s a move against 1 s of sudden
    death flags on the third move; both engines hear the settings and integer clocks."""
    script = tmp_path / "fake_gtp.py"
    script.write_text(FAKE_GTP_ENGINE)
    with (
        match.GtpProcess([sys.executable, script, "--sleep", "0.4"], name="slow") as slow,
        match.GtpProcess([sys.executable, script], name="fast") as fast,
    ):
        black, white = match.GtpPlayer(slow), match.GtpPlayer(fast)
        record = match.referee(black, white, [], max_plies=162, time=match.TimeControl(1))
        assert (record.end, record.lost_on_time) == ("time", 0)
        black_moves = record.seconds[::2]
        assert len(black_moves) == 3 and all(s >= 0.4 for s in black_moves)
        assert record.clocks[0].seconds == 0.0 and record.clocks[1].seconds > 0.5
        heard = slow.send("fake-timed").split(" | ")
        assert heard == ["time_settings 1 0 0", "time_left b 1 0"] + ["time_left b 0 0"] * 2
        assert fast.send("fake-timed").split(" | ")[:2] == [
            "time_settings 1 0 0",
            "time_left w 1 0",
        ]


@pytest.mark.slow
def test_rtplan_gtp_spends_a_real_clock_against_gnu_go(tmp_path, capsys):
    """`make test-slow` (~40-60 s, most of it rtplan gtp's start-up; GNU Go is installed from
    Debian when missing, as bench.match does): `rtplan gtp
    --time-manager proportional` on a tiny planner against GNU Go level 1 under 6 s of sudden
    death. Both games finish without our loss on time, and each row has its clocks and the
    budgets the manager chose. (GNU Go itself may flag: against a random planner it reads long
    games and once used 5.7 of its 6 s on a loaded 2-core machine.)"""
    planner = write_checkpoints(tmp_path / "ck", ("speed-go-v0",)) / "speed-go-v0"
    games = tmp_path / "games.csv"
    argv = ["go", "--planner", str(planner / "planner.msgpack"), "--games", "2"]
    argv += ["--time-manager", "proportional", "--time-settings", "6", "0", "0"]
    argv += ["--csv", str(tmp_path / "match.csv"), "--games-csv", str(games)]
    assert match.main(argv) == 0
    rows = list(csv.DictReader(games.open()))
    assert len(rows) == 2
    for r in rows:
        assert r["lost_on_time"] == "0" and int(r["plies"]) > 20, r
        assert 0 < float(r["time_left_ours"]) < 6
        assert r["time_manager"] == "proportional" and r["time_settings"] == "6 0 0"
        # The tiny planner's budgets are 2 and 4; the anytime ladder adds 8 to 16 x 4 = 64.
        assert 0 <= float(r["mean_k"]) <= 64
    (row,) = csv.DictReader((tmp_path / "match.csv").open())
    assert row["option"] == "proportional" and "time_settings=6 0 0" in row["settings"]
    assert "losses on time: ours / theirs" in capsys.readouterr().out
