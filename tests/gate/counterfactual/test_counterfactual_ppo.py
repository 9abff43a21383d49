"""PPO with the counterfactual critic (`gate.counterfactual.ppo`): the surrogate's gradient is
the exact policy gradient and its clip binds, the gate starts at its prior, and a killed run
resumes to the gate an unbroken run trains."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rtplan.cli import main
from rtplan.gate.committed.config import GateConfig
from rtplan.gate.committed.policy import Gate, load_gate
from rtplan.gate.counterfactual.config import CounterfactualPPOConfig
from rtplan.gate.counterfactual.ppo import advantages, surrogate_loss
from rtplan.gate.trainer import prior_init
from rtplan.harness.checkpoint import planner_path
from rtplan.planner import Planner
from rtplan.planner.episodes import start
from support import tiny_config, write_checkpoints

GAME = "snake-rt-v0"


def test_advantages_are_centred_on_the_behaviour_policy():
    values = np.array([[[1.0, 3.0, 0.0], [3.0, 1.0, 0.0]]])  # [S=1, M=2, K=3]: means 2, 2, 0
    probs = np.array([[0.5, 0.25, 0.25]])
    adv = advantages(values, probs)
    np.testing.assert_allclose(adv, [[0.5, 0.5, -1.5]])
    assert abs((probs * adv).sum()) < 1e-12  # zero in expectation under the policy


def test_the_surrogate_gradient_is_the_policy_gradient_and_its_clip_binds():
    old = jnp.array([[0.7, 0.2, 0.1]])
    adv = jnp.array([[-1.0, 2.0, 0.5]])
    grad = jax.grad(lambda z: surrogate_loss(z, old, adv, clip=0.2, entropy=0.0))(jnp.log(old))
    # d/dz_j of sum_k pi_k A_k at pi = old: pi_j (A_j - sum_k pi_k A_k); the loss is its minus.
    expected = old * (adv - (old * adv).sum(-1, keepdims=True))
    np.testing.assert_allclose(-grad, expected, rtol=1e-5)
    # Past 1 + clip on a budget with a positive advantage its term stops pulling.
    z = jnp.log(jnp.array([[0.55, 0.35, 0.10]]))  # budget 1's ratio 1.75 > 1.2
    grad = jax.grad(
        lambda z: surrogate_loss(z, old, jnp.array([[0.0, 1.0, 0.0]]), clip=0.2, entropy=0.0)
    )(z)
    np.testing.assert_allclose(grad, 0.0, atol=1e-7)


def test_the_fresh_gate_plays_its_prior_at_every_state():
    planner = Planner(tiny_config(GAME))
    pparams = planner.init_params(jax.random.PRNGKey(0))
    gate = Gate(planner, GateConfig(channels=8, head_hidden=16))
    k = gate.budgets[2]
    params = prior_init(gate.init_params(jax.random.PRNGKey(1)), gate.budgets, k, 0.9)
    states, _ = start(planner.game, np.arange(8))
    logits, _ = gate.apply(params, gate.inputs(pparams, states))
    probs = np.asarray(jax.nn.softmax(logits))
    np.testing.assert_allclose(probs[:, 2], 0.9, atol=0.02)
    np.testing.assert_allclose(probs[:, [0, 1, 3]], 0.1 / 3, atol=0.02)


def test_the_config_refuses_bad_settings():
    with pytest.raises(ValueError, match="prior"):
        CounterfactualPPOConfig(continuation=2, prior=1.0)
    with pytest.raises(ValueError, match="worlds"):
        CounterfactualPPOConfig(continuation=2, worlds=0)


@pytest.fixture(scope="module")
def ckpt_root(tmp_path_factory):
    return write_checkpoints(tmp_path_factory.mktemp("ckpt"), (GAME,))


def _run(ckpt_root, out, rounds: int, *extra: str) -> int:
    return main(
        [
            "train-gate-cf",
            "--game",
            GAME,
            "--out",
            str(out),
            "--planner",
            str(planner_path(ckpt_root, GAME)),
            "--continuation",
            "2",
            "--rounds",
            str(rounds),
            "--states",
            "4",
            "--worlds",
            "1",
            "--horizon",
            "8",
            "--max-frame",
            "12",
            "--epochs",
            "2",
            "--minibatch",
            "2",
            "--lr",
            "0.01",
            "--gate-channels",
            "8",
            "--gate-hidden",
            "16",
            *extra,
        ]
    )


@pytest.mark.slow  # ~58 s: three training runs; train-gate's resume test covers the shared harness
def test_a_killed_run_resumes_to_the_gate_an_unbroken_run_trains(ckpt_root, tmp_path, capsys):
    assert _run(ckpt_root, tmp_path / "whole", 2) == 0
    assert _run(ckpt_root, tmp_path / "broken", 1) == 0
    # Without --resume an existing run is refused, and nothing in it changes.
    assert _run(ckpt_root, tmp_path / "broken", 2) == 2
    assert "--resume" in capsys.readouterr().err
    assert _run(ckpt_root, tmp_path / "broken", 2, "--resume") == 0
    # Another setting than the run's is refused on resume.
    assert _run(ckpt_root, tmp_path / "broken", 3, "--resume", "--worlds", "2") == 2
    assert "other settings" in capsys.readouterr().err

    planner = Planner(tiny_config(GAME))
    pfile = planner_path(ckpt_root, GAME)
    gates = [
        load_gate(tmp_path / run / "gate.msgpack", planner, planner_file=pfile)
        for run in ("whole", "broken")
    ]
    for a, b in zip(jax.tree.leaves(gates[0][1]), jax.tree.leaves(gates[1][1]), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    meta = gates[0][2]
    assert meta["trained_by"] == "ppo-counterfactual-critic"
    assert meta["rounds_done"] == 2 and "train-gate-cf" in meta["command"]
    rows = [
        [json.loads(line) for line in (tmp_path / run / "rounds.jsonl").read_text().splitlines()]
        for run in ("whole", "broken")
    ]
    assert [r["round"] for r in rows[1]] == [1, 2]
    for a, b in zip(*rows, strict=True):
        assert a["states"] == b["states"] and a["loss"] == pytest.approx(b["loss"])
        assert a["q_minus_continuation"] == pytest.approx(b["q_minus_continuation"])


def test_the_command_refuses_bad_input(ckpt_root, tmp_path, capsys):
    base = ["train-gate-cf", "--out", str(tmp_path / "x")]
    assert main([*base, "--game", GAME]) == 2
    assert "--continuation is required" in capsys.readouterr().err
    assert main([*base, "--game", "speed-go-v0", "--continuation", "2"]) == 2
    assert "clock game" in capsys.readouterr().err
    assert _run(ckpt_root, tmp_path / "y", 1, "--continuation", "5") == 2
    assert "not one of" in capsys.readouterr().err
    assert main([*base, "--game", GAME, "--continuation", "2", "--resume"]) == 2
    assert "no run to resume" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
