"""Planner training: value targets, landing-state samples, end-to-end runs, checkpoints, resume."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rtplan.cli import main as cli_main
from rtplan.games import Kind
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.checkpoint import CheckpointError
from rtplan.planner.options import Planner
from rtplan.planner.store import load_planner
from rtplan.planner.targets import landing_states, nstep_targets, step_discounts
from rtplan.planner.train import BEST, CHECKPOINT, LOG, trainer
from rtplan.planner.train_config import TrainConfig
from support import free_port

TINY = dict(channels=4, blocks=1, features=8, value_hidden=8)
SMALL_SNAKE = (("num_rows", 6), ("num_cols", 6))
ROOT = Path(__file__).resolve().parents[2]


def _snake(**kw) -> TrainConfig:
    base = dict(
        game_id="snake-rt-v0",
        iterations=3,
        batch=4,
        unroll=4,
        n_step=3,
        train_k=2,
        sims_per_frame=2,
        replay_capacity=64,
        learner_steps=2,
        minibatch=8,
        eval_every=0,
        eval_episodes=2,
        eval_max_decisions=8,
        checkpoint_every=1,
        game_params=SMALL_SNAKE,
        **TINY,
    )
    return TrainConfig(**{**base, **kw})


def _rows(out: Path) -> list[dict]:
    with (out / LOG).open(newline="") as f:
        return list(csv.DictReader(f))


def _leaves_equal(a, b) -> bool:
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(la) == len(lb) and all(
        np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb, strict=True)
    )


# Value targets ---------------------------------------------------------------------------------


def _loop_targets(rewards, terminated, truncated, values, n, gamma_k, kind):
    """Plain-loop n-step returns: stop at the end of an episode, else bootstrap at t + n."""
    steps, batch = rewards.shape
    out = np.zeros((steps - n, batch))
    for b in range(batch):
        for t in range(steps - n):
            g, disc, ended = 0.0, 1.0, False
            for j in range(n):
                g += disc * rewards[t + j, b]
                if terminated[t + j, b] or truncated[t + j, b]:
                    ended = True
                    break
                disc *= -1.0 if kind is Kind.CLOCK else gamma_k
            if not ended:
                g += disc * values[t + n, b]
            out[t, b] = g
    return out


@pytest.mark.parametrize("kind", list(Kind))
def test_nstep_targets_equal_a_plain_loop(kind):
    rng = np.random.default_rng(0)
    steps, batch, n, gamma_k = 14, 5, 4, 0.97**3
    rewards = rng.normal(size=(steps, batch)).astype(np.float32)
    values = rng.normal(size=(steps, batch)).astype(np.float32)
    terminated = rng.random((steps, batch)) < 0.15
    truncated = (rng.random((steps, batch)) < 0.1) & ~terminated
    # After a done step the slot holds a new episode (auto-reset): the loop must not leak into it.
    terminated[:, 0] = False
    truncated[:, 0] = False  # one column without any boundary: pure bootstraps
    discount = np.where(terminated, 0.0, gamma_k).astype(np.float32)
    flags = jnp.asarray(terminated), jnp.asarray(truncated)
    d = step_discounts(jnp.asarray(discount), *flags, kind=kind)
    got = nstep_targets(jnp.asarray(rewards), d, jnp.asarray(values), n)
    want = _loop_targets(rewards, terminated, truncated, values, n, gamma_k, kind)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_clock_targets_flip_sign_and_stop_at_the_end():
    # Plies 0..2 of one game, which the mover of ply 2 wins (+1); ply 3 starts a new game.
    rewards = jnp.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0])[:, None]
    terminated = jnp.array([False, False, True, False, False, False])[:, None]
    values = jnp.array([9.0, 9.0, 9.0, 9.0, 0.5, 0.25])[:, None]
    d = step_discounts(
        jnp.ones_like(rewards), terminated, jnp.zeros_like(terminated), kind=Kind.CLOCK
    )
    got = np.asarray(nstep_targets(rewards, d, values, 2))[:, 0]
    # ply 0: same mover as ply 2, but n=2 bootstraps from v_2 seen by ply 2's mover: +v_2.
    # ply 1: -r_2 = -1 (lost). ply 2: +1 then nothing. ply 3: 0 - 0 + v_5 = 0.25.
    np.testing.assert_allclose(got, [9.0, -1.0, 1.0, 0.25])


def test_committed_discounts_cut_at_truncation_and_termination():
    d = step_discounts(
        jnp.array([0.9, 0.0, 0.9]),
        jnp.array([False, True, False]),
        jnp.array([False, False, True]),
        kind=Kind.COMMITTED,
    )
    np.testing.assert_allclose(np.asarray(d), [0.9, 0.0, 0.0])


# Landing states ---------------------------------------------------------------------------------


def test_policy_samples_use_the_landing_state():
    cfg = _snake()
    pcfg = cfg.planner_config
    planner = Planner(pcfg)
    params = planner.init_params(jax.random.PRNGKey(1))
    k = 3

    @jax.jit
    def run(params, key):
        states = jax.vmap(planner.game.init)(jax.random.split(key, 4))
        out = planner.option(params, jax.random.split(key, 4), states, k)
        mine = landing_states(planner.game, states, out.actions[:, : k - 1])
        ref = planner._advance(params, states, planner.evaluate(params, states), k - 1)[0]
        last = jax.vmap(planner.game.step)(mine, out.actions[:, -1])
        return out, mine, ref, last

    out, mine, ref, last = run(params, jax.random.PRNGKey(2))
    assert _leaves_equal(mine, ref)
    assert _leaves_equal(last, out.next_state)
    # The improved policy is zero off the landing state's legal actions.
    assert np.all(np.asarray(out.action_weights)[~np.asarray(mine.legal_action_mask)] == 0.0)


# End to end -------------------------------------------------------------------------------------


def test_committed_training_runs_end_to_end(tmp_path):
    cfg = _snake(eval_every=2)
    run = trainer(cfg, tmp_path, argv=["test"])
    last = run.run()
    assert run.iteration == cfg.iterations == last["iteration"]
    rows = _rows(tmp_path)
    assert [int(r["iteration"]) for r in rows] == [1, 2, 3]
    # The first iteration's decisions wait one iteration for their targets: no learning yet.
    assert rows[0]["loss"] == "nan"
    for r in rows[1:]:
        for k in ("loss", "policy_loss", "value_loss", "grad_norm"):
            assert np.isfinite(float(r[k])), (k, r)
        assert float(r["replay_size"]) > 0
    assert int(rows[-1]["frames"]) > 0 and float(rows[-1]["frames_per_s"]) > 0
    assert rows[1]["eval_mean"] != "" and rows[2]["eval_mean"] != ""

    meta = json.loads((tmp_path / (CHECKPOINT + ".json")).read_text())
    assert meta["iteration"] == 3 and meta["game"] == "snake-rt-v0"
    assert meta["train_config"]["train_k"] == 2 and meta["argv"] == ["test"]
    assert meta["replay_saved"] and meta["last_eval"]["iteration"] == 3
    assert (tmp_path / BEST).exists() and list((tmp_path / "tb").iterdir())
    pcfg, params, exported = load_planner("snake-rt-v0", tmp_path / ckpt.PLANNER_FILE)
    _, best, _ = load_planner("snake-rt-v0", tmp_path / BEST)
    assert exported["source"] == "best" and _leaves_equal(params, best)
    assert pcfg.network == cfg.planner_config.network


def test_in_training_evaluation_plays_the_same_tuning_seeds_every_time(tmp_path, monkeypatch):
    """`best.msgpack` is picked on one yardstick: every evaluation plays the first
    `eval_episodes` tuning seeds, whatever the iteration, through the shared player."""
    import rtplan.planner.train as train_module
    from rtplan.planner.episodes import play, seeds_of

    played = []

    def recording_play(runner, params, seeds, choose, **kwargs):
        played.append(np.asarray(seeds).tolist())
        return play(runner, params, seeds, choose, **kwargs)

    monkeypatch.setattr(train_module, "play", recording_play)
    run = trainer(_snake(), tmp_path, tensorboard=False)
    first = run.algo.evaluate(run.state, 1)
    later = run.algo.evaluate(run.state, 7)
    assert first == later
    assert played == [seeds_of("tuning", 2).tolist()] * 2


def test_clock_self_play_runs_end_to_end(tmp_path):
    cfg = TrainConfig(
        game_id="speed-hex-v0",
        iterations=2,
        batch=4,
        unroll=4,
        n_step=3,
        train_k=2,
        replay_capacity=64,
        learner_steps=2,
        minibatch=8,
        eval_every=2,
        eval_episodes=2,
        eval_k=2,
        eval_max_decisions=6,
        checkpoint_every=1,
        opening_plies=3,
        symmetries=True,  # Hex's half turn in the learner's batches
        **TINY,
    )
    run = trainer(cfg, tmp_path, tensorboard=False)
    # Self-play games start after 0..3 random moves.
    start = np.asarray(jax.device_get(run.state.actors.states.frame))
    assert ((start >= 0) & (start <= 3)).all() and len(set(start.tolist())) > 1
    run.run()
    rows = _rows(tmp_path)
    assert [int(r["iteration"]) for r in rows] == [1, 2]
    assert all(np.isfinite(float(rows[1][k])) for k in ("loss", "policy_loss", "value_loss"))
    assert int(rows[1]["frames"]) == 2 * 4 * 4  # one ply per decision, games last > 11 plies
    for k in ("eval_vs_random", "eval_vs_reflex"):
        assert 0.0 <= float(rows[1][k]) <= 1.0
    meta = json.loads((tmp_path / (CHECKPOINT + ".json")).read_text())
    assert meta["iteration"] == 2 and meta["planner_config"]["game_id"] == "speed-hex-v0"


# Checkpoints and resume ----------------------------------------------------------------------


def test_resume_continues_where_the_checkpoint_left_off(tmp_path):
    cfg = _snake(iterations=4, checkpoint_every=2)
    first = trainer(cfg, tmp_path, tensorboard=False)
    for _ in range(3):
        first.step()
    # "Killed" after iteration 3: the checkpoint holds iteration 2.
    first.close()
    live = jax.device_get({"params": first.state.params, "opt_state": first.state.opt_state})
    saved, meta = ckpt.load(tmp_path / CHECKPOINT, live)
    assert meta["iteration"] == 2
    assert not _leaves_equal(saved["params"], live["params"])

    resumed = trainer(cfg, tmp_path, resume=True, tensorboard=False)
    assert resumed.iteration == 2 and resumed.frames == meta["frames"]
    assert _leaves_equal(jax.device_get(resumed.state.params), saved["params"])
    assert _leaves_equal(jax.device_get(resumed.state.opt_state), saved["opt_state"])
    assert int(resumed.state.replay.size) == 4 * 4  # iteration 2 emitted iteration 1's decisions
    resumed.run()
    assert resumed.iteration == 4
    assert [int(r["iteration"]) for r in _rows(tmp_path)] == [1, 2, 3, 4]
    assert ckpt.load_metadata(tmp_path / CHECKPOINT)["iteration"] == 4
    # Asking a finished run for more iterations goes on from there.
    more = trainer(_snake(iterations=5, checkpoint_every=2), tmp_path, resume=True)
    assert more.iteration == 4
    more.run()
    assert ckpt.load_metadata(tmp_path / CHECKPOINT)["iteration"] == 5


def test_corrupt_checkpoint_is_a_clear_error_and_nothing_is_overwritten(tmp_path):
    trainer(_snake(iterations=1), tmp_path, tensorboard=False).run()
    path = tmp_path / CHECKPOINT
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    with pytest.raises(CheckpointError, match=str(path)):
        trainer(_snake(iterations=2), tmp_path, resume=True, tensorboard=False)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
    # A fresh run must not overwrite an existing one either.
    with pytest.raises(CheckpointError, match="already exists"):
        trainer(_snake(iterations=2), tmp_path, tensorboard=False)


def test_missing_checkpoint_and_unknown_game_are_clear_errors(tmp_path, capsys):
    missing = tmp_path / "nothing"
    with pytest.raises(CheckpointError, match=str(missing / CHECKPOINT)):
        trainer(_snake(), missing, resume=True)
    args = ["train-planner", "--game", "snake-rt-v0", "--resume", "--out", str(missing)]
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert "no checkpoint at" in err and str(missing / CHECKPOINT) in err
    assert cli_main(["train-planner", "--game", "tetris-v9", "--out", str(missing)]) == 2
    assert "unknown game 'tetris-v9'" in capsys.readouterr().err
    assert not missing.exists()
    base = ["train-planner", "--game", "snake-rt-v0", "--out", str(missing)]
    assert cli_main([*base, "--num-processes", "2", "--process-id", "1"]) == 2
    assert "need --coordinator" in capsys.readouterr().err
    several = ["--coordinator", "127.0.0.1:1", "--num-processes", "2", "--devices", "3"]
    assert cli_main([*base, *several]) == 2
    assert "--devices 3 is not divisible by --num-processes 2" in capsys.readouterr().err
    with pytest.raises(ValueError, match="clock game"):
        TrainConfig(game_id="speed-go-v0", sims_per_frame=4)
    with pytest.raises(ValueError, match="not a budget"):
        TrainConfig(game_id="speed-go-v0", train_k=1)
    with pytest.raises(ValueError, match="n_step"):
        TrainConfig(game_id="snake-rt-v0", unroll=4, n_step=5)
    with pytest.raises(ValueError, match="opening_plies is for two-player games"):
        TrainConfig(game_id="snake-rt-v0", opening_plies=4)


def test_every_train_flag_is_a_config_field_with_its_help(capsys, monkeypatch):
    """The train-planner flags and their help come from TrainConfig's fields and metadata."""
    import dataclasses

    monkeypatch.setenv("COLUMNS", "1000")  # one line per flag: no wrapping inside the help
    with pytest.raises(SystemExit):
        cli_main(["train-planner", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for field in dataclasses.fields(TrainConfig):
        if field.name in ("game_id", "game_params"):
            continue
        flag = "--" + field.name.replace("_", "-")
        if field.type in (bool, "bool"):  # an on/off pair
            usage = f"{flag}, --no-{flag[2:]}"
        else:
            usage = f"{flag} {field.name.upper()}"
        assert f"{usage} {field.metadata['help']}" in out, flag
    assert "Adam steps per iteration. (default: 4)" in out


@pytest.fixture(scope="module", autouse=True)
def two_device_cli(tmp_path_factory):
    """Starts a 2-device CLI run in the background at once; its test collects it at the end.

    The subprocess mostly compiles, which XLA does on one core, so it overlaps the other tests.
    """
    out = tmp_path_factory.mktemp("cli") / "run"
    proc = _cli_run(out)
    yield proc, out
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def _cli_run(out: Path, *extra: str) -> subprocess.Popen:
    """A tiny 2-iteration `train-planner` run on 2 devices, in the background."""
    args = "--iterations 2 --batch 4 --unroll 2 --n-step 2 --train-k 1 --sims-per-frame 2"
    args += " --channels 4 --blocks 1 --minibatch 8 --replay-capacity 16 --eval-every 0"
    args += " --checkpoint-every 1 --devices 2 --no-progress"
    cmd = [sys.executable, "-m", "rtplan", "train-planner", "--game", "tetris-rt-v0"]
    return subprocess.Popen(
        [*cmd, "--out", str(out), *args.split(), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def test_cli_trains_on_two_devices(two_device_cli):
    """The CLI sets the XLA flag before jax loads; iterations then run sharded on 2 devices."""
    proc, out = two_device_cli
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-2000:]
    meta = ckpt.load_metadata(out / CHECKPOINT)
    assert meta["devices"] == 2 and meta["iteration"] == 2
    assert meta["argv"][:2] == ["rtplan", "train-planner"]
    rows = _rows(out)
    assert np.isfinite(float(rows[-1]["loss"])) and int(rows[-1]["frames"]) == 2 * 4 * 2


@pytest.mark.slow
def test_two_processes_train_exactly_like_one_process_with_two_devices(two_device_cli, tmp_path):
    """Two local processes (`jax.distributed`, gloo collectives), one device each, against the
    module's one process with 2 devices, same flags and seed: bitwise equal params and log
    metrics (the cross-process mean of two gradients is the same one addition); only process 0
    writes its folder."""
    coordinator = f"127.0.0.1:{free_port()}"
    outs = [tmp_path / "p0", tmp_path / "p1"]
    procs = [
        _cli_run(out, "--coordinator", coordinator, "--num-processes", "2", "--process-id", str(i))
        for i, out in enumerate(outs)
    ]
    for proc in procs:
        _, stderr = proc.communicate(timeout=400)
        assert proc.returncode == 0, stderr[-2000:]
    reference, reference_out = two_device_cli
    if reference.returncode is None:  # its own test did not run (-m slow)
        _, stderr = reference.communicate(timeout=400)
        assert reference.returncode == 0, stderr[-2000:]
    assert not outs[1].exists()
    meta = ckpt.load_metadata(outs[0] / CHECKPOINT)
    assert meta["processes"] == 2 and meta["devices"] == 2 and meta["iteration"] == 2
    assert not meta["replay_saved"]
    params = [
        load_planner("tetris-rt-v0", str(out / ckpt.PLANNER_FILE))[1]
        for out in (reference_out, outs[0])
    ]
    assert _leaves_equal(*params)
    timing = ("wall_time", "iter_seconds", "frames_per_s")
    rows = [
        [{k: v for k, v in r.items() if k not in timing} for r in _rows(out)]
        for out in (reference_out, outs[0])
    ]
    assert rows[0] == rows[1] and rows[0][-1]["loss"] not in ("", "nan")


def test_ship_and_init_from(tmp_path):
    from rtplan.planner.ship import ship

    run = tmp_path / "run"
    trainer(_snake(iterations=2, eval_every=2), run, argv=["rtplan", "train-planner"]).run()
    shipped = ship(run, tmp_path / "checkpoints")
    dest = shipped.parent
    assert dest.name == "snake-rt-v0" and shipped.exists()
    readme = (dest / "README.md").read_text()
    assert "rtplan train-planner" in readme and "seed 0" in readme and "evaluation" in readme
    assert (dest / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    # Only what ships is in the checkpoints folder; the log is a result beside it.
    assert sorted(p.name for p in dest.iterdir()) == [
        "README.md",
        "learning_curve.png",
        "planner.msgpack",
        "planner.msgpack.json",
    ]
    log = tmp_path / "results" / "snake-rt-v0" / "training" / "planner-log.csv"
    assert log.read_text() == (run / "log.csv").read_text()
    assert "training log: `results/snake-rt-v0/training/planner-log.csv`" in readme
    # A variant is kept whole in the archive; the base checkpoint is left alone.
    base_bytes = shipped.read_bytes()
    variant = ship(run, tmp_path / "checkpoints", variant="train-k2")
    kept = tmp_path / "archive" / "snake-rt-v0" / "train-k2"
    assert variant == kept / "planner.msgpack" and shipped.read_bytes() == base_bytes
    assert (kept / "log.csv").read_text() == (run / "log.csv").read_text()
    assert (
        (variant.parent / "README.md")
        .read_text()
        .startswith("# snake-rt-v0 planner checkpoint (train-k2)")
    )
    with pytest.raises(ValueError, match="plain folder name"):
        ship(run, tmp_path / "checkpoints", variant="../x")
    # --snapshot ships a training checkpoint's params (here the final one, its params moved by
    # one so that they differ from the export), with the snapshot's provenance.
    from flax import serialization

    meta, payload = ckpt._read(run / CHECKPOINT)
    tree = serialization.msgpack_restore(payload)
    tree["params"] = jax.tree.map(lambda x: x + 1, tree["params"])
    snap = tmp_path / "snap-002.msgpack"
    ckpt.save(snap, tree, meta)
    from_snap = ship(run, tmp_path / "snapped" / "checkpoints", snapshot=snap)
    _, snapped, snap_meta = load_planner("snake-rt-v0", from_snap)
    assert _leaves_equal(snapped, tree["params"])
    assert snap_meta["source"] == "snapshot snap-002.msgpack" and snap_meta["iteration"] == 2
    readme = (from_snap.parent / "README.md").read_text()
    assert "(snapshot snap-002.msgpack params of the run)" in readme and "iteration 2" in readme
    snap_log = tmp_path / "snapped" / "results" / "snake-rt-v0" / "training" / "planner-log.csv"
    with open(snap_log) as f:
        assert [int(r["iteration"]) for r in csv.DictReader(f)] == [1, 2]
    with pytest.raises(ValueError, match="not a training checkpoint"):
        ship(run, tmp_path / "snapped", snapshot=shipped)
    ckpt.save(snap, tree, dict(meta, seed=7))
    with pytest.raises(ValueError, match="not a checkpoint of the run"):
        ship(run, tmp_path / "snapped", snapshot=snap)
    _, params, _ = load_planner("snake-rt-v0", shipped)
    # A new run can start from the shipped params (fresh optimizer).
    run2 = trainer(_snake(iterations=1, init_from=str(shipped)), tmp_path / "run2", argv=["t"])
    assert _leaves_equal(jax.device_get(run2.state.params), params)
