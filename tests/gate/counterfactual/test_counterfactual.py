"""Counterfactual budget values (`gate.counterfactual.values`): every budget from one copy of a
state with the same keys, the played budget's branch equal to `play`, the same frames scored."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from rtplan.gate.counterfactual.values import (
    BranchValues,
    branch_rows,
    branch_values,
    capped,
    cross_fitted_gain,
    diagnose,
)
from rtplan.planner import Planner
from rtplan.planner.batching import OptionRunner
from rtplan.planner.episodes import play_from, start
from support import tiny_config

GAME = "snake-rt-v0"  # chance events (food) after init: re-keying matters


@pytest.fixture(scope="module")
def setup():
    planner = Planner(tiny_config(GAME))
    params = planner.init_params(jax.random.PRNGKey(0))
    # Groups pad to 1 or 16 games: a game's result does not depend on its group's size, and
    # each size is one more compile per budget and batch.
    runner = OptionRunner(planner, max_batch=16, growth=16.0)
    return planner, params, runner


def test_the_played_budgets_branch_continues_play_exactly(setup):
    """From the state always-2 reaches at frame 4, branching without re-keying and continuing
    always-2 for 24 frames: the k=2 branch plus what came before is `play_from`'s return over
    the same 28 frames, seed by seed (seed 1's episode ends inside the horizon)."""
    planner, params, runner = setup
    seeds, horizon = np.arange(4), 24
    states, keys = start(planner.game, seeds)
    end = np.full(4, 4 + horizon)
    whole, _, _ = play_from(
        runner, params, states, keys, capped(2, runner.budgets, end), seeds=seeds, until=end
    )
    until = np.full(4, 4)
    before, states, keys = play_from(
        runner, params, states, keys, capped(2, runner.budgets, until), seeds=seeds, until=until
    )
    running = ~np.asarray(states.done)
    assert running.any() and (whole.frames < end).any()  # an episode ends inside the horizon
    bv = branch_values(
        runner,
        params,
        states,
        keys,
        continuation=2,
        horizon=horizon,
        worlds=0,
        world_key=jax.random.PRNGKey(9),
    )
    assert bv.values.shape == (4, 1, len(runner.budgets))
    j = runner.budgets.index(2)
    got = before.returns + np.where(running, bv.values[:, 0, j], 0.0)
    np.testing.assert_allclose(got, whole.returns, rtol=0, atol=1e-5)
    np.testing.assert_array_equal(np.where(running, bv.ends[:, 0, j], whole.frames), whole.frames)


def test_every_budget_starts_from_one_copy_with_the_same_keys(setup):
    planner, params, runner = setup
    states, keys = start(planner.game, np.arange(3))
    budgets = runner.budgets
    rows, row_keys, first = branch_rows(
        planner.game, states, keys, budgets, 2, jax.random.PRNGKey(1)
    )
    k = len(budgets)
    leaves = [np.asarray(x).reshape(3, 2, k, *np.shape(x)[1:]) for x in jax.tree.leaves(rows)]
    for x in leaves:  # identical across budgets within (state, world)
        np.testing.assert_array_equal(x, np.broadcast_to(x[:, :, :1], x.shape))
    rk = np.asarray(row_keys).reshape(3, 2, k, -1)
    np.testing.assert_array_equal(rk, np.broadcast_to(np.asarray(keys)[:, None, None], rk.shape))
    np.testing.assert_array_equal(first.reshape(3, 2, k), np.broadcast_to(budgets, (3, 2, k)))
    # The two worlds differ in the future's key only: same position, different chance events.
    differ = [not np.array_equal(x[:, 0], x[:, 1]) for x in leaves]
    assert any(differ)
    obs0 = np.asarray(jax.vmap(planner.game.observe)(rows)).reshape(3, 2, k, -1)
    np.testing.assert_array_equal(obs0[:, 0], obs0[:, 1])


def test_branches_are_scored_on_the_same_frames(setup):
    planner, params, runner = setup
    states, keys = start(planner.game, np.arange(2))
    horizon = 6
    with pytest.raises(ValueError, match="largest budget"):
        branch_values(
            runner, params, states, keys, continuation=3, horizon=3, worlds=2,
            world_key=jax.random.PRNGKey(0),
        )  # fmt: skip
    bv = branch_values(
        runner, params, states, keys, continuation=3, horizon=horizon, worlds=2,
        world_key=jax.random.PRNGKey(0),
    )  # fmt: skip
    start_frame = np.asarray(states.frame)[:, None, None]
    assert (bv.ends <= start_frame + horizon).all()
    # A branch stops short of the horizon only where its game ended: replay those to check.
    short = bv.ends < start_frame + horizon
    assert (~short).any()
    assert bv.values.shape == (2, 2, len(runner.budgets))


def test_capped_never_crosses_the_horizon():
    choose = capped(3, (1, 2, 3, 4), np.array([10, 10, 10, 10]))

    class S:
        frame = np.array([5, 7, 8, 9])

    assert choose(S, np.ones(4, bool), 1).tolist() == [3, 3, 2, 1]
    assert capped(3, (1, 2, 3, 4), None)(S, np.ones(4, bool), 0).tolist() == [3] * 4


def test_diagnose_counts_the_states_where_a_budget_pays():
    # 3 states, 4 worlds, budgets (1, 2, 3); continuation 2.
    base = np.zeros((3, 4, 3))
    base[0, :, 0] = [5.0, 5.5, 4.5, 5.0]  # k=1 beats k=2 by 5 +- 0.2: pays
    base[1, :, 2] = [3.0, -3.0, 2.0, -2.0]  # k=3: mean 0, noisy: does not pay
    base[2, :, 0] = [-1.0, -1.0, -1.2, -0.8]  # k=1 worse: does not pay
    bv = BranchValues(
        values=base,
        ends=np.zeros_like(base, np.int64),
        budgets=(1, 2, 3),
        continuation=2,
        horizon=8,
        frames=np.zeros(3, np.int64),
        seeds=np.arange(3),
    )
    got = diagnose(bv)
    assert got["share_of_states_where_a_budget_pays"] == pytest.approx(1 / 3)
    assert got["share_expected_by_chance"] == pytest.approx(1 - (1 - 0.02275) ** 2, abs=1e-4)
    assert got["mean_gain_where_it_pays"] == pytest.approx(5.0)
    assert got["per_budget"]["1"]["pays"] == pytest.approx(1 / 3)
    assert got["per_budget"]["2"]["pays"] == 0.0
    # The oracle takes the best mean per state, clipped at 0: (5 + 0 + 0) / 3.
    assert got["oracle_mean_gain"] == pytest.approx(5.0 / 3)
    # Cross-fitted: state 0 picks k=1 on either half and scores 4.75 and 5.25 on the other;
    # states 1 and 2 keep k=2 on both halves (k=3's halves average 0, not more).
    assert got["cross_fitted_oracle_gain"] == pytest.approx(5.0 / 3)
    assert got["cross_fitted_oracle_gain_se"] == pytest.approx(np.std([5, 0, 0], ddof=1) / 3**0.5)


def test_cross_fitting_charges_the_oracle_for_picks_that_noise_made():
    """A budget that looks better on one half of the worlds only: the plain oracle counts its
    noise as gain (or 0), the cross-fitted one pays for the wrong pick on the other half."""
    values = np.zeros((2, 4, 2))  # continuation index 0
    values[0, :, 1] = [2.0, 2.0, -2.0, -2.0]  # no true gain: first half up, second down
    values[1, :, 1] = [3.0, 3.0, 3.0, 3.0]  # a true gain of 3 in every world
    assert cross_fitted_gain(values, 0).tolist() == [-1.0, 3.0]
    with pytest.raises(ValueError, match="at least two worlds"):
        cross_fitted_gain(values[:, :1], 0)


def _command(tmp_path):
    from rtplan.harness.checkpoint import planner_path
    from support import write_checkpoints

    planner = planner_path(write_checkpoints(tmp_path / "ck", (GAME,)), GAME)
    argv = ["counterfactual", "--game", GAME, "--continuation", "2", "--planner", str(planner)]
    argv += ["--states", "2", "--chunk", "1", "--worlds", "2", "--horizon", "4"]
    return argv + ["--max-frame", "3", "--out", str(tmp_path / "results")]


def test_the_command_refuses_bad_input_before_it_plays(tmp_path, capsys):
    from rtplan.cli import main

    argv = _command(tmp_path)
    assert main([*argv[:2], "speed-hex-v0", *argv[3:]]) != 0
    assert "clock game" in capsys.readouterr().err
    assert main([*argv, "--worlds", "1"]) != 0
    assert "--worlds must be >= 2" in capsys.readouterr().err
    assert main([*argv, "--continuation", "7"]) != 0
    assert "continuation k=7 is not one of" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


@pytest.mark.slow  # ~40 s: compiles its own runner
def test_the_command_writes_chunks_and_resumes(tmp_path, capsys):
    import json

    from rtplan.cli import main

    argv = _command(tmp_path)
    assert main(argv) == 0
    folder = tmp_path / "results" / GAME / "counterfactual" / "k2-h4-w2-s0"
    chunks = sorted(folder.glob("chunk-*.json"))
    assert [c.name for c in chunks] == ["chunk-0000000.json", "chunk-0000001.json"]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["worlds"] == 2 and summary["continuation"] == 2 and summary["horizon"] == 4
    assert 0.0 <= summary["share_of_states_where_a_budget_pays"] <= 1.0
    # A rerun keeps the chunks written (resumable): it plays nothing.
    before = chunks[1].stat().st_mtime_ns
    capsys.readouterr()
    chunks[0].write_text(json.dumps({**json.loads(chunks[1].read_text()), "seconds": 1000.0}))
    assert main(argv) == 0
    assert chunks[1].stat().st_mtime_ns == before
    assert json.loads((folder / "summary.json").read_text())["seconds"] >= 1000.0


def test_labels_keep_the_continuation_unless_a_budget_pays():
    from rtplan.gate.counterfactual.supervised import label

    values = np.zeros((3, 4, 3))
    values[0, :, 2] = [3.0, 3.1, 2.9, 3.0]  # budget index 2 pays clearly
    values[1, :, 0] = [4.0, -4.0, 3.0, -3.0]  # index 0 noisy: keep the continuation (1)
    values[2, :, 0] = [1.0, 1.1, 0.9, 1.0]  # both 0 and 2 pay: the larger mean wins
    values[2, :, 2] = [2.0, 2.1, 1.9, 2.0]
    assert label(values, 1).tolist() == [2, 1, 2]
    assert label(values, 1, z=100.0).tolist() == [1, 1, 1]


def test_the_gate_fits_labels_that_differ_between_states(setup):
    """Supervised targets: the budget that pays differs from state to state; the fitted
    gate's argmax reproduces them, its inputs replayed from (seed, frame) as sampled."""
    from rtplan.gate.committed.config import GateConfig
    from rtplan.gate.committed.policy import Gate
    from rtplan.gate.counterfactual.supervised import fit, state_inputs

    planner, params, runner = setup
    gate = Gate(planner, GateConfig(channels=8, head_hidden=16))
    seeds = np.arange(8)
    frames = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    x = state_inputs(gate, runner, params, seeds, frames, 2)
    assert x.obs.shape[0] == 8
    targets = np.array([0, 3, 1, 2, 0, 3, 1, 2], np.int32)
    key = jax.random.PRNGKey(0)
    fitted, history = fit(gate, gate.init_params(key), x, targets, epochs=150, lr=1e-2, key=key)
    assert history[-1] < history[0]
    logits, _ = gate.apply(fitted, x)
    assert np.asarray(logits.argmax(-1)).tolist() == targets.tolist()


def test_held_out_picks_never_see_their_own_game_and_are_scored_by_its_values(setup, monkeypatch):
    """Each fold's gate is fitted without the held-out games' states; a rule every state
    shares (index 0 pays +1) is learned from the others and scored with the held-out values."""
    from rtplan.gate.committed.config import GateConfig
    from rtplan.gate.committed.policy import Gate
    from rtplan.gate.counterfactual import supervised

    planner, params, runner = setup
    gate = Gate(planner, GateConfig(channels=8, head_hidden=16))
    seeds = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    x = supervised.state_inputs(gate, runner, params, seeds, np.array([0, 2] * 4), 2)
    values = np.zeros((8, 2, len(runner.budgets)))
    values[:, :, 0] = [[1.5, 0.5]] * 8  # index 0 pays +1 over the continuation (index 1)
    fitted, real = [], supervised.fit

    def spy(gate, params, inputs, targets, **kw):
        fitted.append(np.asarray(inputs.obs).reshape(len(targets), -1))
        return real(gate, params, inputs, targets, **kw)

    monkeypatch.setattr(supervised, "fit", spy)
    gain, picks = supervised.held_out_gain(
        gate, x, np.zeros(8, np.int32), values, 1, groups=seeds, folds=2, epochs=60, lr=1e-2,
        key=jax.random.PRNGKey(0),
    )  # fmt: skip
    assert len(fitted) == 2 and [len(f) for f in fitted] == [4, 4]
    obs = np.asarray(x.obs).reshape(8, -1)
    for f in fitted:  # a game's two states are fitted together or not at all
        rows = [i for i in range(8) if any(np.array_equal(obs[i], r) for r in f)]
        assert len(rows) == 4 and len(set(seeds[rows].tolist())) == 2
    assert picks.tolist() == [0] * 8 and gain.tolist() == [1.0] * 8
    with pytest.raises(ValueError, match="4 games cannot be split into 5 folds"):
        supervised.held_out_gain(
            gate, x, np.zeros(8, np.int32), values, 1, groups=seeds, folds=5,
            key=jax.random.PRNGKey(0),
        )  # fmt: skip


@pytest.mark.slow  # ~40 s: replays the states with its own runner
def test_fit_gate_writes_a_gate_that_loads_with_its_labels_provenance(tmp_path):
    import json

    from rtplan.cli import main
    from rtplan.gate.committed.policy import load_gate
    from rtplan.gate.files import file_sha256
    from rtplan.harness import checkpoint as ckpt
    from rtplan.harness.checkpoint import planner_path
    from rtplan.planner.store import load_planner
    from support import write_checkpoints

    planner_file = planner_path(write_checkpoints(tmp_path / "ck", (GAME,)), GAME)
    folder = tmp_path / "labels"
    folder.mkdir()
    budgets = list(tiny_config(GAME).budgets)
    values = np.zeros((4, 2, len(budgets)))
    values[:2, :, 0] = [[5.0, 5.2], [5.1, 4.9]]  # the first two states: k1 pays
    part = {
        "planner_sha256": file_sha256(planner_file),
        "games": 4,
        "seeds": [0, 1, 2, 3],
        "frames": [0, 2, 0, 2],
        "budgets": budgets,
        "values": values.tolist(),
    }
    (folder / "chunk-0000000.json").write_text(json.dumps(part))
    (folder / "summary.json").write_text(json.dumps({"continuation": 2}))
    out = tmp_path / "gate.msgpack"
    argv = ["fit-gate", "--game", GAME, "--labels", str(folder), "--out", str(out)]
    argv += ["--planner", str(planner_file), "--epochs", "100", "--lr", "0.01"]
    argv_fit = [*argv, "--gate-channels", "8", "--gate-hidden", "16", "--gate-stats"]
    assert main([*argv_fit, "--folds", "2"]) == 0
    meta = ckpt.load_metadata(out)
    assert meta["held_out_folds"] == 2 and "held_out_gain_se" in meta
    assert meta["trained_by"] == "supervised" and meta["labels_per_budget"]["1"] == 2
    assert meta["labels_per_budget"]["2"] == 2 and meta["fit_agreement"] == 1.0
    pcfg, _, _ = load_planner(GAME, str(planner_file))
    gate, _, _ = load_gate(out, Planner(pcfg), planner_file=str(planner_file))
    assert gate.config.stats
    # Labels of another planner are refused.
    other = planner_path(write_checkpoints(tmp_path / "other", (GAME,), seed=1), GAME)
    assert main([*argv[:-6], "--planner", str(other)]) != 0
