"""The latency-aware gate: the miss rule against the env server's deadlines, the latency sources,
paired miss draws, options whose landing frame misses, and training and evaluation with misses."""

from __future__ import annotations

import json
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rtplan.cli import main
from rtplan.games import Kind
from rtplan.gate.committed.latency import (
    LatencyError,
    deadline_ms,
    decision_misses,
    draw_misses,
    load_latency,
    missed,
)
from rtplan.gate.committed.policy import load_gate
from rtplan.gate.files import file_sha256
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.checkpoint import planner_path
from rtplan.planner import Planner, landing_frame
from rtplan.planner.store import load_planner
from support import write_gate, write_planner

GAME = "snake-rt-v0"
SIMS = {1: 2, 2: 4}  # the tiny planner's simulations per budget

# The miss rule -----------------------------------------------------------------------------


@pytest.mark.parametrize("fps", [8.0, 9.0, 30.0, 240.0])
def test_the_miss_rule_is_the_env_servers_deadline(fps):
    """Option k decided at frame t: its planned action, sent at frame t's tick and arriving
    `latency` later, plays on its landing frame exactly when `missed` says it does not."""
    from rtplan.server._config import FALLBACKS
    from rtplan.server._rules import Arrival, Provenance, decide_action
    from rtplan.server._ticker import Ticker

    ticker = Ticker(1.0 / fps, start=100.0, clock=lambda: 0.0)
    legal = np.ones(4, bool)
    for k in (1, 2, 3, 4):
        for t in (0, 5, 17):
            # Frame n is published at tick n and due at tick n + 1 (`Session._run_real_time`).
            deadline = ticker.scheduled(landing_frame(t, k, kind=Kind.COMMITTED) + 1)
            for factor in (0.5, 0.99, 1.01, 3.0):
                latency = factor * deadline_ms(k, fps)
                at = ticker.scheduled(t) + latency / 1e3
                d = decide_action([Arrival(2, at)], deadline=deadline, legal=legal, fallback=0)
                on_time = d.provenance is Provenance.ON_TIME
                assert on_time == (not missed(latency, k, fps)), (k, t, factor)
                assert d.action == (2 if on_time else 0)  # a miss plays the fallback
    # A tie is on time in both (exact in binary: 8 FPS, t = 4, k = 2).
    if fps == 8.0:
        deadline = ticker.scheduled(landing_frame(4, 2, kind=Kind.COMMITTED) + 1)
        at = ticker.scheduled(4) + deadline_ms(2, fps) / 1e3
        assert at == deadline and not missed(deadline_ms(2, fps), 2, fps)
        tie = decide_action([Arrival(2, at)], deadline=deadline, legal=legal, fallback=0)
        assert tie.provenance is Provenance.ON_TIME
    # What a miss may play is what a session's fallback may be.
    from rtplan.gate.committed.config import LATENCY_FALLBACKS
    from rtplan.planner.options import FALLBACKS as CORE

    assert CORE == FALLBACKS == LATENCY_FALLBACKS


# Sources -----------------------------------------------------------------------------------


def _row(k, provenance, slack, *, fps=10.0, landing=True):
    return {"fps": fps, "seed": 1, "frame": 0, "action": 0, "k": k, "landing": landing,
            "provenance": provenance, "source": "planned", "answer_source": "planned",
            "latency_ms": None, "slack_ms": slack, "reward": 0.0}  # fmt: skip


def _jsonl(path: Path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_deploy_rows_give_each_budget_its_latency_to_the_deadline(tmp_path):
    rows = [
        _row(1, "on_time", 40.0),  # 100 ms window: 60 ms
        _row(1, "late", -5.0),  # 105 ms
        _row(1, "invalid", 90.0),  # 10 ms: on time, illegal
        _row(2, "fallback", 0.0),  # nothing came: +inf
        _row(2, "on_time", 150.0),  # 200 ms window: 50 ms
        _row(2, "on_time", 0.0, landing=False),  # a reflex frame: not a sample
        _row(None, "fallback", 0.0),  # a gated decision that never came: counted, left out
    ]
    model = load_latency(_jsonl(tmp_path / "fps_10.jsonl", rows), simulations=SIMS)
    np.testing.assert_allclose(model.samples[1], [60.0, 105.0, 10.0])
    np.testing.assert_allclose(model.samples[2], [math.inf, 50.0])
    assert model.source["kind"] == "deploy" and model.source["undecided_rows"] == 1
    # At the FPS it was measured at, the model misses what the deploy run missed.
    assert model.miss_probabilities([1, 2], 10.0).tolist() == pytest.approx([1 / 3, 1 / 2])
    assert model.miss_probability(1, 20.0) == pytest.approx(2 / 3)  # a 50 ms window
    assert model.miss_probability(2, 1.0) == 0.5  # censored: a miss at any FPS
    # Two files pool their samples.
    more = _jsonl(tmp_path / "fps_12.jsonl", [_row(1, "on_time", 0.0, fps=12.5)])
    pooled = load_latency(f"{tmp_path / 'fps_10.jsonl'},{more}", simulations=SIMS)
    assert len(pooled.samples[1]) == 4 and pooled.samples[1][-1] == pytest.approx(80.0)
    with pytest.raises(LatencyError, match=r"no latency samples for budget k=3 .*there: 1, 2\)"):
        model.miss_probability(3, 10.0)


def test_a_calibration_csv_is_a_lognormal_through_its_quantiles_plus_the_overhead(tmp_path):
    csv = tmp_path / "calibration.csv"
    csv.write_text(
        f"game,simulations,latency_ms_median,latency_ms_p95\n{GAME},2,1.0,1.5\n{GAME},6,3.0,3.3\n"
    )
    model = load_latency(str(csv), simulations={1: 2, 2: 4}, overhead_ms=0.5, game_id=GAME)
    one, two = model.samples[1], model.samples[2]
    assert np.median(one) == pytest.approx(1.5, rel=1e-3)  # 1.0 + 0.5
    assert np.percentile(one, 95) == pytest.approx(2.0, rel=5e-3)  # 1.5 + 0.5
    assert np.median(two) == pytest.approx(2.5, rel=1e-3)  # halfway from 2 to 6: 2.0 + 0.5
    assert model.miss_probability(1, 1000 / 1.5) == pytest.approx(0.5, abs=1e-3)
    assert model.miss_probability(1, 1000 / 2.0) == pytest.approx(0.05, abs=2e-3)
    assert model.source["overhead_ms"] == 0.5 and model.source["sha256"] == [file_sha256(csv)]
    with pytest.raises(LatencyError, match="no row at or around 8 simulations .budget k=3"):
        load_latency(str(csv), simulations={3: 8}, overhead_ms=0.0)
    with pytest.raises(LatencyError, match="a row of snake-rt-v0, not tetris-rt-v0"):
        load_latency(str(csv), simulations=SIMS, overhead_ms=0.0, game_id="tetris-rt-v0")


@pytest.mark.parametrize("game", ["pacman-rt-v0", "snake-rt-v0", "tetris-rt-v0"])
def test_the_committed_calibration_csvs_load_for_the_shipped_planners(game):
    root = Path(__file__).resolve().parents[3]
    cfg = ckpt.load_metadata(root / "checkpoints" / game / "planner.msgpack")["planner_config"]
    sims = dict(zip(cfg["budgets"], cfg["simulations"]))
    csv = root / "results" / game / "calibration" / "calibration.csv"
    model = load_latency(str(csv), simulations=sims, overhead_ms=2.0, game_id=game)
    ladder = np.array([model.miss_probabilities(list(sims), f) for f in (10, 100, 300, 1000)])
    assert (ladder[0] == 0).all() and (ladder[-1] == 1).all()
    assert (np.diff(ladder, axis=0) >= 0).all()  # a higher FPS never misses less


@pytest.mark.parametrize(
    ("files", "kw", "message"),
    [
        (["nope.jsonl"], {}, "latency source .*nope.jsonl does not exist"),
        (["bad.jsonl"], {}, r"bad.jsonl:2: not a JSON line"),
        (["episodes.jsonl"], {}, r"episodes.jsonl:1: not a deploy frame row \(no fps, k"),
        (["reflex.jsonl"], {}, "no landing rows with a budget"),
        (["ok.jsonl"], {"overhead_ms": 1.0}, "a fixed overhead is for a calibration CSV"),
        (["cal.csv"], {}, "times the search alone: state the service's fixed overhead"),
        (["cols.csv"], {"overhead_ms": 1.0}, "not an rtplan calibrate CSV .no latency_ms_p95"),
        (["nums.csv"], {"overhead_ms": 1.0}, r"nums.csv:3: bad simulations or latency"),
        (["ok.jsonl", "cal.csv"], {"overhead_ms": 1.0}, "all be deploy rows .* or one"),
        ([], {}, "no latency source given"),
    ],
)
def test_bad_sources_get_a_specific_error(tmp_path, files, kw, message):
    _jsonl(tmp_path / "ok.jsonl", [_row(1, "on_time", 1.0)])
    (tmp_path / "bad.jsonl").write_text(json.dumps(_row(1, "on_time", 1.0)) + "\n{not json\n")
    _jsonl(tmp_path / "episodes.jsonl", [{"inputs": {}, "seed": 1, "episode_return": 3.0}])
    _jsonl(tmp_path / "reflex.jsonl", [_row(1, "on_time", 1.0, landing=False)])
    (tmp_path / "cal.csv").write_text("simulations,latency_ms_median,latency_ms_p95\n2,1,2\n")
    (tmp_path / "cols.csv").write_text("simulations,latency_ms_median\n2,1\n")
    (tmp_path / "nums.csv").write_text(
        "simulations,latency_ms_median,latency_ms_p95\n2,1,2\nfour,1,2\n"
    )
    paths = [str(tmp_path / f) for f in files]
    with pytest.raises(LatencyError, match=message):
        load_latency(paths, simulations=SIMS, **kw)


# Paired draws ------------------------------------------------------------------------------


def test_evaluation_misses_are_paired_by_seed_and_decision():
    seeds = np.arange(2_000_000, 2_004_000)
    p = {1: 0.3, 2: 0.1, 3: 1.0}
    draw = decision_misses(seeds, p)
    ks = np.where(np.arange(len(seeds)) % 2, 1, 2)
    a = draw(7, ks)
    # The same (seed, decision) draws the same uniform in another batch, order or condition.
    rev = decision_misses(seeds[::-1][:100], p)(7, ks[::-1][:100])
    np.testing.assert_array_equal(rev, a[::-1][:100])
    low, high = draw(7, np.full(len(seeds), 2)), draw(7, np.full(len(seeds), 1))
    assert (high | ~low).all()  # common random numbers: k2 misses only where k1 does too
    assert draw(7, np.full(len(seeds), 3)).all() and not draw(7, np.zeros(len(seeds), int)).any()
    assert abs(high.mean() - 0.3) < 4 * math.sqrt(0.3 * 0.7 / len(seeds))
    assert (draw(8, ks) != a).any()  # decisions draw anew


def test_training_draws_misses_with_each_budgets_probability():
    index = jnp.tile(jnp.arange(3), 3000)
    miss = np.asarray(draw_misses(jax.random.PRNGKey(3), index, jnp.array([0.0, 0.4, 1.0])))
    by = [miss[np.asarray(index) == i].mean() for i in range(3)]
    assert by[0] == 0.0 and by[2] == 1.0 and abs(by[1] - 0.4) < 4 * math.sqrt(0.24 / 3000)


# Options whose landing frame misses --------------------------------------------------------


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A tiny Snake planner over budgets 1 and 2, a gate that plays k2 (nearly every option of
    these tests is k2 on two games: one compiled option for most of them), and a calibration
    CSV that makes every option miss (at 10^6 FPS), none (1 FPS), or half of each budget's
    (1000 FPS: each window is its budget's median latency)."""
    from rtplan.gate.trainer import prior_init

    root = tmp_path_factory.mktemp("ck")
    write_planner(root, GAME, budgets=(1, 2), simulations=(2, 4))
    path = write_gate(root, GAME, channels=8, head_hidden=16)
    pcfg, _, _ = load_planner(GAME, str(planner_path(root, GAME)))
    _, params, meta = load_gate(path, Planner(pcfg))
    ckpt.save(path, {"params": prior_init(params, (1, 2), 2, 0.99)}, meta)
    (root / "cal.csv").write_text(
        f"game,simulations,latency_ms_median,latency_ms_p95\n{GAME},2,1.0,1.2\n{GAME},4,2.0,2.4\n"
    )
    return root


def test_a_missed_landing_frame_plays_the_fallback_and_nothing_else_changes(root):
    from rtplan.gate.committed.train import _runner
    from rtplan.planner.episodes import start

    pcfg, params, _ = load_planner(GAME, str(planner_path(root, GAME)))
    planner = Planner(pcfg)
    # The trainer's runner at the batch of the tests below: they share its compiled options
    # (and, through the persistent compile cache, so does the evaluation's).
    runner = _runner(pcfg, 2, 1)
    states, keys = start(planner.game, np.array([4, 5]))
    ks = np.array([2, 2])
    plain = runner(params, keys, states, ks)
    step = jax.vmap(planner.game.step)

    @jax.jit
    def expected(reflex):
        """What a miss after the reflex frame plays, and where that leads."""
        landing = step(states, reflex)
        fallback = jax.vmap(planner.game.fallback_action)(landing)
        instead = {"game": fallback, "reflex": planner.reflex_action(params, landing)}
        return {name: (a, step(landing, a)) for name, a in instead.items()}

    want = expected(plain.actions[:, 0])
    assert int(want["game"][0][0]) != int(plain.actions[0, 1])  # a miss changes the frame
    for fallback in ("game", "reflex"):
        out = runner(params, keys, states, ks, miss=jnp.array([True, False]), fallback=fallback)
        assert int(out.actions[0, 0]) == int(plain.actions[0, 0])  # the reflex frame
        action, final = want[fallback]
        assert int(out.actions[0, 1]) == int(action[0]) and not bool(out.planned[0, 1])
        assert int(out.next_state.frame[0]) == int(final.frame[0])
        landed = float(plain.reward[0] - plain.next_state.reward[0])  # the reflex frame's
        assert float(out.reward[0]) == pytest.approx(landed + float(final.reward[0]))
        # The search is the same; only the frame it planned for played something else.
        np.testing.assert_array_equal(out.visit_counts, plain.visit_counts)
        for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(plain)):  # game 1 landed
            np.testing.assert_array_equal(np.asarray(a)[1], np.asarray(b)[1])


# Training and evaluation with simulated misses --------------------------------------------

TINY = [
    "--num-envs", "2", "--meta-steps", "2", "--epochs", "1", "--minibatches", "1",
    "--eval-episodes", "2", "--eval-max-meta-steps", "2", "--gate-channels", "8",
    "--gate-hidden", "16", "--no-progress", "--iterations", "1",
]  # fmt: skip


def _log(out: Path) -> dict:
    header, *rows = (out / "log.csv").read_text().splitlines()
    return dict(zip(header.split(","), rows[-1].split(",")))


@pytest.mark.slow  # ~48 s: three training runs; the in-process miss tests cover the model
def test_train_gate_with_latency(root, tmp_path, capsys):
    """No misses: the same update as without a latency model, bit for bit. Every option
    missing (fine-tuned from that gate): the log says so, in training and evaluation."""
    planner = str(planner_path(root, GAME))
    csv = str(root / "cal.csv")
    base = ["train-gate", "--game", GAME, "--planner", planner, *TINY]
    runs = {name: tmp_path / name for name in ("plain", "zero", "all")}
    start = ["--eval-every", "0", "--init-k", "2", "--init-prob", "0.99"]
    assert main([*base, "--out", str(runs["plain"]), *start]) == 0
    zero = ["--latency", csv, "--latency-fps", "1", "--latency-overhead-ms", "0"]
    assert main([*base, "--out", str(runs["zero"]), *start, *zero]) == 0
    pcfg, _, _ = load_planner(GAME, planner)
    params = {
        name: load_gate(out / "gate.msgpack", Planner(pcfg))[1]
        for name, out in runs.items()
        if name != "all"
    }
    for a, b in zip(jax.tree.leaves(params["plain"]), jax.tree.leaves(params["zero"])):
        np.testing.assert_array_equal(a, b)
    assert "miss_rate" not in _log(runs["plain"]) and float(_log(runs["zero"])["miss_rate"]) == 0
    init = str(runs["plain"] / "gate.msgpack")
    every = ["--latency", csv, "--latency-fps", "1e6", "--latency-overhead-ms", "0"]
    argv = [*base, "--out", str(runs["all"]), "--eval-every", "1", "--init-gate", init, *every]
    assert main(argv) == 0
    row = _log(runs["all"])
    assert float(row["miss_rate"]) == 1.0 and float(row["eval_miss_rate"]) == 1.0
    meta = ckpt.load_metadata(runs["all"] / "gate.msgpack")
    assert meta["latency"]["miss_probability"] == {"1": 1.0, "2": 1.0}
    assert meta["latency"]["fallback"] == "game" and meta["latency"]["fps"] == 1e6
    assert meta["init_gate_sha256"] == file_sha256(init)
    # Refused up front: an FPS without a source, a gate of another shape to start from.
    capsys.readouterr()
    assert main([*base, "--out", str(tmp_path / "x"), "--latency-fps", "9"]) == 2
    assert "need a latency source" in capsys.readouterr().err
    other = [*base, "--out", str(tmp_path / "y"), "--init-gate", init, "--gate-hidden", "32"]
    assert main(other) == 2
    assert "another gate network than this run trains (head_hidden 16 there, 32 here)" in (
        capsys.readouterr().err
    )


def test_eval_plays_every_condition_with_the_same_misses(root, tmp_path):
    """At 1000 FPS half of each budget's options miss; where the gate and always-k2 plan the
    same budget at a seed's decision t, they miss alike."""
    argv = ["eval", "--game", GAME, "--planner", str(planner_path(root, GAME))]
    argv += ["--conditions", "gate", "k2", "--episodes", "2", "--out", str(tmp_path)]
    argv += ["--latency", str(root / "cal.csv"), "--latency-fps", "1000"]
    argv += ["--latency-overhead-ms", "0"]
    assert main(argv) == 0
    folder = tmp_path / GAME / "eval-latency-1000fps"
    gate, k2 = (json.loads((folder / f"{c}.json").read_text()) for c in ("gate", "k2"))
    assert gate["latency"] == k2["latency"] and gate["latency"]["fallback"] == "game"
    assert gate["latency"]["miss_probability"] == {"1": 0.5, "2": 0.5}
    assert 0 < k2["miss_rate"] < 1 and not (tmp_path / GAME / "eval").exists()
    paired = 0
    for g_ks, g_miss, k_miss in zip(gate["ks"], gate["missed"], k2["missed"]):
        assert len(g_miss) == len(g_ks)
        for t, (k, m) in enumerate(zip(g_ks, g_miss[: len(k_miss)])):
            if k == "2":
                paired += 1
                assert m == k_miss[t]
    assert paired > 0
