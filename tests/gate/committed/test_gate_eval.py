"""Paired evaluation (`planner.episodes` with the gate's conditions): seeds pair across
conditions and batches, each baseline picks what its definition says, policy-only equals a
plain reflex loop, the gate chooser equals `Gate.decide`."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rtplan.gate.committed.choosers import condition_names, gate_chooser
from rtplan.gate.committed.config import GateConfig
from rtplan.gate.committed.policy import Gate
from rtplan.planner import Planner
from rtplan.planner.batching import OptionRunner
from rtplan.planner.episodes import always, play, play_policy_only, random_k
from support import tiny_config

GAME = "snake-rt-v0"  # tiny: 5x5 board, horizon 200


@pytest.fixture(scope="module")
def setup():
    # Two budgets and batches of at most two games: each (k, group size, batch size) compiles
    # once, and every play below shares the same few (batch 2: groups of 1 or 2; batch 1).
    cfg = dataclasses.replace(tiny_config(GAME), budgets=(1, 2), simulations=(2, 4))
    runner = OptionRunner(Planner(cfg), max_batch=2)
    params = runner.planner.init_params(jax.random.PRNGKey(3))
    return runner, params


def test_condition_names():
    assert condition_names((1, 2), gate=True) == ["gate", "k1", "k2", "random", "policy-only"]
    assert "gate-no-value" in condition_names((1, 2), gate=True, ablations=True)
    assert "gate-no-stats" not in condition_names((1, 2), gate=True, ablations=True)
    assert "gate-no-stats" in condition_names((1, 2), gate=True, ablations=True, stats=True)
    assert "gate-no-memory" not in condition_names((1, 2), gate=True, ablations=True, stats=True)
    assert "gate-no-memory" in condition_names((1, 2), gate=True, ablations=True, memory=True)
    assert "gate" not in condition_names((1, 2), gate=False)


def test_always_k_plays_k_frames_per_decision_and_pairs_seeds(setup):
    runner, params = setup
    seeds = np.array([11, 12])
    ep = play(runner, params, seeds, always(2))
    for i in range(2):
        assert set(ep.ks[i].tolist()) == {2}
        # Each option commits k frames; only the last may be cut short by the episode's end.
        gaps = np.diff(ep.decision_frames[i])
        assert (gaps == 2).all() and ep.decision_frames[i][0] == 0
        assert ep.frames[i] <= 200 and ep.frames[i] - ep.decision_frames[i][-1] <= 2
    # Episode i plays the same game whatever else is in its batch, and again on a rerun.
    alone = play(runner, params, seeds[1:2], always(2))
    assert alone.returns[0] == ep.returns[1] and alone.frames[0] == ep.frames[1]
    np.testing.assert_array_equal(alone.ks[0], ep.ks[1])
    again = play(runner, params, seeds, always(2), record_actions=True)
    assert again.returns.tolist() == ep.returns.tolist()
    # One action per frame played, each legal for Snake (4 directions).
    assert [len(a) for a in again.actions] == ep.frames.tolist()
    assert all(set(a.tolist()) <= {0, 1, 2, 3} for a in again.actions)


def test_random_k_is_uniform_per_decision_and_reproducible(setup):
    runner, params = setup
    seeds = np.array([21, 22])
    ep = play(runner, params, seeds, random_k((1, 2), seeds), max_decisions=30)
    assert set(np.concatenate(ep.ks).tolist()) == {1, 2}
    assert max(len(k) for k in ep.ks) <= 30
    # Each episode plays its own seed's draws, the ones that seed draws alone (no other game in
    # its batch changes them), one per decision while it lives.
    for i in range(2):
        alone = random_k((1, 2), seeds[i : i + 1])
        want = [alone(None, np.ones(1, bool), t)[0] for t in range(len(ep.ks[i]))]
        np.testing.assert_array_equal(ep.ks[i], want)
    choose = random_k((1, 2), np.array([21, 22, 23]))
    draws = np.concatenate([choose(None, np.ones(3, bool), t) for t in range(300)])
    assert abs((draws == 1).mean() - 0.5) < 0.06  # 900 fair draws: SE 0.017


def test_policy_only_equals_a_reflex_loop(setup):
    runner, params = setup
    planner, game = runner.planner, runner.planner.game
    seeds = np.array([5, 6])
    ep = play_policy_only(planner, params, seeds)
    step = jax.jit(lambda s: jax.vmap(game.step)(s, planner.reflex_action(params, s)))
    for i, seed in enumerate(seeds):
        state = jax.vmap(game.init)(jax.random.PRNGKey(seed)[None])
        ret = 0.0
        while not bool(state.done[0]):
            state = step(state)
            ret += float(state.reward[0])
        assert ep.returns[i] == pytest.approx(ret) and ep.frames[i] == int(state.frame[0])
    assert all(len(k) == 0 for k in ep.ks)


def test_gate_chooser_is_the_deployed_decision(setup):
    runner, params = setup
    gate = Gate(runner.planner, GateConfig(channels=8, head_hidden=16))
    gparams = gate.init_params(jax.random.PRNGKey(1))
    game = runner.planner.game
    states = jax.vmap(game.init)(jax.random.split(jax.random.PRNGKey(0), 3))
    alive = np.ones(3, bool)
    want = gate.decide(gparams, params, states)
    np.testing.assert_array_equal(gate_chooser(gate, gparams, params)(states, alive, 0), want.k)
    assert np.allclose(want.probabilities.sum(-1), 1) and set(np.asarray(want.k).tolist()) <= {1, 2}
    # An ablation zeroes one input before the same argmax.
    x = gate.inputs(params, states)
    logits, _ = gate.apply(gparams, x.replace(value=jnp.zeros_like(x.value)))
    zeroed = np.asarray(gate.budgets)[np.asarray(jnp.argmax(logits, -1))]
    got = gate_chooser(gate, gparams, params, zero="value")(states, alive, 0)
    np.testing.assert_array_equal(got, zeroed)
    with pytest.raises(ValueError, match="cannot zero 'clock'"):
        gate_chooser(gate, gparams, params, zero="clock")


def test_a_repeated_evaluation_compiles_nothing(setup):
    """Training evaluates every few iterations: a second `play` (and policy-only run) on the
    same shapes must reuse every compiled function. Fresh traces compiled new executables at
    each evaluation (~1,200 memory mappings each on XLA:CPU) until the kernel's
    `vm.max_map_count` stopped a long training run."""
    from jax import monitoring

    runner, params = setup
    seeds = np.array([31, 32])
    compiles: list[str] = []

    def count(event: str, duration: float, **kwargs) -> None:
        if event == "/jax/compilation_cache/compile_requests_use_cache" or "backend_compile" in (
            event
        ):
            compiles.append(event)

    play(runner, params, seeds, always(1), max_decisions=5)
    play_policy_only(runner.planner, params, seeds)
    monitoring.register_event_duration_secs_listener(count)
    try:
        play(runner, params, seeds, always(1), max_decisions=5)
        play_policy_only(runner.planner, params, seeds)
    finally:
        # Its own listener only: clearing them all would take the suite's map guard too.
        monitoring.unregister_event_duration_listener(count)
    assert compiles == []
