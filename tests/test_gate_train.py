"""`rtplan train-gate` at tiny sizes on Snake: checkpoints, resume, export; a frozen planner."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from gate import Batch, GateTrainConfig, ppo_loss
from gate.train import GatePPO
from harness import checkpoint as ckpt
from planner import Planner
from planner.store import planner_path, save_planner
from rtplan.cli import main
from support import tiny_config

GAME = "snake-rt-v0"
TINY = [
    "--num-envs", "1", "--meta-steps", "4", "--epochs", "2", "--minibatches", "2",
    "--eval-every", "2", "--eval-episodes", "1", "--eval-max-meta-steps", "3",
    "--gate-channels", "8", "--gate-hidden", "16", "--no-progress",
]  # fmt: skip


@pytest.fixture(scope="module")
def planner_file(tmp_path_factory):
    """A fresh tiny Snake planner with two budgets (fewer options to compile)."""
    cfg = dataclasses.replace(tiny_config(GAME), budgets=(1, 2), simulations=(2, 4))
    path = planner_path(tmp_path_factory.mktemp("ck"), GAME)
    save_planner(path, cfg, Planner(cfg).init_params(jax.random.PRNGKey(0)))
    return str(path)


#: Run in a subprocess with two host devices: grouped options split across both equal the
#: single-device ones, and a 2-device `train-gate` run trains and records its devices.
_TWO_DEVICES = """
import json, os, sys
os.environ["XLA_FLAGS"] += " --xla_force_host_platform_device_count=2"  # conftest sets it
import jax, numpy as np
from planner import Planner
from planner.batching import OptionRunner
from planner.store import load_planner
from rtplan.cli import main
planner_file, out = sys.argv[1], sys.argv[2]
cfg, params, _ = load_planner("snake-rt-v0", planner_file)
planner = Planner(cfg)
states = jax.vmap(planner.game.init)(jax.random.split(jax.random.PRNGKey(1), 5))
keys = jax.random.split(jax.random.PRNGKey(2), 5)
ks = np.array([2, 1, 2, 1, 1])
one, two = (OptionRunner(planner, max_batch=8, devices=d) for d in (1, 2))
a, b = (r(params, keys, states, ks) for r in (one, two))
report = dict(
    ladder=two.ladder,
    actions=bool((np.asarray(a.actions) == np.asarray(b.actions)).all()),
    frames=bool((np.asarray(a.next_state.frame) == np.asarray(b.next_state.frame)).all()),
    weights=float(np.abs(np.asarray(a.action_weights) - np.asarray(b.action_weights)).max()),
    devices=len(b.actions.sharding.device_set),
    cli=main(sys.argv[3:]),
)
print(json.dumps(report))
"""


@pytest.fixture
def two_devices(planner_file, tmp_path_factory):
    """The 2-device subprocess, started (it mostly compiles); its test collects it."""
    out = tmp_path_factory.mktemp("two") / "run"
    argv = ["train-gate", "--game", GAME, "--out", str(out), "--planner", planner_file]
    argv += ["--iterations", "1", "--devices", "2", *TINY]
    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, "-c", _TWO_DEVICES, planner_file, str(out), *argv]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root
    )
    yield proc, out
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def test_train_gate_checkpoints_resumes_and_exports(tmp_path, planner_file, capsys):
    out = tmp_path / "run"
    base = ["train-gate", "--game", GAME, "--out", str(out)]
    assert main([*base, "--planner", planner_file, "--iterations", "2", *TINY]) == 0
    meta = ckpt.load_metadata(out / "gate.msgpack")
    assert meta["kind"] == "gate" and meta["game"] == GAME and meta["iteration"] == 2
    assert meta["budgets"] == [1, 2] and meta["planner_checkpoint"] == planner_file
    assert (out / "checkpoint.msgpack").exists() and (out / "best.msgpack").exists()
    # Flags left out on resume keep the checkpoint's values (the planner file, tiny sizes).
    assert main([*base, "--resume", "--iterations", "3", "--no-progress"]) == 0
    meta = ckpt.load_metadata(out / "checkpoint.msgpack")
    assert meta["iteration"] == 3 and meta["train_config"]["num_envs"] == 1
    rows = (out / "log.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["1", "2", "3"]
    header = rows[0].split(",")
    assert {"mean_k", "k1", "k2", "eval_mean", "episode_return"} <= set(header)
    last = dict(zip(header, rows[-1].split(",")))
    assert float(last["k1"]) + float(last["k2"]) == pytest.approx(1.0)
    assert int(last["frames"]) >= 3 * 1 * 4  # every meta-step plays at least one frame
    assert json.loads((out / "gate.msgpack.json").read_text())["kind"] == "gate"
    # Resuming a missing run is an error, not a new run.
    assert main(["train-gate", "--game", GAME, "--out", str(tmp_path / "none"), "--resume"]) == 2
    assert "cannot resume" in capsys.readouterr().err
    # Shipping: beside the planner it was trained over, whose own README and log stay.
    dest = tmp_path / "dest" / GAME
    dest.mkdir(parents=True)
    (dest / "planner.msgpack").write_bytes(Path(planner_file).read_bytes())
    (dest / "README.md").write_text("the planner's")
    assert main(["ship-gate", "--run", str(out), "--dest", str(dest.parent)]) == 0
    assert (dest / "gate.msgpack").read_bytes() == (out / "gate.msgpack").read_bytes()
    assert (dest / "README.md").read_text() == "the planner's"
    provenance = (dest / "gate.md").read_text()
    assert f"--out {out}" in provenance and "tree: `always-k`" in provenance
    log = tmp_path / "results" / GAME / "training" / "gate-log.csv"  # beside the checkpoints
    assert log.read_text() == (out / "log.csv").read_text() and not (dest / "gate-log.csv").exists()
    assert (dest / "gate_learning_curve.png").stat().st_size > 0
    (dest / "planner.msgpack").write_bytes(b"another planner")
    assert main(["ship-gate", "--run", str(out), "--dest", str(dest.parent)]) == 2
    assert "was trained over the planner with sha256" in capsys.readouterr().err


def test_a_gate_tree_run_plans_against_its_own_budgets(tmp_path, planner_file):
    """--gate-tree gate: rollouts and evaluations play options whose trees ask the gate being
    trained; the slow twin trains and exports."""
    kw = dict(game_id=GAME, planner=planner_file, gate_channels=8, gate_hidden=16)
    algo = GatePPO(GateTrainConfig(**kw, gate_tree="gate"))
    assert algo.runner.future is algo.gate and algo.gate.future is algo.gate
    assert GatePPO(GateTrainConfig(**kw)).runner.future is None
    with pytest.raises(ValueError, match="gate_tree 'deep' is not one of"):
        GateTrainConfig(**kw, gate_tree="deep")


@pytest.mark.slow  # ~70 s of compiles; the service's gate-tree test covers the options it plays
def test_a_gate_tree_run_trains_and_exports_its_tree(tmp_path, planner_file):
    from gate.policy import load_gate
    from planner.store import load_planner

    out = tmp_path / "run"
    argv = ["train-gate", "--game", GAME, "--out", str(out), "--planner", planner_file]
    assert main([*argv, "--iterations", "2", "--gate-tree", "gate", *TINY]) == 0
    assert ckpt.load_metadata(out / "gate.msgpack")["gate_config"]["tree"] == "gate"
    rows = (out / "log.csv").read_text().splitlines()
    assert rows[-1].split(",")[rows[0].split(",").index("eval_mean")] != ""
    pcfg, _, _ = load_planner(GAME, planner_file)
    gate, params, _ = load_gate(out / "gate.msgpack", Planner(pcfg))
    assert gate.future is gate and gate.future_params(params) is params
    assert gate.runner(4).future is gate


@pytest.mark.parametrize("stats", [False, True])
def test_the_gate_sends_no_gradient_to_the_planner(planner_file, stats):
    """Nor through the planner's stats (`--gate-stats`), which the gate does use."""
    cfg = GateTrainConfig(game_id=GAME, planner=planner_file, num_envs=2, meta_steps=1,
                          minibatches=1, gate_channels=8, gate_hidden=16,
                          gate_stats=stats)  # fmt: skip
    algo = GatePPO(cfg)
    state = algo.init()
    states = state.actors.states

    def loss(gate_params, planner_params):
        x = algo.gate.inputs(planner_params, states)
        batch = Batch(
            inputs=x,
            action=jnp.array([0, 1]),
            log_prob=jnp.log(jnp.array([0.3, 0.6])),
            advantage=jnp.array([1.0, -0.5]),
            target=jnp.array([1.0, 2.0]),
        )
        return ppo_loss(gate_params, algo.net, batch, clip=0.2, vf_coef=0.5, ent_coef=0.01)[0]

    g_gate, g_planner = jax.grad(loss, argnums=(0, 1))(state.params, algo.planner_params)
    assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(g_gate)) > 0
    assert all(float(jnp.abs(g).max()) == 0 for g in jax.tree.leaves(g_planner))
    # The stats change the gate's output only when it sees them.
    x = algo.gate.inputs(algo.planner_params, states)
    moved = x.replace(stats=x.stats + 0.5)
    a, b = algo.gate.apply(state.params, x)[0], algo.gate.apply(state.params, moved)[0]
    assert bool(jnp.any(a != b)) == stats


def test_planner_stats_measure_the_policys_uncertainty_over_legal_actions():
    import numpy as np

    from gate.policy import planner_stats

    logits = jnp.array(
        [
            [0.0, 0.0, 0.0, 9.0],  # uniform over the 3 legal actions (the 9 is illegal)
            [5.0, 1.0, 1.0, 1.0],  # a clear favourite
            [2.0, 7.0, 0.0, 0.0],  # one legal action
        ]
    )
    legal = jnp.array([[1, 1, 1, 0], [1, 1, 1, 1], [0, 0, 1, 0]], bool)
    got = np.asarray(planner_stats(logits, legal))
    np.testing.assert_allclose(got[0], [1.0, 0.0], atol=1e-6)
    p = np.exp([5.0, 1, 1, 1]) / np.exp([5.0, 1, 1, 1]).sum()
    np.testing.assert_allclose(got[1], [-(p * np.log(p)).sum() / np.log(4), 4 / 5], rtol=1e-5)
    np.testing.assert_array_equal(got[2], [0.0, 0.0])


def test_init_k_starts_the_policy_at_that_budget(planner_file):
    """`--init-k 2 --init-prob 0.8`: in every state the fresh policy picks k=2 with
    probability ~0.8 (the greedy gate plays always-k2); the value head is the plain init's."""
    kw = dict(game_id=GAME, planner=planner_file, num_envs=4, meta_steps=1, minibatches=1,
              gate_channels=8, gate_hidden=16)  # fmt: skip
    plain = GatePPO(GateTrainConfig(**kw))
    algo = GatePPO(GateTrainConfig(**kw, init_k=2, init_prob=0.8))
    state, plain_state = algo.init(), plain.init()
    states = state.actors.states
    decision = algo.gate.decide(state.params, algo.planner_params, states)
    assert decision.probabilities[:, 1].tolist() == pytest.approx([0.8] * 4, abs=0.02)
    assert decision.k.tolist() == [2, 2, 2, 2]
    x = plain.gate.inputs(plain.planner_params, states)
    assert jnp.allclose(
        algo.gate.apply(state.params, x)[1], plain.gate.apply(plain_state.params, x)[1]
    )
    with pytest.raises(ValueError, match="init_k=3 is not one of the budgets"):
        GatePPO(GateTrainConfig(**kw, init_k=3)).init()
    with pytest.raises(ValueError, match="init_prob"):
        GateTrainConfig(**kw, init_k=2, init_prob=1.0)


@pytest.mark.slow  # a subprocess compiling on 2 host devices (~70 s); --devices defaults to 1
def test_options_split_across_two_devices_equal_one_device(two_devices):
    proc, out = two_devices
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    report = json.loads(stdout.strip().splitlines()[-1])
    assert all(size % 2 == 0 for size in report["ladder"]), report["ladder"]
    assert report["devices"] == 2  # the groups really ran on both
    assert report["actions"] and report["frames"], report
    assert report["weights"] < 1e-4, report  # another batch shape: float reassociation only
    assert report["cli"] == 0
    meta = ckpt.load_metadata(out / "checkpoint.msgpack")
    assert meta["devices"] == 2 and meta["iteration"] == 1
