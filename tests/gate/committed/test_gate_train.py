"""`rtplan train-gate` at tiny sizes on Snake: checkpoints, resume, export; a frozen planner."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rtplan.cli import main
from rtplan.gate import Batch, GateTrainConfig, ppo_loss
from rtplan.gate.committed.train import AXIS, GatePPO
from rtplan.gate.gae import smdp_gae
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.checkpoint import planner_path
from rtplan.planner import Planner
from support import free_port, write_planner

GAME = "snake-rt-v0"
TINY = [
    "--num-envs", "1", "--meta-steps", "4", "--epochs", "2", "--minibatches", "2",
    "--eval-every", "2", "--eval-episodes", "1", "--eval-max-meta-steps", "3",
    "--gate-channels", "8", "--gate-hidden", "16", "--no-progress",
]  # fmt: skip
#: A 2-device run (one process with two, or two processes with one each): 4 games, 2 per device.
TWO_DEVICE_RUN = [
    "--iterations", "2", "--devices", "2", "--num-envs", "4", "--meta-steps", "3",
    "--epochs", "2", "--minibatches", "2", "--eval-every", "0", "--checkpoint-every", "1",
    "--gate-channels", "8", "--gate-hidden", "16", "--no-progress",
]  # fmt: skip
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def planner_file(tmp_path_factory):
    """A fresh tiny Snake planner with two budgets (fewer options to compile)."""
    root = write_planner(tmp_path_factory.mktemp("ck"), GAME, budgets=(1, 2), simulations=(2, 4))
    return str(planner_path(root, GAME))


#: Run in a subprocess with two host devices: grouped options split across both equal the
#: single-device ones, and a 2-device `train-gate` run (`TWO_DEVICE_RUN`) trains and records
#: its devices.
_TWO_DEVICES = """
import json, os, sys
os.environ["XLA_FLAGS"] += " --xla_force_host_platform_device_count=2"  # conftest sets it
import jax, numpy as np
from rtplan.planner import Planner
from rtplan.planner.batching import OptionRunner
from rtplan.planner.store import load_planner
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


@pytest.fixture(scope="module")
def two_devices(planner_file, tmp_path_factory):
    """The 2-device subprocess, started (it mostly compiles); its tests collect it."""
    out = tmp_path_factory.mktemp("two") / "run"
    argv = ["train-gate", "--game", GAME, "--out", str(out), "--planner", planner_file]
    cmd = [sys.executable, "-c", _TWO_DEVICES, planner_file, str(out), *argv, *TWO_DEVICE_RUN]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
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
    from rtplan.gate.committed.policy import load_gate
    from rtplan.planner.store import load_planner

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


@pytest.mark.parametrize(
    "stats",
    [pytest.param(False, marks=pytest.mark.slow), True],  # ~20 s each; True covers more
)
def test_the_gate_sends_no_gradient_to_the_planner(planner_file, stats):
    """Nor through the planner's stats (`--gate-stats`), which the gate does use."""
    cfg = GateTrainConfig(game_id=GAME, planner=planner_file, num_envs=2, meta_steps=1,
                          minibatches=1, gate_channels=8, gate_hidden=16,
                          gate_stats=stats)  # fmt: skip
    algo = GatePPO(cfg)
    state = algo.init()
    (shard,) = state.actors  # one device
    states = shard.states

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

    # Jitted: one program, not one per operation of the loss and its gradient.
    g_gate, g_planner = jax.jit(jax.grad(loss, argnums=(0, 1)))(state.params, algo.planner_params)
    assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(g_gate)) > 0
    assert all(float(jnp.abs(g).max()) == 0 for g in jax.tree.leaves(g_planner))
    # The stats change the gate's output only when it sees them.
    x = jax.jit(algo.gate.inputs)(algo.planner_params, states)
    moved = x.replace(stats=x.stats + 0.5)
    apply = jax.jit(algo.gate.apply)
    a, b = apply(state.params, x)[0], apply(state.params, moved)[0]
    assert bool(jnp.any(a != b)) == stats


def test_planner_stats_measure_the_policys_uncertainty_over_legal_actions():
    import numpy as np

    from rtplan.gate.stats import planner_stats

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
    (shard,) = state.actors  # one device
    states = shard.states
    # Jitted: one program each, not one per operation of the planner's and the gate's nets.
    decision = jax.jit(algo.gate.decide)(state.params, algo.planner_params, states)
    assert decision.probabilities[:, 1].tolist() == pytest.approx([0.8] * 4, abs=0.02)
    assert decision.k.tolist() == [2, 2, 2, 2]
    x = jax.jit(plain.gate.inputs)(plain.planner_params, states)
    ours, theirs = jax.jit(algo.gate.apply), jax.jit(plain.gate.apply)
    assert jnp.allclose(ours(state.params, x)[1], theirs(plain_state.params, x)[1])
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
    assert meta["devices"] == 2 and meta["processes"] == 1 and meta["iteration"] == 2


@pytest.mark.slow  # three subprocesses compiling (~3-5 min on one core)
def test_two_processes_train_exactly_like_one_process_with_two_devices(
    two_devices, planner_file, tmp_path
):
    """Two local processes (`jax.distributed`, gloo collectives), one device each, against the
    module's one process with 2 devices, same flags and seed: each device plays the same two
    games, so the exported params and the log rows (timings aside) are bitwise equal; only
    process 0 writes its folder."""
    coordinator = f"127.0.0.1:{free_port()}"
    outs = [tmp_path / "p0", tmp_path / "p1"]
    argv = [sys.executable, "-m", "rtplan", "train-gate", "--game", GAME, "--planner", planner_file]
    argv += [*TWO_DEVICE_RUN, "--coordinator", coordinator, "--num-processes", "2"]
    procs = [
        subprocess.Popen(
            [*argv, "--out", str(out), "--process-id", str(i)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for i, out in enumerate(outs)
    ]
    for proc in procs:
        _, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr[-3000:]
    reference, reference_out = two_devices
    if reference.returncode is None:  # its own test did not run
        _, stderr = reference.communicate(timeout=600)
    assert reference.returncode == 0
    assert not outs[1].exists()
    meta = ckpt.load_metadata(outs[0] / "checkpoint.msgpack")
    assert meta["processes"] == 2 and meta["devices"] == 2 and meta["iteration"] == 2
    from rtplan.gate.committed.policy import load_gate
    from rtplan.planner.store import load_planner

    planner = Planner(load_planner(GAME, planner_file)[0])
    leaves = [
        jax.tree.leaves(load_gate(out / "gate.msgpack", planner)[1])
        for out in (reference_out, outs[0])
    ]
    assert len(leaves[0]) == len(leaves[1]) > 0
    assert all(np.array_equal(a, b) for a, b in zip(*leaves, strict=True))
    timing = ("wall_time", "iter_seconds", "frames_per_s")
    rows = []
    for out in (reference_out, outs[0]):
        lines = (out / "log.csv").read_text().splitlines()
        header = lines[0].split(",")
        rows.append(
            [{k: v for k, v in zip(header, r.split(",")) if k not in timing} for r in lines[1:]]
        )
    assert rows[0] == rows[1] and len(rows[0]) == 2 and rows[0][-1]["loss"] not in ("", "nan")


@pytest.mark.slow  # ~35 s of compiles; --devices defaults to 1
def test_the_devices_update_averages_their_gradients(planner_file):
    """The trainer's per-device update, on 2 devices (a named `vmap` standing in for the mesh):
    each device's GAE and PPO loss over its own games, one Adam step of the mean of the two
    gradients, the same params on both; the rollout totals summed over both."""
    cfg = GateTrainConfig(game_id=GAME, planner=planner_file, num_envs=4, meta_steps=3,
                          epochs=1, minibatches=1, eval_every=0, gate_channels=8,
                          gate_hidden=16)  # fmt: skip
    algo = GatePPO(cfg)
    state = algo.init()
    params, opt_state = algo.params(state), jax.device_get(state.opt_state)
    (t, b), keys = (3, 4), jax.random.split(jax.random.PRNGKey(5), 5)
    x = algo.gate.inputs(algo.planner_params, state.actors[0].states)  # [B] distinct games
    action = jax.random.randint(keys[0], (t, b), 0, 2)
    steps = dict(
        inputs=jax.tree.map(lambda a: jnp.broadcast_to(a, (t, *a.shape)), x),
        action=action,
        log_prob=jnp.log(jax.random.uniform(keys[1], (t, b), minval=0.2, maxval=0.8)),
        value=jax.random.normal(keys[2], (t, b)),
        next_value=jax.random.normal(keys[3], (t, b)),
        reward=jax.random.normal(keys[4], (t, b)),
        frames=1 + action,
        terminated=jnp.zeros((t, b), bool).at[1, 0].set(True),
        truncated=jnp.zeros((t, b), bool).at[2, 3].set(True),
    )
    stats = dict(
        frames=jnp.full((t, 2, 1), 5), episodes=jnp.ones((t, 2, 1), jnp.int32),
        return_sum=jnp.full((t, 2, 1), 0.5), frames_sum=jnp.full((t, 2, 1), 7),
    )  # fmt: skip

    def shards(x):  # [T, B, ...] -> [T, 2, B/2, ...]
        return x.reshape(x.shape[0], 2, x.shape[1] // 2, *x.shape[2:])

    learn = jax.vmap(algo._learn_fn, in_axes=(None, None, 1, 1, None), axis_name=AXIS)
    new, _, out = jax.jit(learn)(params, opt_state, jax.tree.map(shards, steps), stats, keys[0])

    def own(s):  # device s's gradient and loss, by hand
        mine = jax.tree.map(lambda x: x[:, 2 * s : 2 * s + 2], steps)
        adv, target = smdp_gae(mine["reward"], mine["value"], mine["next_value"],
                               mine["frames"], mine["terminated"], mine["truncated"],
                               gamma=algo.gamma, lam=cfg.lam)  # fmt: skip
        flat = lambda tree: jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), tree)  # noqa: E731
        batch = Batch(inputs=flat(mine["inputs"]), action=flat(mine["action"]),
                      log_prob=flat(mine["log_prob"]), advantage=flat(adv),
                      target=flat(target))  # fmt: skip
        coefs = dict(clip=cfg.clip, vf_coef=cfg.vf_coef, ent_coef=cfg.entropy_coef)
        loss = lambda p: ppo_loss(p, algo.net, batch, **coefs)[0]  # noqa: E731
        return jax.value_and_grad(loss)(params)

    def adam_step(grads):
        updates, _ = algo.optimizer.update(grads, opt_state, params)
        return jax.tree.leaves(optax.apply_updates(params, updates))

    (loss0, g0), (loss1, g1) = own(0), own(1)
    expected = adam_step(jax.tree.map(lambda a, b: (a + b) / 2, g0, g1))
    alone = adam_step(g0)  # what device 0 would do without the pmean
    got = jax.tree.leaves(new)
    for a, e in zip(got, expected, strict=True):
        assert np.array_equal(a[0], a[1])
        np.testing.assert_allclose(a[0], e, rtol=1e-5, atol=1e-6)
    assert not all(np.allclose(a[0], e, rtol=1e-5, atol=1e-6) for a, e in zip(got, alone))
    np.testing.assert_allclose(out["loss"], [(loss0 + loss1) / 2] * 2, rtol=1e-5)
    counts = [int((action == i).sum()) for i in (0, 1)]
    assert [out["count0"].tolist(), out["count1"].tolist()] == [[c, c] for c in counts]
    assert out["frames"].tolist() == [5 * t * 2] * 2 and out["frames_sum"].tolist() == [42, 42]


def test_train_gate_checks_its_devices_and_processes(tmp_path, capsys):
    """Games split evenly over the devices; the process flags need a coordinator, and a
    clock game's gate refuses them (a subprocess: joining a job starts JAX's backends)."""
    with pytest.raises(ValueError, match="num_envs=6 is not divisible by devices=4"):
        GateTrainConfig(game_id=GAME, num_envs=6, devices=4)
    with pytest.raises(ValueError, match="does not divide a device's rollout of 2 x 3"):
        GateTrainConfig(game_id=GAME, num_envs=4, devices=2, meta_steps=3, minibatches=4)
    base = ["train-gate", "--game", GAME, "--out", str(tmp_path / "run")]
    assert main([*base, "--num-processes", "2", "--process-id", "1"]) == 2
    assert "need --coordinator" in capsys.readouterr().err
    several = ["--coordinator", f"127.0.0.1:{free_port()}", "--num-processes", "1"]
    argv = ["train-gate", "--game", "speed-hex-v0", "--out", str(tmp_path / "hex"), *several]
    done = subprocess.run(
        [sys.executable, "-m", "rtplan", *argv], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "speed-hex-v0 is a clock game, whose gate trains in one process" in done.stderr
    assert not (tmp_path / "hex").exists()


def test_the_memory_counts_frames_since_the_last_switch_and_empties_at_a_new_episode():
    from rtplan.gate.committed.policy import SINCE_HALF, GateMemory, memory_features
    from rtplan.planner.network import h_transform

    m = GateMemory.empty(3)
    m = m.after(jnp.array([0, 1, 1]), jnp.array([1.0, 2.0, 3.0]), jnp.array([1, 2, 2]))
    assert m.last.tolist() == [0, 1, 1] and m.since.tolist() == [1, 2, 2]  # first: a switch
    m2 = m.after(jnp.array([0, 0, 1]), jnp.array([4.0, 4.0, 4.0]), jnp.array([1, 1, 2]))
    assert m2.since.tolist() == [2, 1, 4]  # kept 0: 1 + 1; switched to 0: 0 + 1; kept 1: 2 + 2
    feats = np.asarray(memory_features(m, jnp.array([3.0, 2.0, 0.0]), 2, 2.0))
    np.testing.assert_allclose(feats[:, :2], [[1, 0], [0, 1], [0, 1]])
    np.testing.assert_allclose(feats[:, 2], h_transform(jnp.array([1.0, 0.0, -1.5])), rtol=1e-6)
    np.testing.assert_allclose(feats[:, 3], [1 / (1 + SINCE_HALF), *[2 / (2 + SINCE_HALF)] * 2])
    fresh = np.asarray(memory_features(GateMemory.empty(2), jnp.array([5.0, -5.0]), 2, 1.0))
    assert not fresh.any()  # nothing remembered before the first decision
    r = m2.reset(jnp.array([False, True, False]))
    assert r.last.tolist() == [0, -1, 1] and r.since.tolist() == [2, 0, 4]
    assert r.value.tolist() == [4.0, 0.0, 4.0]


def test_a_gate_with_memory_needs_it_sees_it_and_carries_it_through_training(planner_file):
    """`--gate-memory`: `decide` refuses to run without the memory, its inputs change the
    logits, and a rollout threads it: each decision's stored inputs remember the decision
    before (reset where a game ended), and the memories returned are the fold of
    `GateMemory.after` over the recorded decisions."""
    from rtplan.gate.committed.policy import GateMemory

    kw = dict(game_id=GAME, planner=planner_file, num_envs=2, meta_steps=3, minibatches=1,
              gate_channels=8, gate_hidden=16)  # fmt: skip
    algo = GatePPO(GateTrainConfig(**kw, gate_memory=True))
    state = algo.init()
    (shard,) = state.actors
    with pytest.raises(ValueError, match="pass its GateMemory"):
        algo.gate.decide(state.params, algo.planner_params, shard.states)
    empty = GateMemory.empty(2)
    # Jitted: one program each, not one per operation of the planner's and the gate's nets.
    decide, inputs = jax.jit(algo.gate.decide), jax.jit(algo.gate.inputs)
    apply = jax.jit(algo.gate.apply)
    d = decide(state.params, algo.planner_params, shard.states, memory=empty)
    assert d.memory.last.tolist() == d.index.tolist() and d.memory.since.tolist() == d.k.tolist()
    x = inputs(algo.planner_params, shard.states, memory=d.memory)
    x0 = inputs(algo.planner_params, shard.states, memory=empty)
    assert bool(jnp.any(apply(state.params, x)[0] != apply(state.params, x0)[0]))
    with pytest.raises(ValueError, match="memories exactly when"):
        algo.rollout(state.params, state.actors, state.key)
    _, (steps,), _, (after,) = algo.rollout(
        state.params, state.actors, jax.random.PRNGKey(1), state.memories
    )
    actions = np.asarray(steps["action"])  # [T, B]
    ended = np.asarray(steps["terminated"] | steps["truncated"])
    seen = np.asarray(steps["inputs"].memory)  # [T, B, K + 2]
    want = GateMemory.empty(2)
    for t in range(actions.shape[0]):
        one_hot = np.eye(2)[np.asarray(want.last)] * (np.asarray(want.last) >= 0)[:, None]
        np.testing.assert_array_equal(seen[t, :, :2], one_hot)
        k = jnp.asarray(algo.gate.budgets)[actions[t]]
        value = steps["inputs"].value[t]
        want = want.after(jnp.asarray(actions[t]), value, k).reset(jnp.asarray(ended[t]))
    for a, b in zip(jax.tree.leaves(after), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # The PPO loss sees the stored memory (a loss without it once stopped every update).
    flat = jax.tree.map(lambda v: v.reshape(-1, *v.shape[2:]), steps)
    batch = Batch(inputs=flat["inputs"], action=flat["action"], log_prob=flat["log_prob"],
                  advantage=jnp.ones_like(flat["value"]), target=flat["value"])  # fmt: skip
    forgot = batch.replace(inputs=batch.inputs.replace(memory=jnp.zeros_like(seen.reshape(6, -1))))
    coefs = dict(clip=0.2, vf_coef=0.5, ent_coef=0.01)
    loss = jax.jit(lambda params, b: ppo_loss(params, algo.net, b, **coefs)[0])
    losses = [loss(algo.params(state), b) for b in (batch, forgot)]
    assert float(losses[0]) != float(losses[1])
    moved, metrics = algo.step(state)  # a whole update: rollout, GAE, PPO
    assert np.isfinite(metrics["loss"])
    assert any(
        bool(jnp.any(a != b))
        for a, b in zip(jax.tree.leaves(moved.params), jax.tree.leaves(state.params), strict=True)
    )
    # A run saved before the memory field existed resumes: configs compare field by field.
    meta = {"gate_config": dataclasses.asdict(GatePPO(GateTrainConfig(**kw)).gate.config),
            "budgets": [1, 2]}  # fmt: skip
    del meta["gate_config"]["memory"]
    GatePPO(GateTrainConfig(**kw)).template(meta)
    with pytest.raises(ckpt.CheckpointError, match="holds a gate"):
        algo.template(meta)
