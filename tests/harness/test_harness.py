"""The training harness on its own: flags from configs, a toy algorithm's runs, safe files."""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rtplan.harness import (
    Run,
    add_flags,
    from_args,
    from_dict,
    knob,
    overrides,
    run_config,
    ship,
    to_dict,
)
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.checkpoint import CheckpointError
from rtplan.harness.run import BEST, CHECKPOINT, HEAD, LOG, data_parallel_processes

ROOT = Path(__file__).resolve().parents[2]


# Config -> flags -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Knobs:
    name: str = knob(help="Required name.")
    hidden_size: int = knob(8, "Width, 100% of it.")
    rate: float | None = knob(None, "Rate; None: automatic.")
    tag: str | None = knob(None, "A tag.")
    verbose: bool = knob(False, "Talk more.")
    sizes: tuple[int, ...] | None = knob(None, "Sizes; None: one.")
    shape: tuple[int, int] = knob((1, 1), "Not a flag type.")


def _parser(**kw) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="t")
    add_flags(parser, Knobs, **kw)
    return parser


def test_flags_come_from_the_fields_with_their_help(monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # one line per flag
    text = " ".join(_parser(exclude=("name", "shape")).format_help().split())
    assert "--hidden-size HIDDEN_SIZE Width, 100% of it. (default: 8)" in text
    assert "--rate RATE Rate; None: automatic." in text  # None defaults are not printed
    assert "--verbose, --no-verbose Talk more. (default: False)" in text
    assert "--name" not in text and "--shape" not in text


def test_flags_parse_to_typed_overrides():
    parser = _parser(exclude=("shape",))
    args = parser.parse_args([])
    assert overrides(Knobs, args) == {}  # left out: every flag is None, the defaults stay
    assert from_args(Knobs, args, name="x") == Knobs(name="x")
    args = parser.parse_args(["--name", "n", "--hidden-size", "3", "--rate", "0.5", "--verbose"])
    assert from_args(Knobs, args) == Knobs(name="n", hidden_size=3, rate=0.5, verbose=True)
    # A tuple field takes one or more values, given as a tuple (the config stays hashable).
    assert overrides(Knobs, parser.parse_args(["--sizes", "1", "8"])) == {"sizes": (1, 8)}
    with pytest.raises(SystemExit):
        parser.parse_args(["--sizes"])
    # An explicit --no-x is given, even when it equals the default.
    assert overrides(Knobs, parser.parse_args(["--no-verbose"])) == {"verbose": False}
    with pytest.raises(SystemExit):
        parser.parse_args(["--hidden-size", "wide"])


def test_flag_selection_and_unsupported_types_are_explicit():
    args = _parser(only=("rate",)).parse_args(["--rate", "2"])
    assert overrides(Knobs, args) == {"rate": 2.0}
    with pytest.raises(SystemExit):
        _parser(only=("rate",)).parse_args(["--tag", "x"])
    with pytest.raises(TypeError, match=r"Knobs\.shape"):
        _parser()
    with pytest.raises(ValueError, match="no field"):
        _parser(exclude=("shape", "nope"))


def test_configs_round_trip_through_json():
    cfg = Knobs(name="n", sizes=(4, 5), shape=(2, 3))
    again = from_dict(Knobs, json.loads(json.dumps(to_dict(cfg))))
    assert again == cfg and hash(again) == hash(cfg)
    with pytest.raises(TypeError):
        from_dict(Knobs, {**to_dict(cfg), "unknown": 1})


def test_the_config_modules_import_no_jax():
    """A CLI builds its parser before `--devices` sets XLA's flags: nothing may load jax."""
    code = (
        "import sys, harness, rtplan.harness.config, rtplan.planner.train_config, rtplan.cli\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'flax'))\n"
        "assert not loaded, loaded\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


# A toy algorithm through the loop -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    iterations: int = knob(6, "Iterations.")
    eval_every: int = knob(2, "Evaluate every this many iterations.")
    checkpoint_every: int = knob(2, "Checkpoint every this many iterations.")
    seed: int = knob(0, "Seed of the start.")
    lr: float = knob(0.25, "Step size.")


class Toy:
    """Gradient descent on (w - 3)^2 in numpy; its evaluation scores are scripted."""

    kind = "toy"
    export_file = "toy.msgpack"
    name = "toy"
    columns = ("loss", "eval_mean")
    progress = {"loss": "loss"}
    scores = {2: 1.0, 4: 5.0, 6: 2.0, 8: 5.0}  # iteration -> eval score (else 0)

    def __init__(self, cfg: ToyConfig) -> None:
        self.cfg = cfg

    def metadata(self):
        return {"game": "toy-v0"}

    def init(self):
        w = np.random.default_rng(self.cfg.seed).normal(size=(2,)).astype(np.float32)
        return {"w": w, "steps": np.zeros((), np.int32)}

    def step(self, state):
        grad = 2.0 * (state["w"] - 3.0)
        w = (state["w"] - self.cfg.lr * grad).astype(np.float32)
        loss = float(((w - 3.0) ** 2).sum())
        return {"w": w, "steps": state["steps"] + 1}, {"frames": 10, "loss": loss}

    def evaluate(self, state, iteration):
        score = self.scores.get(iteration, 0.0)
        return score, {"eval_mean": score}

    def params(self, state):
        return {"w": np.array(state["w"])}

    def save(self, state):
        return dict(state), {"toy_saved": True}

    def template(self, meta):
        assert meta["toy_saved"] and meta["game"] == "toy-v0"
        return self.init()

    def restore(self, tree, meta):
        return {k: np.asarray(v) for k, v in tree.items()}


def _toy(out, cfg=None, **kw) -> Run:
    cfg = cfg or ToyConfig()
    return Run(Toy(cfg), cfg, out, tensorboard=False, **{"argv": ["toy", "train"], **kw})


def _rows(out: Path) -> list[dict]:
    with (out / LOG).open(newline="") as f:
        return list(csv.DictReader(f))


def _w_after(n: int, cfg: ToyConfig = ToyConfig()) -> np.ndarray:
    toy = Toy(cfg)
    state = toy.init()
    for _ in range(n):
        state = toy.step(state)[0]
    return state["w"]


def test_a_toy_algorithm_runs_evaluates_checkpoints_and_exports(tmp_path):
    run = Run(Toy(ToyConfig()), ToyConfig(), tmp_path, argv=["toy", "train"])
    last = run.run()
    assert last["iteration"] == run.iteration == 6 and run.frames == 60
    rows = _rows(tmp_path)
    assert list(rows[0]) == [*HEAD, "loss", "eval_mean"]
    assert [int(r["iteration"]) for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [r["eval_mean"] for r in rows] == ["", "1", "", "5", "", "2"]
    assert [int(r["frames"]) for r in rows] == [10, 20, 30, 40, 50, 60]
    assert float(rows[-1]["loss"]) == pytest.approx(float(((_w_after(6) - 3) ** 2).sum()), 1e-5)
    assert list((tmp_path / "tb").iterdir())

    meta = ckpt.load_metadata(tmp_path / CHECKPOINT)
    assert meta["kind"] == "train_state" and meta["toy_saved"] and meta["iteration"] == 6
    assert meta["train_config"] == to_dict(ToyConfig()) and meta["argv"] == ["toy", "train"]
    assert meta["game"] == "toy-v0" and meta["seed"] == 0 and meta["frames"] == 60
    assert meta["git_commit"] and meta["timestamp"] and meta["last_eval"]["iteration"] == 6
    # The best evaluation (iteration 4) is kept and exported, not the latest.
    best, best_meta = ckpt.load(tmp_path / BEST, {"params": {"w": np.zeros(2, np.float32)}})
    assert best_meta["eval"] == {"eval_mean": 5.0, "score": 5.0, "iteration": 4}
    np.testing.assert_array_equal(best["params"]["w"], _w_after(4))
    exported, export_meta = ckpt.load(tmp_path / "toy.msgpack", {"params": {"w": np.zeros(2)}})
    assert export_meta["kind"] == "toy" and export_meta["source"] == "best"
    assert export_meta["params_from"]["iteration"] == 4
    np.testing.assert_array_equal(exported["params"]["w"], _w_after(4))


def test_resume_continues_the_numbering_and_truncates_the_log(tmp_path):
    first = _toy(tmp_path)
    for _ in range(3):
        first.step()
    first.close()  # "killed" after iteration 3: the checkpoint holds iteration 2
    assert [int(r["iteration"]) for r in _rows(tmp_path)] == [1, 2, 3]

    resumed = _toy(tmp_path, resume=True)
    assert resumed.iteration == 2 and resumed.frames == 20
    assert [int(r["iteration"]) for r in _rows(tmp_path)] == [1, 2]  # row 3 is redone
    np.testing.assert_array_equal(resumed.state["w"], _w_after(2))
    assert resumed.best_score == 1.0
    resumed.run()
    rows = _rows(tmp_path)
    assert [int(r["iteration"]) for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [int(r["frames"]) for r in rows] == [10, 20, 30, 40, 50, 60]
    # The same run as without the interruption.
    np.testing.assert_array_equal(resumed.state["w"], _w_after(6))
    assert int(resumed.state["steps"]) == 6
    # A longer resumed run goes on from there; a tie with the best moves the best forward.
    more = _toy(tmp_path, ToyConfig(iterations=8), resume=True, argv=["toy", "--resume"])
    assert more.iteration == 6 and more.best_score == 5.0
    more.run()
    assert ckpt.load_metadata(tmp_path / BEST)["eval"]["iteration"] == 8
    meta = ckpt.load_metadata(tmp_path / CHECKPOINT)
    assert meta["iteration"] == 8 and meta["argv"] == ["toy", "--resume"]
    # Provenance keeps every command that ran the run, the first one's settings included.
    assert meta["commands"] == [["toy", "train"], ["toy", "train"], ["toy", "--resume"]]


def test_run_config_takes_the_checkpoint_and_the_given_flags(tmp_path):
    _toy(tmp_path, ToyConfig(iterations=2, lr=0.5)).run()
    cfg = run_config(ToyConfig, tmp_path, resume=True, given={"iterations": 4})
    assert cfg == ToyConfig(iterations=4, lr=0.5)
    assert run_config(ToyConfig, tmp_path, resume=False, given={}) == ToyConfig()
    with pytest.raises(CheckpointError, match=r"was trained with seed=0, not 1"):
        run_config(ToyConfig, tmp_path, resume=True, given={}, seed=1)


def test_overwriting_and_resuming_nothing_are_refused(tmp_path):
    with pytest.raises(CheckpointError, match=r"cannot resume: no checkpoint at .*nothing"):
        _toy(tmp_path / "nothing", resume=True)
    assert not (tmp_path / "nothing").exists()
    _toy(tmp_path, ToyConfig(iterations=1)).run()
    before = (tmp_path / CHECKPOINT).read_bytes()
    with pytest.raises(CheckpointError, match="already exists.*--resume"):
        _toy(tmp_path)
    assert (tmp_path / CHECKPOINT).read_bytes() == before


def test_a_corrupt_checkpoint_is_a_clear_error_and_changes_nothing(tmp_path):
    _toy(tmp_path, ToyConfig(iterations=2)).run()
    path = tmp_path / CHECKPOINT
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    with pytest.raises(CheckpointError, match=rf"corrupt checkpoint {path}"):
        _toy(tmp_path, ToyConfig(iterations=4), resume=True)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == files


def test_a_failed_save_leaves_the_previous_file_and_no_partial_one(tmp_path, monkeypatch):
    path = tmp_path / "c.msgpack"
    ckpt.save(path, {"w": np.arange(3.0)}, {"v": 1})

    def crash(*args):
        raise OSError("disk full")

    monkeypatch.setattr(ckpt.os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        ckpt.save(path, {"w": np.arange(3.0) + 1}, {"v": 2})
    monkeypatch.undo()
    tree, meta = ckpt.load(path, {"w": np.zeros(3)})
    assert meta["v"] == 1 and tree["w"].tolist() == [0.0, 1.0, 2.0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.msgpack", "c.msgpack.json"]


# The checkpoint folder's layout: which planner and gate files --------------------------------


def test_the_layout_names_each_games_planner_and_gate(tmp_path):
    assert ckpt.planner_path(tmp_path, "g-v0") == tmp_path / "g-v0" / ckpt.PLANNER_FILE
    assert ckpt.gate_path(tmp_path, "g-v0") == tmp_path / "g-v0" / ckpt.GATE_FILE
    assert (ckpt.PLANNER_FILE, ckpt.GATE_FILE) == ("planner.msgpack", "gate.msgpack")


def test_the_resolvers_take_the_explicit_file_else_the_default_under_a_root(tmp_path):
    planner, gate = ckpt.planner_path(tmp_path, "g-v0"), ckpt.gate_path(tmp_path, "g-v0")
    planner.parent.mkdir()
    planner.write_bytes(b"p")
    gate.write_bytes(b"g")
    assert ckpt.planner_file("g-v0", root=tmp_path) == planner
    assert ckpt.gate_file("g-v0", root=tmp_path) == gate
    mine = tmp_path / "mine.msgpack"
    mine.write_bytes(b"m")
    assert ckpt.planner_file("g-v0", str(mine), root="/nowhere") == mine
    assert ckpt.gate_file("g-v0", mine, beside="/nowhere/g-v0/planner.msgpack") == mine
    # No root: the shipped checkpoints (`checkpoint_root()`), existing or not.
    shipped = ckpt.checkpoint_root() / "g-v0"
    assert ckpt.planner_file("g-v0", required=False) == shipped / "planner.msgpack"
    assert ckpt.gate_file("g-v0", required=False) == shipped / "gate.msgpack"


def test_the_gate_defaults_to_the_one_beside_the_planner(tmp_path):
    planner = ckpt.planner_path(tmp_path / "ck", "g-v0")
    want = tmp_path / "ck" / "g-v0" / "gate.msgpack"
    assert ckpt.gate_file("g-v0", beside=planner, root="/ignored", required=False) == want
    with pytest.raises(CheckpointError, match=f"no gate checkpoint for g-v0 at {want}"):
        ckpt.gate_file("g-v0", beside=str(planner))
    want.parent.mkdir(parents=True)
    want.write_bytes(b"g")
    assert ckpt.gate_file("g-v0", beside=str(planner)) == want


def test_a_missing_required_file_is_one_message_naming_the_game_and_the_path(tmp_path):
    where = ckpt.planner_path(tmp_path, "g-v0")
    with pytest.raises(CheckpointError) as raised:
        ckpt.planner_file("g-v0", root=tmp_path)
    assert str(raised.value) == (
        f"no planner checkpoint for g-v0 at {where}: train one (`rtplan train-planner --game "
        "g-v0`, then `rtplan ship-planner`) or pass --planner"
    )
    assert str(raised.value) == str(ckpt.missing_checkpoint("planner", "g-v0", where, "--planner"))
    with pytest.raises(CheckpointError) as raised:
        ckpt.gate_file("g-v0", tmp_path / "x.msgpack", flag="--clock-gate")
    assert str(raised.value) == (
        f"no gate checkpoint for g-v0 at {tmp_path / 'x.msgpack'}: train one (`rtplan train-gate "
        "--game g-v0`, then `rtplan ship-gate`) or pass --clock-gate"
    )
    assert ckpt.planner_file("g-v0", root=tmp_path, required=False) == where  # e.g. to write


def test_ship_copies_the_export_with_its_provenance(tmp_path):
    run = tmp_path / "run"
    _toy(run).run()

    def describe(ev, train_cfg):
        return f"score {ev['eval_mean']} at {ev['iteration']} (lr {train_cfg['lr']})"

    shipped = ship(
        run, tmp_path / "ck", file_name="toy.msgpack", what="toy", describe=describe, notes=["- x"]
    )
    assert shipped == tmp_path / "ck" / "toy-v0" / "toy.msgpack"
    assert shipped.read_bytes() == (run / "toy.msgpack").read_bytes()
    # The log is a result beside the checkpoints root, not a shipped file.
    assert not (shipped.parent / LOG).exists()
    log = tmp_path / "results" / "toy-v0" / "training" / LOG
    assert log.read_text() == (run / LOG).read_text()
    readme = (shipped.parent / "README.md").read_text().splitlines()
    assert readme[0] == "# toy-v0 toy checkpoint"
    assert "`toy train`" in readme[3] and "best params" in readme[3]
    # The shipped params are the best's: their iteration and evaluation, not the last ones.
    assert "iteration 4, 40 training frames" in readme[4]
    assert readme[5] == "- evaluation of these params: score 5.0 at 4 (lr 0.25)"
    assert readme[6] == "- training log: `results/toy-v0/training/log.csv`"
    assert readme[7] == "- x"
    # A resumed run's README names the command that set it up, then the resuming one.
    _toy(run, ToyConfig(iterations=8), resume=True, argv=["toy", "--resume"]).run()
    shipped = ship(run, tmp_path / "ck", file_name="toy.msgpack", what="toy", describe=describe)
    readme = (shipped.parent / "README.md").read_text().splitlines()
    assert "produced by: `toy train`, then `toy --resume` (best params of the run)" in readme[3]
    with pytest.raises(ValueError, match="plain folder name"):
        ship(
            run,
            tmp_path / "ck",
            file_name="toy.msgpack",
            what="toy",
            describe=describe,
            variant="../up",
        )


def test_data_parallel_processes_checks_the_mesh_and_evaluation(monkeypatch):
    """Alone, anything goes; in a job of several processes the mesh spans all their devices and
    nothing is evaluated during training (the check the planner's and the gate's trainers share)."""
    import jax

    assert data_parallel_processes(1, eval_every=10) == 1
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(jax, "device_count", lambda: 4)
    assert data_parallel_processes(4, eval_every=0) == 2
    with pytest.raises(ValueError, match="devices=2, but the mesh of 2 processes must span all"):
        data_parallel_processes(2, eval_every=0)
    with pytest.raises(ValueError, match="no evaluation during a run of several processes"):
        data_parallel_processes(4, eval_every=10)


def test_a_shipped_checkpoint_is_recorded_without_the_machines_folders(tmp_path, monkeypatch):
    shipped = ckpt.planner_file("snake-rt-v0")
    assert shipped.is_absolute()
    expected = "checkpoints/snake-rt-v0/planner.msgpack"
    assert ckpt.recorded_path(shipped) == expected
    monkeypatch.chdir(shipped.parents[2])  # the same file named from the checkout's root
    assert ckpt.recorded_path(Path("checkpoints/snake-rt-v0/planner.msgpack")) == expected
    other = tmp_path / "run" / "planner.msgpack"
    assert ckpt.recorded_path(other) == str(other)  # not shipped: as given
