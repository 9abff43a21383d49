"""committed="plan": the committed frames follow the previous search's plan (then the reflex),
the search lands where the world does, "reflex" plays as before, checkpoints without the field
load as "reflex", and clock games refuse "plan"."""

from __future__ import annotations

import dataclasses
import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rtplan.cli import main
from rtplan.commands.evaluation import COMMITTED_CHOICES
from rtplan.gate.evaluation.committed import run_conditions
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.checkpoint import planner_path
from rtplan.planner import Planner, config_from_dict, config_to_dict
from rtplan.planner.batching import OptionRunner
from rtplan.planner.episodes import always, cycle, eval_runner, play, seeds_of, start
from rtplan.planner.options import COMMITMENTS
from rtplan.planner.store import load_planner, save_planner
from support import tiny_config, write_gate

GAME = "snake-rt-v0"


def _config(committed: str = "plan", tree_k: int = 0, simulations=(16, 6)):
    # Two budgets and one simulation ladder for most tests here: the compiles are shared.
    return dataclasses.replace(
        tiny_config(GAME),
        budgets=(1, 3),
        simulations=simulations,
        committed=committed,
        tree_k=tree_k,
    )


@functools.cache
def _planner(committed: str = "plan", tree_k: int = 0):
    # One-frame edges below the root (tree_k 1) need more simulations for a plan 2 frames deep.
    planner = Planner(_config(committed, tree_k, (16, 6) if tree_k != 1 else (16, 16)))
    params = planner.init_params(jax.random.PRNGKey(0))
    # `option` and its search's policy (the tree), k static.
    run = jax.jit(planner._committed_option, static_argnums=(3, 7))
    return planner, params, run


@functools.cache
def _jitted(planner):
    """(reflex action, one game's step) of `planner`, jitted: one program each, not one per
    operation."""
    return jax.jit(planner.reflex_action), jax.jit(planner.game.step)


def _option(run, params, keys, states, k, plan=None):
    plan, plan_len = (None, None) if plan is None else plan
    return run(params, keys, states, k, None, None, None, "game", plan, plan_len)


def _row(tree, i):
    return jax.tree.map(lambda x: x[i], tree)


def _same_state(a, b) -> bool:
    return all(
        np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


def _world(planner, params, state, plan, plan_len, frames):
    """Plays `frames` committed frames from one state as the rule says, by hand: the plan's
    action while j < plan_len, then the reflex. Returns (actions, state after each frame)."""
    reflex_action, step = _jitted(planner)
    acts, visited = [], [state]
    for j in range(frames):
        if j < plan_len:
            a = int(plan[j])
        else:
            a = int(reflex_action(params, jax.tree.map(lambda x: x[None], state))[0])
        acts.append(a)
        state = step(state, a)
        visited.append(state)
    return acts, visited


def test_committed_frames_follow_the_plan_where_it_reaches_then_the_reflex():
    planner, params, run = _planner()
    reflex_action, step = _jitted(planner)
    states, keys = start(planner.game, seeds_of("tuning", 3))
    horizon = planner.config.plan_horizon
    # A plan that never plays the reflex: at each state, the first legal action that is not it.
    plan = np.full((3, horizon), -1, np.int32)
    for i in range(3):
        s = _row(states, i)
        for j in range(2):
            reflex = int(reflex_action(params, jax.tree.map(lambda x: x[None], s))[0])
            mask = np.asarray(s.legal_action_mask)
            plan[i, j] = next(a for a in range(len(mask)) if mask[a] and a != reflex)
            s = step(s, int(plan[i, j]))
    plan_len = np.array([2, 1, 0], np.int32)
    out, _ = _option(run, params, keys, states, 3, (jnp.asarray(plan), jnp.asarray(plan_len)))
    for i in range(3):
        acts, visited = _world(planner, params, _row(states, i), plan[i], plan_len[i], 2)
        np.testing.assert_array_equal(np.asarray(out.actions[i, :2]), acts)
        assert not np.asarray(out.planned[i, :2]).any() and bool(out.planned[i, 2])
        after = step(visited[-1], int(out.actions[i, 2]))
        assert _same_state(_row(out.next_state, i), after)
    # Where the plan reaches, the committed frames are not what the reflex plays.
    assert list(out.actions[0, :2]) == list(plan[0, :2])
    # And the output carries the next plan, -1 past its length.
    assert out.plan.shape == (3, horizon) and out.plan_len.shape == (3,)
    for i in range(3):
        n = int(out.plan_len[i])
        assert (np.asarray(out.plan[i, n:]) == -1).all() and (
            np.asarray(out.plan[i, :n]) >= 0
        ).all()


def test_a_missed_planned_action_leaves_no_plan():
    """A planned action that missed its deadline played the fallback: the world left the tree."""
    planner, params, run = _planner()
    states, keys = start(planner.game, seeds_of("tuning", 3))
    plain, _ = _option(run, params, keys, states, 1)
    miss = jnp.array([True, False, False])
    missed, _ = run(params, keys, states, 1, None, None, miss, "game", None, None)
    assert int(missed.plan_len[0]) == 0 and (np.asarray(missed.plan[0]) == -1).all()
    np.testing.assert_array_equal(missed.plan[1:], plain.plan[1:])
    np.testing.assert_array_equal(missed.plan_len[1:], plain.plan_len[1:])
    assert int(plain.plan_len[0]) > 0


def _pv_nodes(tree, i, action, depth):
    """Game i's principal-variation nodes below the root's `action`, as `plan_of` reads them."""
    node = int(tree.children_index[i, 0, action])
    nodes = []
    while node >= 0 and len(nodes) < depth:
        nodes.append(node)
        visits = np.asarray(tree.children_visits[i, node])
        if visits.max() == 0:
            break
        node = int(tree.children_index[i, node, int(visits.argmax())])
    return nodes


@pytest.mark.parametrize(("first_k", "tree_k"), [(1, 0), (3, 0), (3, 1)])
def test_the_search_lands_where_the_world_does(first_k, tree_k):
    """Option `first_k`, then option 3 on its plan. The second option's committed frames are the
    first plan's actions where it reaches (then the reflex); its search's root (its modelled
    landing state) is the state the world reaches by them; and along the way, each state the
    first search modelled below its action is the world's state at that frame."""
    planner, params, run = _planner(tree_k=tree_k)
    game = planner.game
    states, keys = start(game, seeds_of("tuning", 3))
    out1, policy1 = _option(run, params, keys, states, first_k)
    m = tree_k or first_k
    assert int(out1.plan_len.max()) >= 2, "no plan reaches both committed frames: a weak test"
    assert (np.asarray(out1.plan_len) % m == 0).all()  # whole macro edges
    keys2 = jax.vmap(lambda k: jax.random.fold_in(k, 7))(keys)
    out2, policy2 = _option(run, params, keys2, out1.next_state, 3, (out1.plan, out1.plan_len))
    tree1, tree2 = policy1.search_tree, policy2.search_tree
    for i in range(3):
        plan, n = np.asarray(out1.plan[i]), int(out1.plan_len[i])
        acts, visited = _world(planner, params, _row(out1.next_state, i), plan, n, 2)
        np.testing.assert_array_equal(np.asarray(out2.actions[i, :2]), acts)
        # The new search's root state is where the world is after the committed frames.
        assert _same_state(_row(tree2.embeddings.landing, (i, 0)), visited[2])
        # The first tree's model of those frames: its node at depth d (the edge action, then
        # m-1 reflex frames) is the world's state d*m-1 frames after the first option's end.
        nodes = _pv_nodes(tree1, i, int(out1.actions[i, -1]), planner.config.plan_horizon)
        for d, node in enumerate(nodes):
            j = d * m + m - 1  # frames after out1's landing frame
            if j > 2 or j > n + m - 1:
                break
            assert _same_state(_row(tree1.embeddings.landing, (i, node)), visited[j]), (i, d)
            frames = np.asarray(tree1.embeddings.frames[i, node])
            if d * m + m - 1 <= n:  # that edge's reflex frames are in the plan
                np.testing.assert_array_equal(plan[d * m : d * m + m - 1], frames)


def test_plan_is_threaded_through_an_episode():
    """`play` under "plan" equals a hand-threaded loop of options on the same key schedule."""
    planner, params, run = _planner()
    seeds = seeds_of("tuning", 3)
    ks = [1, 3, 1, 1, 3, 3]
    ep = play(eval_runner(planner, 3), params, seeds, cycle(ks), max_decisions=6,
              record_actions=True)  # fmt: skip
    states, keys = start(planner.game, seeds)
    split = jax.vmap(lambda k: jax.random.split(k, 2))
    plan, frames, followed = planner.empty_plan(3), [], False
    for k in ks:
        pair = split(keys)
        keys, option_keys = pair[:, 0], pair[:, 1]
        out, _ = _option(run, params, option_keys, states, k, plan)
        without, _ = _option(run, params, option_keys, states, k, planner.empty_plan(3))
        followed |= not np.array_equal(out.actions[:, : k - 1], without.actions[:, : k - 1])
        plan = (out.plan, out.plan_len)
        frames.append(np.asarray(out.actions))
        states = out.next_state
    assert followed, "no committed frame differed from the reflex: a weak test"
    by_hand = np.concatenate(frames, 1)
    for i in range(3):
        np.testing.assert_array_equal(ep.actions[i], by_hand[i, : len(ep.actions[i])])


#: `play` of the default (reflex) config before committed="plan" existed: three tuning seeds,
#: budgets 1, 3 alternating, 16 decisions (computed at main 97df819, under tests' XLA flags).
_REFLEX_REFERENCE = {
    "returns": [0.0, 1.0, 2.0],
    "frames": [32, 32, 32],
    "actions": [
        "01202102200220022002200220022002",
        "21001121310231023102310231023102",
        "10200003210321032103210321032103",
    ],
}


def test_reflex_plays_exactly_as_before():
    cfg = dataclasses.replace(_config(), committed="reflex")
    assert cfg == dataclasses.replace(tiny_config(GAME), budgets=(1, 3), simulations=(16, 6))
    planner = Planner(cfg)
    params = planner.init_params(jax.random.PRNGKey(0))
    ep = play(eval_runner(planner, 3), params, seeds_of("tuning", 3), cycle([1, 3]),
              max_decisions=16, record_actions=True)  # fmt: skip
    assert ep.returns.tolist() == _REFLEX_REFERENCE["returns"]
    assert ep.frames.tolist() == _REFLEX_REFERENCE["frames"]
    assert ["".join(map(str, a.tolist())) for a in ep.actions] == _REFLEX_REFERENCE["actions"]
    # "reflex" carries no plan, takes none and compiles nothing new for one.
    runner = OptionRunner(planner, max_batch=4)
    states, keys = start(planner.game, seeds_of("tuning", 2))
    with pytest.raises(ValueError, match="commits to the reflex: no plan"):
        runner(params, keys, states, np.array([1, 1]), plan=planner.empty_plan(2))
    with pytest.raises(ValueError, match='under committed="plan" only'):
        planner.option(params, keys, states, 1, plan=jnp.zeros((2, 9), jnp.int32),
                       plan_len=jnp.zeros((2,), jnp.int32))  # fmt: skip


def test_always_k_under_the_default_tree_commits_to_the_reflex_anyway():
    """With tree_k 0 an option-k tree models k-1 reflex frames before each edge action, so the
    first k-1 frames of its plan are reflex frames: always-k plays the same under both."""
    seeds = seeds_of("tuning", 3)
    played = {}
    for committed in COMMITMENTS:
        planner = Planner(_config(committed))
        params = planner.init_params(jax.random.PRNGKey(0))
        played[committed] = play(eval_runner(planner, 3), params, seeds, always(3),
                                 max_decisions=6, record_actions=True)  # fmt: skip
    for a, b in zip(played["reflex"].actions, played["plan"].actions, strict=True):
        np.testing.assert_array_equal(a, b)


def test_checkpoints_without_the_field_load_as_reflex(tmp_path):
    cfg = _config("plan")
    d = config_to_dict(cfg)
    assert d["committed"] == "plan" and config_from_dict(d) == cfg
    del d["committed"]
    assert config_from_dict(d).committed == "reflex"
    # A planner file written before the field existed.
    reflex = dataclasses.replace(cfg, committed="reflex")
    params = Planner(reflex).init_params(jax.random.PRNGKey(0))
    path = planner_path(tmp_path, GAME)
    save_planner(path, reflex, params)
    meta = ckpt.load_metadata(path)
    del meta["planner_config"]["committed"]
    ckpt.save(path, {"params": params}, meta)
    assert "committed" not in json.dumps(ckpt.load_metadata(path)["planner_config"])
    loaded, _, _ = load_planner(GAME, str(path))
    assert loaded.committed == "reflex" and loaded == reflex
    with pytest.raises(ValueError, match="committed must be one of"):
        dataclasses.replace(cfg, committed="plans")
    assert COMMITTED_CHOICES == COMMITMENTS


def test_clock_games_refuse_plan(capsys):
    cfg = dataclasses.replace(tiny_config("speed-hex-v0"), committed="plan")
    with pytest.raises(ValueError, match="speed-hex-v0 is a clock game"):
        Planner(cfg)
    assert main(["eval", "--game", "speed-hex-v0", "--committed", "plan"]) == 2
    assert "--committed plan is for committed-action games" in capsys.readouterr().err


def test_eval_records_the_commitment_and_keeps_plan_apart(tmp_path):
    root = tmp_path / "ck"
    cfg = _config("reflex")
    save_planner(planner_path(root, GAME), cfg, Planner(cfg).init_params(jax.random.PRNGKey(0)))
    kw = dict(split="tuning", episodes=2, planner_file=str(planner_path(root, GAME)))
    out = tmp_path / "res"
    files = run_conditions(GAME, conditions=["k3"], out=str(out), committed="plan", **kw)
    assert files["k3"] == out / GAME / "tuning-plan" / "k3.json"
    rec = json.loads(files["k3"].read_text())
    assert rec["committed"] == "plan" and set("".join(rec["ks"])) == {"3"}
    # The gate beside the planner was trained under the reflex: it plays under the reflex only.
    write_gate(root, GAME, channels=8, head_hidden=16)
    with pytest.raises(ckpt.CheckpointError, match="trained under committed reflex, tree_k 0, "):
        run_conditions(GAME, conditions=["gate"], out=str(out), committed="plan", **kw)


def test_eval_tree_k_gives_the_plan_its_own_frames_and_its_own_folder(tmp_path, capsys):
    root = tmp_path / "ck"
    cfg = dataclasses.replace(_config("reflex"), simulations=(16, 16))
    save_planner(planner_path(root, GAME), cfg, Planner(cfg).init_params(jax.random.PRNGKey(0)))
    kw = dict(split="tuning", episodes=2, planner_file=str(planner_path(root, GAME)))
    out = tmp_path / "res"
    plan = run_conditions(GAME, conditions=["k3"], out=str(out), committed="plan", tree_k=1, **kw)
    assert plan["k3"] == out / GAME / "tuning" / "plan-tree1" / "k3.json"
    rec = json.loads(plan["k3"].read_text())
    assert (rec["committed"], rec["tree_k"]) == ("plan", 1)
    reflex = run_conditions(GAME, conditions=["k3"], out=str(out), tree_k=1, **kw)
    assert reflex["k3"] == out / GAME / "tuning" / "tree1" / "k3.json"
    other = json.loads(reflex["k3"].read_text())
    # Under tree_k 1 the plan is the search's own frames: the games part where it is followed.
    assert (rec["returns"], rec["frames"]) != (other["returns"], other["frames"])
    write_gate(root, GAME, channels=8, head_hidden=16)
    with pytest.raises(
        ckpt.CheckpointError, match=r"its own rules \(--committed reflex --tree-k 0"
    ):
        run_conditions(GAME, conditions=["gate"], out=str(out), tree_k=1, **kw)
    assert main(["eval", "--game", "speed-hex-v0", "--tree-k", "1"]) == 2
    assert "--tree-k is for committed-action games" in capsys.readouterr().err
