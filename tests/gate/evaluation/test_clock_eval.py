"""Clock-game evaluation: players in `play_match`, pairing, unique games, the eval and tuning."""

from __future__ import annotations

import csv
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rtplan.gate.clock.heuristics import ClockOptions, affordable, always, greedy, proportional
from rtplan.gate.clock.players import (
    baseline_players,
    chooser_player,
    load_midpeak_table,
    midpeak_player,
    multiplex,
    pool_players,
)
from rtplan.gate.evaluation import clock as clock_eval
from rtplan.gate.evaluation import clock_report, report
from rtplan.harness.checkpoint import planner_path
from rtplan.planner import Planner
from rtplan.planner.episodes import seeds_of
from rtplan.planner.matches import (
    REFLEX,
    ClockPlayer,
    game_id,
    option_player,
    play_match,
    unique_games,
)
from support import tiny_config, write_checkpoints

GAME = "speed-hex-v0"


def _planner():
    planner = Planner(tiny_config(GAME))
    return planner, planner.init_params(jax.random.PRNGKey(0))


def test_unique_games_and_game_ids():
    start = np.zeros(3)
    a = game_id(start, np.array([0, 1]), np.array([5, 6]))
    assert a == game_id(start, np.array([0, 1]), np.array([5, 6]))
    assert a != game_id(start, np.array([0, 1]), np.array([5, 7]))
    assert a != game_id(np.ones(3), np.array([0, 1]), np.array([5, 6]))
    assert unique_games([a, "b", a, "c", "b"]).tolist() == [True, True, False, True, False]


def test_fixed_players_on_an_unlimited_clock_equal_the_plain_option():
    """Always-k with fallback (clock_heuristics.always) plays option k when the clock can pay
    every move: the same games as the planner's plain option-k player."""
    planner, params = _planner()
    opts = ClockOptions.of(planner)
    seeds = seeds_of("eval", 2)  # 4 games: few group sizes to compile
    big = 10**6
    plain = play_match(planner, params, option_player(planner, 4), REFLEX, seeds, initial_time=big)
    fixed = baseline_players(opts)["k4"]
    ours = play_match(planner, params, fixed, REFLEX, seeds, initial_time=big)
    np.testing.assert_array_equal(plain.returns, ours.returns)
    np.testing.assert_array_equal(plain.frames, ours.frames)
    assert plain.game_ids == ours.game_ids
    assert all(set(k.tolist()) <= {4} for k in ours.ks)


def test_pairing_openings_colours_and_clocks():
    """Every condition meets the same openings (the position after the opening, by seed) with
    both colours; A's clock before each move follows its options; nobody overspends."""
    planner, params = _planner()
    opts = ClockOptions.of(planner)
    seeds = seeds_of("eval", 2)  # 4 games: few group sizes to compile
    t0 = 9
    runs = {
        name: play_match(planner, params, p, REFLEX, seeds, initial_time=t0)
        for name, p in baseline_players(opts).items()
        if name in ("k2", "greedy", "random", "policy-only")
    }
    for name, ep in runs.items():
        assert ep.seeds.tolist() == [*seeds.tolist(), *seeds.tolist()]
        # A moves first in the first half: its first move is at the opening's (even) ply.
        first = [int(f[0]) for f in ep.decision_frames]
        assert all(f % 2 == 0 for f in first[:2]) and all(f % 2 == 1 for f in first[2:])
        costs = [0, *opts.simulations]
        budgets = [0, *opts.budgets]
        for ks, clock, end in zip(ep.ks, ep.features["clock"], ep.clocks, strict=True):
            o = np.array([budgets.index(int(k)) for k in ks])
            np.testing.assert_array_equal(clock, clock_report.clock_curve(o, costs, t0))
            spent = sum(costs[i] for i in o)
            assert spent <= t0, name  # the baselines never overspend
            assert end[0] == t0 - spent
    # The same openings: the first move of A (first half) happens at the same ply everywhere.
    firsts = {n: [int(f[0]) for f in ep.decision_frames] for n, ep in runs.items()}
    assert len({tuple(v) for v in firsts.values()}) == 1


def test_the_carry_changes_on_the_players_own_plies_only():
    planner, params = _planner()

    def count(carry, states, out, keys):
        return carry + 1, jnp.zeros(states.frame.shape, jnp.int32)

    seen = {}

    def init(batch):
        return jnp.zeros((batch,), jnp.int32)

    counter = ClockPlayer("counter", init, count)
    ep = play_match(planner, params, counter, REFLEX, seeds_of("eval", 2), initial_time=5)
    seen["moves"] = ep.decisions
    # The counter's moves are exactly A's moves (its carry is not observable from outside: the
    # test is that a stateful player runs and each game records one option per own move).
    assert (ep.decisions == [len(k) for k in ep.ks]).all()
    assert (np.abs(ep.frames - 2 * ep.decisions) <= 1 + 6).all()


@pytest.mark.slow  # ~2 min: compiles every group size of two batch sizes
def test_multiplexed_players_equal_separate_matches():
    planner, params = _planner()
    opts = ClockOptions.of(planner)
    seeds = seeds_of("eval", 2)
    players = [midpeak_player(opts, 0.35, 0.3), baseline_players(opts)["greedy"]]
    opp = pool_players(opts)["random"]
    together = clock_eval.play_cells(planner, params, players, opp, seeds, 10)
    for p, ep in zip(players, together, strict=True):
        alone = play_match(planner, params, p, opp, seeds, initial_time=10)
        np.testing.assert_array_equal(ep.returns, alone.returns)
        assert ep.game_ids == alone.game_ids


@pytest.mark.parametrize("t", [0, 1, 2, 3, 5, 7, 40])
def test_greedy_and_proportional_never_overspend(t):
    opts = ClockOptions(budgets=(2, 4), simulations=(2, 4), max_plies=20)
    from rtplan.gate.clock.heuristics import ClockInputs

    inputs = ClockInputs(
        my_time=jnp.full((3,), t, jnp.int32),
        opp_time=jnp.full((3,), 9, jnp.int32),
        initial_time=jnp.full((3,), 40, jnp.int32),
        ply=jnp.array([0, 6, 18], jnp.int32),
    )
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    for chooser in (greedy(opts), proportional(opts), always(opts, 4)):
        o = chooser(inputs, keys)
        assert bool(jnp.all(jnp.take_along_axis(affordable(opts, inputs.my_time), o[:, None], 1)))
        assert bool(jnp.all(opts.costs[np.asarray(o)] <= t))


def test_chooser_player_wraps_a_chooser():
    planner, params = _planner()
    opts = ClockOptions.of(planner)
    p = chooser_player("g", greedy(opts))
    states = jax.vmap(planner.game.init)(jax.random.split(jax.random.PRNGKey(1), 2))
    states = jax.vmap(planner.game.set_initial_time, (0, None))(states, 3)
    carry, o = p.choose(p.init(2), states, planner.evaluate(params, states), None)
    assert carry == () and o.tolist() == [1, 1]  # 3 ticks: budget 2 fits, 4 does not


def test_multiplex_rows():
    a = ClockPlayer("a", lambda b: (), lambda c, s, o, k: (c, jnp.zeros(s.frame.shape, jnp.int32)))
    b = ClockPlayer("b", lambda b: (), lambda c, s, o, k: (c, jnp.ones(s.frame.shape, jnp.int32)))
    both = multiplex([a, b], 2)
    states = jax.vmap(Planner(tiny_config(GAME)).game.init)(
        jax.random.split(jax.random.PRNGKey(1), 5)
    )
    _, o = both.choose(both.init(5), states, None, None)
    assert o.tolist() == [0, 0, 1, 1, 1]


@pytest.mark.slow  # ~1.5 min: the whole eval and sweep path on a tiny planner
def test_clock_eval_tuning_and_report(tmp_path):
    """`rtplan eval` for a clock game on a tiny planner: cells, resumption, the summary with
    paired differences, the figures; and midpeak's sweep writes a table the player loads."""
    root = write_checkpoints(tmp_path / "ck", game_ids=(GAME,))
    planner_file = str(planner_path(root, GAME))
    out = tmp_path / "results"
    kw = dict(t0s=(6, 14), planner_file=planner_file, out=out, log=lambda s: None)
    files = clock_eval.run_clock_eval(
        GAME, games_per_cell=4, players=["k2", "k4", "greedy", "midpeak"],
        opponents=["policy-only", "random"], **kw,
    )  # fmt: skip
    assert len(files) == 4 * 2 * 2
    rec = json.loads(files[0].read_text())
    assert len(rec["returns"]) == 4 and len(rec["game_ids"]) == 4
    again = []
    clock_eval.run_clock_eval(
        GAME, games_per_cell=4, players=["k2"], opponents=["random"], **{**kw, "log": again.append}
    )
    assert any("kept" in line for line in again)
    # A midpeak cell is kept only for the shape it was played with (a re-tuned table replays).
    mid = clock_eval.cell_file(out, GAME, "eval", "midpeak", "random", 6)
    rec = json.loads(mid.read_text())
    assert rec["midpeak_shape"] == [0.35, 0.3] and rec["gate_sha256"] is None
    mid.write_text(json.dumps({**rec, "midpeak_shape": [0.5, 1.0]}))
    again = []
    one = {**kw, "t0s": (6,), "log": again.append}
    clock_eval.run_clock_eval(
        GAME, games_per_cell=4, players=["midpeak"], opponents=["random"], **one
    )
    assert not any("kept" in line for line in again)
    assert json.loads(mid.read_text())["midpeak_shape"] == [0.35, 0.3]
    cells, rows = clock_report.summarize_cells(clock_report.load_cells(out, GAME))
    assert len(cells) == 16
    mean = {r["player"]: r for r in rows if r["t0"] == "mean"}
    best = next(p for p, r in mean.items() if r["best_fixed"])
    assert best in ("k2", "k4")
    g = mean["greedy"]
    assert g["games"] == 2 * 2 * 4 and 0 <= g["score"] <= 1
    assert g["best_fixed_name"] == best and "minus_best_fixed_se" in g
    assert (out / GAME / "clock-eval" / "eval-scores.csv").exists()
    # The README's clock table: the gate has no cells here, so it is listed as not played.
    table = clock_report.clock_readme_table({GAME: rows}).splitlines()
    assert len(table) == 3 and table[2].startswith(f"| {GAME} (16) | — | ")
    assert f"({best}) |" in table[2] and table[2].endswith(
        "| gate, k-per-t0, random, policy-only, proportional, uncertainty |"
    )
    readme = tmp_path / "README.md"
    readme.write_text(f"a\n{report.CLOCK_README_BEGIN}\nold\n{report.CLOCK_README_END}\nb\n")
    assert report.report(out, readme=readme, figures=False)["readme_updated"]
    assert readme.read_text() == (
        f"a\n{report.CLOCK_README_BEGIN}\n{chr(10).join(table)}\n{report.CLOCK_README_END}\nb\n"
    )
    figs = clock_report.clock_figures(out, GAME)
    names = ["eval-score-per-t0.png", "eval-profile.png", "eval-clocks.png"]
    assert [f.name for f in figs] == names

    table_root = tmp_path / "tables"
    best_shapes = clock_eval.tune_midpeak(
        GAME, games_per_cell=2, t0s=(8,), grid=((0.35, 0.3), (0.5, 1.0)),
        opponents=["policy-only"], planner_file=planner_file, out=out, table_root=table_root,
        log=lambda s: None,
    )  # fmt: skip
    assert set(best_shapes) == {8}
    assert load_midpeak_table(GAME, table_root) == best_shapes
    lines = (out / GAME / "clock-eval" / "midpeak-sweep.csv").read_text().splitlines()
    assert len(lines) == 1 + 2


def test_the_command_names_an_unknown_player_or_opponent(tmp_path, capsys):
    from rtplan.cli import main

    planner_file = str(planner_path(write_checkpoints(tmp_path, (GAME,)), GAME))
    argv = ["eval", "--game", GAME, "--planner", planner_file, "--out", str(tmp_path / "r")]
    assert main([*argv, "--conditions", "nobody"]) != 0
    assert "unknown player 'nobody'" in capsys.readouterr().err
    assert main([*argv, "--opponents", "k999"]) != 0
    assert "unknown opponent 'k999'" in capsys.readouterr().err
    # The bar's rules play once the bar is tuned, over the planner's budgets.
    assert main([*argv, "--conditions", "bar-nearest"]) != 0
    assert "tune it first (--tune-fixed)" in capsys.readouterr().err
    clock_report.write_clock_bar(tmp_path / "r", GAME, {6: "k3"}, {"seeds": [1_000_000]})
    assert main([*argv, "--conditions", "bar-nearest"]) != 0
    assert "the bar's budgets [3] are not the planner's [2, 4]" in capsys.readouterr().err


def _write_cells(out, players, split="eval", opponents=("random",), seeds=(0, 1)):
    """Hand-made cells: player -> T0 -> its games' results, the same against each opponent."""
    for player, by_t0 in players.items():
        for t0, r in by_t0.items():
            for opp in opponents:
                path = clock_eval.cell_file(out, GAME, split, player, opp, t0)
                path.parent.mkdir(parents=True, exist_ok=True)
                n = len(r)
                path.write_text(json.dumps({
                    "player": player, "opponent": opp, "t0": t0, "returns": r,
                    "game_ids": [f"g{t0}-{opp}-{i}" for i in range(n)], "options": ["1"] * n,
                    "clocks_end": [[t0, t0]] * n, "seeds": list(seeds), "budgets": [2, 4],
                    "simulations": [2, 4],
                }))  # fmt: skip


def test_report_writes_the_clock_table_into_the_readme(tmp_path):
    """`rtplan report` on hand-made cells: the best fixed budget and heuristic are the best
    averaged over T0, the gate's differences are paired over (T0, opponent, game), and the
    heuristics without cells are named."""
    scores = {  # player -> per (T0) 4 games' results against the one opponent
        "gate": {6: [1, 1, 0.5, 0], 14: [1, 1, 1, 0]},
        "k2": {6: [1, 0, 0.5, 0], 14: [0, 1, 1, 0]},
        "k4": {6: [0, 0, 0, 0], 14: [1, 0, 0, 0]},
        "greedy": {6: [1, 0, 0, 0], 14: [1, 1, 1, 1]},
    }
    out = tmp_path / "results"
    splits = {"eval": scores, "holdout": {"gate-x": scores["gate"], "k2": scores["k2"]}}
    for split, players in splits.items():
        _write_cells(out, players, split)
    readme = tmp_path / "README.md"
    readme.write_text(f"a\n{report.CLOCK_README_BEGIN}\nold\n{report.CLOCK_README_END}\nb\n")
    out_ = report.report(out, readme=readme, figures=False)
    assert out_["readme_updated"] and out_["rows"] == []
    row = readme.read_text().splitlines()[4]
    gate = np.array([1, 1, 0.5, 0, 1, 1, 1, 0])  # T0 6 then T0 14, as the table pools them
    k2 = np.array([1, 0, 0.5, 0, 0, 1, 1, 0])
    greedy = np.array([1, 0, 0, 0, 1, 1, 1, 1])
    d_fixed, d_heur = gate - k2, gate - greedy
    se = lambda d: d.std(ddof=1) / np.sqrt(len(d))  # noqa: E731
    cells = [
        f"{GAME} (8)",
        f"{gate.mean():.3f} ± {se(gate):.3f}",
        f"{k2.mean():.3f} ± {se(k2):.3f} (k2)",
        "—",  # the clock-aware bar: not tuned here
        f"{greedy.mean():.3f} ± {se(greedy):.3f} (greedy)",
        f"{d_fixed.mean():+.3f} ± {se(d_fixed):.3f} ({d_fixed.mean() / se(d_fixed):+.1f} SE)",
        "—",
        f"{d_heur.mean():+.3f} ± {se(d_heur):.3f} ({d_heur.mean() / se(d_heur):+.1f} SE)",
        "k-per-t0, random, policy-only, proportional, midpeak, uncertainty",
    ]
    assert row == "| " + " | ".join(cells) + " |"
    # The gate against each player, paired (what a pre-registered rule with fixed bars reads).
    with (out / GAME / "clock-eval" / "eval-pairs.csv").open() as f:
        pairs = {(r["versus"], r["t0"]): r for r in csv.DictReader(f) if r["player"] == "gate"}
    assert sorted({v for v, _ in pairs}) == ["greedy", "k2", "k4"]
    d_k4 = gate - np.array([0, 0, 0, 0, 1, 0, 0, 0])
    for versus, d in (("k2", d_fixed), ("greedy", d_heur), ("k4", d_k4)):
        assert float(pairs[versus, "mean"]["diff"]) == pytest.approx(d.mean())
        assert float(pairs[versus, "mean"]["se"]) == pytest.approx(se(d))
    assert float(pairs["k2", "6"]["diff"]) == pytest.approx(d_fixed[:4].mean())
    # The holdout split is summarised beside eval's (a second gate under its own name); the
    # README's table stays eval's.
    with (out / GAME / "clock-eval" / "holdout-pairs.csv").open() as f:
        (held,) = [r for r in csv.DictReader(f) if r["t0"] == "mean"]
    assert (held["player"], held["versus"]) == ("gate-x", "k2")
    assert float(held["diff"]) == pytest.approx(d_fixed.mean())
    assert readme.read_text().startswith(f"a\n{report.CLOCK_README_BEGIN}\n| game (games")
    assert readme.read_text().endswith(f"{report.CLOCK_README_END}\nb\n")


def _se(d):
    d = np.asarray(d, np.float64)
    return d.std(ddof=1) / np.sqrt(len(d))


def _write_sweep(out, scores, games=4):
    """A hand-made fixed-budget sweep on tuning openings: (T0, k) -> opponent -> score."""
    path = clock_eval.sweep_file(out, GAME, "fixed")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t0", "k", "opponent", "games", "score", "unique_games", "unique_score", "s"])
        for (t0, k), by in scores.items():
            for opp, score in by.items():
                w.writerow([t0, k, opp, games, score, games, score, 1.0])


def _bar_rows(out):
    clock_report.write_summary(out, GAME, "eval")
    with (out / GAME / "clock-eval" / "eval-scores.csv").open() as f:
        return {r["t0"]: r for r in csv.DictReader(f) if r["player"] == clock_report.CLOCK_BAR}


def test_the_clock_aware_bar_is_chosen_on_tuning_games_only(tmp_path):
    """The fixed budget per T0 comes from the tuning sweep alone: new evaluation scores move
    the bar's score, never its choice; new tuning scores move the choice."""
    out = tmp_path / "results"
    opps = ("random", "policy-only")
    tuning = {  # T0 6: k2 best over the pool; T0 14: k4 (mean over both opponents)
        (6, 2): {"random": 0.7, "policy-only": 0.5}, (6, 4): {"random": 0.9, "policy-only": 0.2},
        (14, 2): {"random": 0.4, "policy-only": 0.4}, (14, 4): {"random": 0.6, "policy-only": 0.3},
    }  # fmt: skip
    _write_sweep(out, tuning)
    pick = dict(budgets=(2, 4), opponents=opps, games_per_cell=4)
    assert clock_eval.pick_fixed(out, GAME, **pick) == {6: "k2", 14: "k4"}
    table = clock_report.load_clock_bar(out, GAME)
    assert table["tuned_on"] == "tuning" and table["seeds"] == [1_000_000, 1_000_001]
    assert table["tuning_scores"]["6"] == {"k2": 0.6, "k4": 0.55}
    # On the evaluation games the other budget wins at both clocks, by far.
    evals = {
        "gate": {6: [1, 0, 1, 0], 14: [1, 1, 0, 0]},
        "k2": {6: [0, 0, 0, 0], 14: [1, 1, 1, 1]},
        "k4": {6: [1, 1, 1, 1], 14: [0, 0, 0, 0]},
    }
    _write_cells(out, evals, opponents=opps)
    rows = _bar_rows(out)
    assert {t: r["picked"] for t, r in rows.items()} == {"6": "k2", "14": "k4", "mean": "k2/k4"}
    assert float(rows["mean"]["score"]) == 0.0  # k2's games at 6, k4's at 14
    # Other evaluation scores: the choice stays, the score follows the chosen budgets' games.
    _write_cells(out, {"k2": {6: [1, 1, 1, 0], 14: [0, 0, 0, 0]}}, opponents=opps)
    rows = _bar_rows(out)
    assert rows["mean"]["picked"] == "k2/k4" and float(rows["6"]["score"]) == 0.75
    # Other tuning scores: the choice moves (T0 6 to k4; a tie at 14 goes to the smaller k2).
    tuning[6, 4] = {"random": 0.9, "policy-only": 0.4}
    tuning[14, 4] = {"random": 0.5, "policy-only": 0.3}
    _write_sweep(out, tuning)
    assert clock_eval.pick_fixed(out, GAME, **pick) == {6: "k4", 14: "k2"}
    assert _bar_rows(out)["mean"]["picked"] == "k4/k2"
    # Rows of another cell size, or a T0 where a budget missed an opponent, choose nothing.
    assert clock_eval.pick_fixed(out, GAME, **{**pick, "games_per_cell": 8}) == {}
    assert clock_eval.pick_fixed(out, GAME, **{**pick, "opponents": ("k2",)}) == {}


def test_the_clock_aware_bar_never_reads_evaluation_openings(tmp_path):
    out = tmp_path / "results"
    _write_cells(out, {"gate": {6: [1, 0]}, "k2": {6: [0, 1]}}, seeds=(1_000_000,))
    clock_report.write_clock_bar(out, GAME, {6: "k2"}, {"seeds": [1_000_000, 1_000_001]})
    with pytest.raises(ValueError, match="chosen on openings these cells play"):
        clock_report.write_summary(out, GAME, "eval")
    # The tuning split's own summary (e.g. after the bar's rules played there) has no bar row.
    table = {"tuned_on": "tuning", "seeds": [1_000_000], "per_t0": {"6": "k2"}}
    cells = [{"player": "k2", "t0": 6, "seeds": [1_000_000]}]
    assert clock_report.with_clock_bar(cells, table, "tuning") == cells
    assert clock_report.with_clock_bar(cells, table, "tuning-clocks") == cells
    with pytest.raises(ValueError, match="never eval"):  # refused before any play
        clock_eval._sweep(
            None, None, {(2,): None}, ("k",), path=tmp_path / "s.csv", split="eval",
            games_per_cell=2, t0s=(6,), opponents=None, log=print,
        )  # fmt: skip


def test_the_clock_aware_bar_pairs_with_every_player(tmp_path):
    """Hand-made cells: the bar is k4 at T0 6 and k2 at T0 14, over two opponents; the gate's
    difference and its SE are paired game by game over (T0, opponent, game), in the scores,
    the pairs and the README's table; a T0 the bar was not tuned at has no bar row and no
    mean."""
    out = tmp_path / "results"
    opps = ("policy-only", "random")
    evals = {
        "gate": {6: [1, 1, 0.5, 0], 14: [1, 0, 1, 0]},
        "k2": {6: [1, 0, 0.5, 0], 14: [0, 0, 1, 0.5]},
        "k4": {6: [0, 1, 0, 0], 14: [1, 0, 0, 0]},
        "greedy": {6: [0, 0, 0, 0], 14: [0.5, 0.5, 0.5, 0.5]},
    }
    _write_cells(out, evals, opponents=opps)
    clock_report.write_clock_bar(out, GAME, {6: "k4", 14: "k2"}, {"seeds": [1_000_000]})
    readme = tmp_path / "README.md"
    readme.write_text(f"{report.CLOCK_README_BEGIN}\n{report.CLOCK_README_END}\n")
    report.report(out, readme=readme, figures=False)
    # Pooled as the tables pool: T0 6 (policy-only, random), then T0 14 (policy-only, random).
    g = np.array(evals["gate"][6] * 2 + evals["gate"][14] * 2)
    bar = np.array(evals["k4"][6] * 2 + evals["k2"][14] * 2)
    greedy = np.array(evals["greedy"][6] * 2 + evals["greedy"][14] * 2)
    with (out / GAME / "clock-eval" / "eval-scores.csv").open() as f:
        rows = {(r["player"], r["t0"]): r for r in csv.DictReader(f)}
    assert float(rows["k-per-t0", "mean"]["score"]) == pytest.approx(bar.mean())
    assert float(rows["k-per-t0", "mean"]["se"]) == pytest.approx(_se(bar))
    for t0, part in (("6", slice(0, 8)), ("14", slice(8, 16)), ("mean", slice(None))):
        d = (g - bar)[part]
        assert float(rows["gate", t0]["minus_clock_bar"]) == pytest.approx(d.mean())
        assert float(rows["gate", t0]["minus_clock_bar_se"]) == pytest.approx(_se(d))
        d = (greedy - bar)[part]
        assert float(rows["greedy", t0]["minus_clock_bar"]) == pytest.approx(d.mean())
    assert rows["k-per-t0", "mean"]["minus_clock_bar"] == ""  # not against itself
    # The single best budget is still chosen among the real fixed budgets, never the bar.
    assert rows["gate", "mean"]["best_fixed_name"] == "k2"
    with (out / GAME / "clock-eval" / "eval-pairs.csv").open() as f:
        pairs = {r["t0"]: r for r in csv.DictReader(f) if r["versus"] == "k-per-t0"}
    assert float(pairs["mean"]["diff"]) == pytest.approx((g - bar).mean())
    assert float(pairs["mean"]["se"]) == pytest.approx(_se(g - bar))
    line = readme.read_text().splitlines()[3].split(" | ")
    d = g - bar
    assert line[3] == f"{bar.mean():.3f} ± {_se(bar):.3f} (k4/k2)"
    assert line[6] == f"{d.mean():+.3f} ± {_se(d):.3f} ({d.mean() / _se(d):+.1f} SE)"
    # A bar tuned at one T0 only: its row there, no mean, and the README shows none.
    clock_report.write_clock_bar(out, GAME, {6: "k4"}, {"seeds": [1_000_000]})
    _, rows = clock_report.summarize_cells(
        clock_report.with_clock_bar(
            clock_report.load_cells(out, GAME), clock_report.load_clock_bar(out, GAME)
        )
    )
    assert [r["t0"] for r in rows if r["player"] == "k-per-t0"] == [6]
    gate = {r["t0"]: r for r in rows if r["player"] == "gate"}
    assert gate[6]["minus_clock_bar"] == pytest.approx((g - bar)[:8].mean())
    assert "minus_clock_bar" not in gate[14] and "minus_clock_bar" not in gate["mean"]
    assert " | — | " in clock_report.clock_readme_table({GAME: rows}).splitlines()[2]
    figs = clock_report.clock_figures(out, GAME)  # the bar drawn at the T0 it has
    assert [f.name for f in figs] == [
        "eval-score-per-t0.png",
        "eval-profile.png",
        "eval-clocks.png",
    ]
    # The pre-registered players' numbers are the same with or without the bar.
    _, plain = clock_report.summarize_cells(clock_report.load_cells(out, GAME))
    strip = ("minus_clock_bar", "minus_clock_bar_se")
    assert [
        {k: v for k, v in r.items() if k not in strip} for r in rows if r["player"] != "k-per-t0"
    ] == plain
    # Players played at one T0 only (a budget where a bar needs it) narrow no one's cells:
    # a row there, no mean, never the best; the figures draw them where they were played.
    _write_cells(out, {"k3": {6: [1, 1, 1, 1]}, "uncertainty": {6: [0, 0, 0, 0]}}, opponents=opps)
    _, partial = clock_report.summarize_cells(clock_report.load_cells(out, GAME))
    assert [r for r in partial if r["player"] not in ("k3", "uncertainty")] == plain
    assert [(r["player"], r["t0"]) for r in partial if r["player"] in ("k3", "uncertainty")] == [
        ("k3", 6),
        ("uncertainty", 6),
    ]
    assert len(clock_report.clock_figures(out, GAME)) == 3


@pytest.mark.slow  # ~55 s: plays and tunes at clocks of their own, each compiling
def test_clocks_flag_plays_the_asked_clocks_apart(tmp_path):
    """`--clocks` plays the clocks asked (off the pre-registered five) into `eval-clocks/`,
    summarised apart; `--tune-fixed --clocks` tunes the bar there on tuning openings."""
    from rtplan.cli import main

    planner_file = str(planner_path(write_checkpoints(tmp_path / "ck", (GAME,)), GAME))
    out = tmp_path / "r"
    argv = ["eval", "--game", GAME, "--planner", planner_file, "--out", str(out)]
    small = ["--opponents", "random", "--episodes", "2"]
    assert main([*argv, *small, "--clocks", "5", "11", "--conditions", "k2", "k4"]) == 0
    folder = out / GAME / "clock-eval"
    played = sorted(p.relative_to(folder).as_posix() for p in folder.glob("*/*/*.json"))
    assert played == [f"eval-clocks/{k}/random-T{t}.json" for k in ("k2", "k4") for t in (11, 5)]
    assert json.loads((folder / "eval-clocks/k2/random-T11.json").read_text())["t0"] == 11
    assert not (folder / "eval").exists() and (folder / "eval-clocks-scores.csv").exists()
    assert main([*argv, *small, "--tune-fixed", "--clocks", "5", "11"]) == 0
    table = clock_report.load_clock_bar(out, GAME)
    assert set(table["per_t0"]) == {"5", "11"} and table["tuned_on"] == "tuning"
    with (folder / "fixed-sweep.csv").open() as f:
        assert {(r["t0"], r["k"]) for r in csv.DictReader(f)} == {
            (t, k) for t in ("5", "11") for k in ("2", "4")
        }
    report.report(out, readme=None, figures=False)
    with (folder / "eval-clocks-scores.csv").open() as f:
        picked = {r["t0"]: r["picked"] for r in csv.DictReader(f) if r["player"] == "k-per-t0"}
    assert picked["5"] == table["per_t0"]["5"] and set(picked) == {"5", "11", "mean"}
    assert main([*argv, "--clocks", "300", "--t0", "300"]) != 0
    assert main([*argv, "--tune-fixed", "--split", "eval"]) != 0
