"""Counterfactual budget values under a committed plan (`rtplan counterfactual --committed plan
--tree-k M`): every branch commits to the plan its decision state carries, as play does; the
runs go to their own folder, record their rules, and plan without a tree is refused. A gate
fitted to them (`rtplan fit-gate`) replays them under their rules and plays under those only."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest

from rtplan.cli import main
from rtplan.gate.committed.policy import load_gate
from rtplan.gate.counterfactual import supervised
from rtplan.gate.counterfactual.values import branch_values, capped
from rtplan.gate.files import file_sha256
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.checkpoint import planner_path
from rtplan.planner import Planner
from rtplan.planner.batching import OptionRunner
from rtplan.planner.configs import with_rules
from rtplan.planner.episodes import play_from, start
from rtplan.planner.store import load_planner
from support import tiny_config, write_checkpoints, write_planner

GAME = "snake-rt-v0"
# Two budgets, and enough simulations for a plan two frames deep below one-frame edges.
PLAN = {"budgets": (1, 3), "simulations": (16, 16)}


@pytest.fixture(scope="module")
def setup():
    cfg = dataclasses.replace(tiny_config(GAME), **PLAN, committed="plan", tree_k=1)
    planner = Planner(cfg)
    params = planner.init_params(jax.random.PRNGKey(0))
    return planner, params, OptionRunner(planner, max_batch=16)


@pytest.mark.slow  # ~35 s: its own runner; test_counterfactual covers the branch machinery
def test_the_played_budgets_branch_commits_to_the_carried_plan(setup):
    """From the state always-3 reaches at frame 6 under committed="plan", the k=3 branch with
    the plan that play carries there, continued always-3, is the rest of that play exactly;
    started without the plan (its first committed frames then play the reflex) it is not."""
    planner, params, runner = setup
    seeds, horizon = np.arange(4), 24
    states, keys = start(planner.game, seeds)
    end, until = np.full(4, 6 + horizon), np.full(4, 6)
    whole, _, _ = play_from(
        runner, params, states, keys, capped(3, runner.budgets, end), seeds=seeds, until=end
    )
    before, states, keys = play_from(
        runner, params, states, keys, capped(3, runner.budgets, until), seeds=seeds, until=until
    )
    assert (np.asarray(before.plan[1]) > 0).all()  # every game carries a plan to commit to
    j = runner.budgets.index(3)

    def branched(plan):
        bv = branch_values(
            runner, params, states, keys, continuation=3, horizon=horizon, worlds=0,
            world_key=jax.random.PRNGKey(9), plan=plan,
        )  # fmt: skip
        np.testing.assert_array_equal(bv.ends[:, 0, j], whole.frames)
        return before.returns + bv.values[:, 0, j]

    np.testing.assert_allclose(branched(before.plan), whole.returns, rtol=0, atol=1e-5)
    assert not np.allclose(branched(None), whole.returns)  # the plan changed what was played


def _argv(tmp_path, *more):
    root = write_planner(tmp_path / "ck", GAME, **PLAN)
    argv = ["counterfactual", "--game", GAME, "--continuation", "3"]
    argv += ["--planner", str(planner_path(root, GAME)), "--states", "2", "--chunk", "1"]
    argv += ["--worlds", "2", "--horizon", "4", "--max-frame", "3"]
    return [*argv, "--out", str(tmp_path / "results"), *more]


def test_plan_without_a_tree_and_clock_games_are_refused_before_play(tmp_path, capsys):
    assert main(_argv(tmp_path, "--committed", "plan")) != 0
    assert 'committed "plan" needs tree_k >= 1' in capsys.readouterr().err
    assert main(_argv(tmp_path, "--tree-k", "-1")) != 0
    assert "--tree-k must be >= 0" in capsys.readouterr().err
    write_checkpoints(tmp_path / "hex", ("speed-hex-v0",))
    hex_argv = ["counterfactual", "--game", "speed-hex-v0", "--t0", "12"]
    hex_argv += ["--planner", str(planner_path(tmp_path / "hex", "speed-hex-v0"))]
    assert main([*hex_argv, "--committed", "plan", "--tree-k", "1"]) != 0
    assert "--committed, --tree-k: for committed games only" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


@pytest.mark.slow  # ~60 s: compiles its own runner
def test_a_plan_run_has_its_own_folder_and_records_its_rules(tmp_path, capsys):
    argv = _argv(tmp_path, "--committed", "plan", "--tree-k", "1")
    assert main(argv) == 0
    topic = tmp_path / "results" / GAME / "counterfactual"
    assert [p.name for p in topic.iterdir()] == ["plan-tree1"]  # never beside the reflex's
    folder = topic / "plan-tree1" / "k3-h4-w2-s0"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["committed"] == "plan" and summary["tree_k"] == 1
    chunks = sorted(folder.glob("chunk-*.json"))
    assert len(chunks) == 2
    for chunk in chunks:
        part = json.loads(chunk.read_text())
        assert (part["committed"], part["tree_k"]) == ("plan", 1)
    stamp = [c.stat().st_mtime_ns for c in chunks]
    capsys.readouterr()
    assert main(argv) == 0  # resumed: nothing played again
    assert [c.stat().st_mtime_ns for c in chunks] == stamp
    assert "states in" not in capsys.readouterr().out


def _labels(folder, planner_file, **rules):
    """A hand-written `rtplan counterfactual` folder under `rules` (none: the reflex's files,
    which hold no rules): two states at frame 6 of always-3 play, k1 paying at the first."""
    folder.mkdir(parents=True)
    values = np.zeros((2, 2, 2))
    values[0, :, 0] = [5.0, 5.2]
    part = {
        "planner_sha256": file_sha256(planner_file), **rules, "games": 2, "seeds": [0, 1],
        "frames": [6, 6], "budgets": [1, 3], "values": values.tolist(),
    }  # fmt: skip
    (folder / "chunk-0000000.json").write_text(json.dumps(part))
    (folder / "summary.json").write_text(json.dumps({"continuation": 3, **rules}))
    return str(folder)


def test_fit_gate_replays_plan_labels_under_their_rules_and_its_gate_plays_under_them_only(
    tmp_path, capsys, monkeypatch
):
    """The states of plan labels are replayed under the plan (each game carrying one at its
    state, as the counterfactual's play did), the gate records the rules, `rtplan eval` plays
    it under them and refuses it under the reflex; labels of two rules are refused."""
    planner_file = str(planner_path(write_planner(tmp_path / "ck", GAME, **PLAN), GAME))
    plan = _labels(tmp_path / "plan", planner_file, committed="plan", tree_k=1)
    reflex = _labels(tmp_path / "reflex", planner_file)
    out = tmp_path / "gate.msgpack"
    argv = ["fit-gate", "--game", GAME, "--planner", planner_file, "--out", str(out)]
    argv += ["--folds", "0", "--epochs", "2", "--gate-channels", "8", "--gate-hidden", "16"]
    assert main([*argv, "--labels", plan, reflex]) == 2
    err = capsys.readouterr().err
    assert f"the labels mix rules (committed plan, tree_k 1 in {plan}; committed reflex, " in err
    assert f"tree_k 0 in {reflex}): a gate is fitted under one set of rules" in err
    assert not out.exists()
    replayed, real = [], supervised.play_to

    def spy(runner, *args, **kwargs):
        played = real(runner, *args, **kwargs)
        replayed.append((runner.planner.config, played[0].plan))
        return played

    monkeypatch.setattr(supervised, "play_to", spy)
    assert main([*argv, "--labels", plan]) == 0
    ((pcfg, carried),) = replayed
    assert (pcfg.committed, pcfg.tree_k) == ("plan", 1)
    assert (np.asarray(carried[1]) > 0).all()  # each state's game carries a plan there
    meta = ckpt.load_metadata(out)
    assert (meta["planner_config"]["committed"], meta["planner_config"]["tree_k"]) == ("plan", 1)
    assert meta["labels_per_budget"] == {"1": 1, "3": 1}
    results = tmp_path / "results"
    ev = ["eval", "--game", GAME, "--planner", planner_file, "--gate", str(out)]
    ev += ["--split", "tuning", "--episodes", "2", "--conditions", "gate", "--out", str(results)]
    capsys.readouterr()
    assert main(ev) == 2  # under the planner's own rules, the reflex
    assert "was trained under committed plan, tree_k 1, not committed reflex, tree_k 0" in (
        capsys.readouterr().err
    )
    assert not (results / GAME).exists()
    # Under the plan `rtplan eval` loads it (its play under the plan: test_gate_plan.py).
    pcfg, _, _ = load_planner(GAME, planner_file)
    under_plan = Planner(with_rules(pcfg, committed="plan", tree_k=1))
    gate, _, _ = load_gate(out, under_plan, planner_file=planner_file)
    assert gate.planner.config.committed == "plan"
