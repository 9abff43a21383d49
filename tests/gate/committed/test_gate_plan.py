"""`rtplan train-gate --committed plan --tree-k M`: the rollouts carry each game's plan from one
option to the next (none after a reset), the run trains, resumes and exports under its rules,
and `rtplan eval` plays its gate under them only."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rtplan.cli import main
from rtplan.gate.committed.config import GateTrainConfig
from rtplan.gate.committed.train import GatePPO
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.checkpoint import planner_path
from rtplan.planner import Planner
from rtplan.planner import actors as ac
from rtplan.planner.store import save_planner
from support import tiny_config

GAME = "snake-rt-v0"
#: Two budgets, and enough simulations for plans a few frames deep below one-frame edges.
PLAN = {"budgets": (1, 3), "simulations": (16, 16)}
#: The gate network and batch sizes of every run here (the CLI's and `GatePPO`'s compile the
#: same programs: the options' runner is shared in-process, the rest hits the compile cache).
SIZES = dict(num_envs=2, eval_episodes=2, gate_channels=8, gate_hidden=16, init_k=3)


@pytest.fixture(scope="module")
def planner_file(tmp_path_factory):
    """A fresh tiny Snake planner saved under the shipped rules (reflex, tree_k 0)."""
    cfg = dataclasses.replace(tiny_config(GAME), **PLAN)
    path = planner_path(tmp_path_factory.mktemp("ck"), GAME)
    save_planner(path, cfg, Planner(cfg).init_params(jax.random.PRNGKey(0)))
    return str(path)


def test_the_rollout_commits_each_option_to_the_plan_its_game_carries(planner_file):
    """Every option gets its game's plan: none at the start, then the plan the game's previous
    option left (none where the game was reset); its committed frames play that plan where it
    reaches, and the actors leave the rollout with the last option's plans."""
    cfg = GateTrainConfig(
        game_id=GAME, planner=planner_file, meta_steps=4, minibatches=1, committed="plan",
        tree_k=1, **SIZES,
    )  # fmt: skip
    algo = GatePPO(cfg)
    assert (algo.planner_config.committed, algo.planner_config.tree_k) == ("plan", 1)
    assert algo.runner.planner.config == algo.planner_config  # in-training evaluation too
    state = algo.init()
    (shard,) = state.actors
    assert np.asarray(shard.plan[1]).tolist() == [0, 0]  # a new game has no plan
    calls = []
    runner = algo.rollouts.runner

    def spy(*args, **kwargs):
        out = runner(*args, **kwargs)
        calls.append((np.asarray(args[3]), jax.device_get(kwargs["plan"]), jax.device_get(out)))
        return out

    algo.rollouts.runner = spy
    (after,), _, _, _ = algo.rollout(state.params, state.actors, jax.random.PRNGKey(1))
    followed = 0
    for t, (ks, (plan, plan_len), out) in enumerate(calls):
        if t == 0:
            assert plan_len.tolist() == [0, 0]
        else:
            _, _, prev = calls[t - 1]
            want = np.where(prev.done, 0, prev.plan_len)
            np.testing.assert_array_equal(plan_len, want)
            np.testing.assert_array_equal(plan, np.where(prev.done[:, None], -1, prev.plan))
        for i, k in enumerate(ks):
            n = min(k - 1, plan_len[i])  # the committed frames the plan reaches
            np.testing.assert_array_equal(out.actions[i, :n], plan[i, :n])
            followed += n
    assert followed > 0  # some committed frames did play a plan
    last = calls[-1][2]
    np.testing.assert_array_equal(after.plan[1], np.where(last.done, 0, last.plan_len))
    # `advance` empties the plan of a game that starts again and keeps the others'.
    ended = last.replace(terminated=jnp.array([True, False]))
    fresh = jax.tree.map(jnp.asarray, shard.states)
    moved, _ = ac.advance(shard, jax.tree.map(jnp.asarray, ended), fresh, shard.keys)
    assert np.asarray(moved.plan[1]).tolist() == [0, int(last.plan_len[1])]
    assert (np.asarray(moved.plan[0])[0] == -1).all()
    np.testing.assert_array_equal(moved.plan[0][1], last.plan[1])


def test_plan_runs_are_refused_without_a_tree_on_clock_games_and_with_a_gate_tree(
    tmp_path, planner_file, capsys
):
    base = ["train-gate", "--game", GAME, "--out", str(tmp_path / "run"), "--planner"]
    assert main([*base, planner_file, "--committed", "plan", "--no-progress"]) == 2
    assert 'committed "plan" needs tree_k >= 1 (--tree-k 1)' in capsys.readouterr().err
    assert main([*base, planner_file, "--committed", "plans", "--tree-k", "1"]) == 2
    assert "committed 'plans' is not one of ('reflex', 'plan')" in capsys.readouterr().err
    assert main([*base, planner_file, "--tree-k", "-1"]) == 2
    assert "--tree-k must be >= 0, got -1" in capsys.readouterr().err
    plan = ["--committed", "plan", "--tree-k", "1"]
    assert main([*base, planner_file, *plan, "--gate-tree", "gate"]) == 2
    assert "gate_tree 'gate' under committed 'plan' is not supported" in capsys.readouterr().err
    hex_argv = ["train-gate", "--game", "speed-hex-v0", "--out", str(tmp_path / "hex")]
    assert main([*hex_argv, "--committed", "plan"]) == 2
    assert "--committed plan is for committed-action games" in capsys.readouterr().err
    assert main([*hex_argv, "--tree-k", "1"]) == 2
    assert "--tree-k is for committed-action games" in capsys.readouterr().err
    assert not (tmp_path / "run").exists() and not (tmp_path / "hex").exists()


@pytest.mark.slow  # ~30 s: test_gate_train covers the run's resume and export, the rollout
# test above the plan's rules
def test_a_plan_gate_trains_resumes_exports_and_evaluates_under_its_rules(
    tmp_path, planner_file, capsys
):
    out, results = tmp_path / "run", tmp_path / "results"
    base = ["train-gate", "--game", GAME, "--out", str(out)]
    sizes = [f"--{k.replace('_', '-')}={v}" for k, v in SIZES.items()]
    tiny = ["--meta-steps", "3", "--epochs", "1", "--minibatches", "1", "--eval-every", "1"]
    tiny += ["--eval-max-meta-steps", "2", "--no-progress", *sizes]
    plan = ["--committed", "plan", "--tree-k", "1"]
    assert main([*base, "--planner", planner_file, *plan, "--iterations", "1", *tiny]) == 0
    gate = out / "gate.msgpack"
    meta = json.loads((out / "gate.msgpack.json").read_text())
    assert (meta["train_config"]["committed"], meta["train_config"]["tree_k"]) == ("plan", 1)
    assert (meta["planner_config"]["committed"], meta["planner_config"]["tree_k"]) == ("plan", 1)
    header, row = ((out / "log.csv").read_text().splitlines()[i].split(",") for i in (0, -1))
    assert row[header.index("eval_mean")] != ""  # the in-training evaluation ran (under plan)
    # A resume keeps the run's rules; one that asks for others is refused.
    assert main([*base, "--resume", "--committed", "reflex", "--iterations", "2"]) == 2
    err = capsys.readouterr().err
    assert "trained under committed plan, tree_k 1, not committed reflex, tree_k 1" in err
    assert main([*base, "--resume", "--iterations", "2", "--no-progress"]) == 0
    meta = ckpt.load_metadata(gate)
    assert meta["iteration"] == 2 and meta["train_config"]["committed"] == "plan"
    # `rtplan eval` plays the gate and the always-k conditions under the gate's rules.
    ev = ["eval", "--game", GAME, "--planner", planner_file, "--gate", str(gate)]
    ev += ["--split", "tuning", "--episodes", "2", "--out", str(results)]
    assert main([*ev, *plan, "--conditions", "gate", "k3"]) == 0
    folder = results / GAME / "tuning" / "plan-tree1"
    for name in ("gate", "k3"):
        rec = json.loads((folder / f"{name}.json").read_text())
        assert (rec["committed"], rec["tree_k"]) == ("plan", 1)
    capsys.readouterr()
    # Under the planner's own rules (reflex, tree_k 0) it is refused, naming the flags.
    assert main([*ev, "--conditions", "gate"]) == 2
    err = capsys.readouterr().err
    assert "was trained under committed plan, tree_k 1, not committed reflex, tree_k 0" in err
    assert "(--committed plan --tree-k 1)" in err
    assert not (results / GAME / "tuning" / "gate.json").exists()
