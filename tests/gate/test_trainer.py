"""The gate trainers of both kinds and `train-gate-cf`: tiny runs train the params pinned here
(a refactor of the trainers keeps them bit for bit).

Slow suite (`make test-slow`, before a change to a trainer lands): these pins guard refactors,
while each trainer's behaviour (it learns, checkpoints, resumes to the unbroken run) is tested in
the default suite beside it (tests/gate/committed/, tests/gate/clock/, tests/gate/counterfactual/).
They cost ~80 s of compiles on a cold CI machine."""

from __future__ import annotations

import hashlib

import jax
import numpy as np
import pytest
from flax import serialization, traverse_util

from rtplan.cli import main
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.checkpoint import planner_path
from support import write_planner

pytestmark = pytest.mark.slow

#: The platform the hashes were pinned on: XLA:CPU programs under the suite's XLA flags
#: (tests/conftest.py) are deterministic there, but another JAX release may round otherwise.
PINNED_JAX = "0.10.2"

#: sha256 of the learner checkpoint (params, Adam state, key) each tiny run writes, pinned on the
#: trainers of commit ca7c745, one per XLA:CPU host kind the suite has met: XLA compiles for the
#: host's instruction set, which rounds some float sums otherwise. The second of each pair is an
#: AMD EPYC host with AVX-512 (2026-12-07), where b97dda7 (these pins, moved here) trains the same
#: params as 904c3a5 did, so both hashes pin one behaviour; a refactor that changes the numbers
#: matches neither. `train-gate-cf`'s since its prior is `gate.trainer.prior_init`:
#: the prior's log is rounded once from float64 (its bias on K is log(0.9) to the nearest float32,
#: 4 ulps from the float32 log of float32(0.9) it had); with that rounding it trains ca7c745's
#: 5cd9afcc9aee770b963d5dfb23c5ff8aa7e421123dc6001611be3aad80b06ce3.
PINNED = {
    "committed": (
        "ad848ae487474e53bfba2d9defc72571037391429be3c634b2b92142ecebf25c",
        "824922c9a98d41030b339e3cdd5798993eb5cee67856ac836172fb79385eba58",
    ),
    "clock": (
        "1123ca0061944739bf88e7190b4f338484b087adebb37e565880e4e5e569b453",
        "de4277031a4cd5a8df16c1495492cbfd64895ddbe4adc88cee94a3b8eb076460",
    ),
    "counterfactual": (
        "c4d287be37d212aa4891680b47e5f4f1f2037c25d023f7420c6d3920c7934971",
        "dff19588236ee6d3452a424b21a53d5772f8b9d68ba6a798b1e722053ca51ce3",
    ),
}


def tree_sha256(path) -> str:
    """sha256 over a checkpoint's leaves, in sorted path order: path, dtype, shape and bytes
    (the file's own hash also covers key order and metadata)."""
    _, payload = ckpt._read(path)
    flat = traverse_util.flatten_dict(serialization.msgpack_restore(payload), sep="/")
    digest = hashlib.sha256()
    for name in sorted(flat):
        x = np.asarray(flat[name])
        digest.update(f"{name}:{x.dtype}:{x.shape}".encode())
        digest.update(np.ascontiguousarray(x).tobytes())
    return digest.hexdigest()


@pytest.fixture(autouse=True)
def _pinned_platform():
    if jax.__version__ != PINNED_JAX or jax.default_backend() != "cpu":
        pytest.skip(f"hashes pinned on jax {PINNED_JAX} XLA:CPU")


def test_committed_train_gate_trains_the_pinned_params(tmp_path):
    """Snake, two budgets, `--init-k` (the prior's start): two iterations."""
    game = "snake-rt-v0"
    root = write_planner(tmp_path / "ck", game, budgets=(1, 2), simulations=(2, 4))
    out = tmp_path / "run"
    argv = [
        "train-gate", "--game", game, "--planner", str(planner_path(root, game)),
        "--out", str(out), "--iterations", "2", "--num-envs", "1", "--meta-steps", "4",
        "--epochs", "2", "--minibatches", "2", "--eval-every", "0", "--gate-channels", "8",
        "--gate-hidden", "16", "--init-k", "2", "--no-progress",
    ]  # fmt: skip
    assert main(argv) == 0
    assert tree_sha256(out / "checkpoint.msgpack") in PINNED["committed"]


def test_clock_train_gate_trains_the_pinned_params(tmp_path):
    """Speed Hex, two budgets: two iterations of self-play."""
    game = "speed-hex-v0"
    root = write_planner(tmp_path / "ck", game, budgets=(2, 8), simulations=(2, 8))
    out = tmp_path / "run"
    argv = [
        "train-gate", "--game", game, "--planner", str(planner_path(root, game)),
        "--out", str(out), "--iterations", "2", "--num-envs", "2", "--plies", "6",
        "--chunk", "3", "--epochs", "1", "--minibatches", "2", "--eval-every", "0",
        "--gate-encoder", "8", "--gate-hidden", "8", "--gate-head", "8", "--eval-opponent", "2",
        "--no-progress",
    ]  # fmt: skip
    assert main(argv) == 0
    assert tree_sha256(out / "checkpoint.msgpack") in PINNED["clock"]


def test_train_gate_cf_trains_the_pinned_params(tmp_path):
    """Snake, four budgets, the prior on k2: one round."""
    game = "snake-rt-v0"
    root = write_planner(tmp_path / "ck", game)
    out = tmp_path / "run"
    argv = [
        "train-gate-cf", "--game", game, "--planner", str(planner_path(root, game)),
        "--out", str(out), "--continuation", "2", "--rounds", "1", "--states", "4",
        "--worlds", "1", "--horizon", "8", "--max-frame", "12", "--epochs", "2",
        "--minibatch", "2", "--lr", "0.01", "--gate-channels", "8", "--gate-hidden", "16",
    ]  # fmt: skip
    assert main(argv) == 0
    assert tree_sha256(out / "learner.msgpack") in PINNED["counterfactual"]
