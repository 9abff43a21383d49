"""`rtplan counterfactual --budgets` and `fit-gate` over them: every state branches the
checkpoint's budgets and larger ones, the run goes to a folder of its budgets (never the
checkpoint's budgets' own) whose chunks record them, and a gate fitted to such labels chooses
among them and records them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rtplan.cli import main
from rtplan.gate.counterfactual import values
from rtplan.gate.files import file_sha256
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.checkpoint import planner_path
from support import write_checkpoints, write_planner

GAME = "snake-rt-v0"
#: The checkpoint's budgets, at 2 simulations per frame.
OWN = {"budgets": (1, 2), "simulations": (2, 4)}


def _argv(tmp_path, *more):
    planner = planner_path(write_planner(tmp_path / "ck", GAME, **OWN), GAME)
    argv = ["counterfactual", "--game", GAME, "--planner", str(planner), "--continuation", "3"]
    argv += ["--states", "2", "--chunk", "2", "--worlds", "2", "--horizon", "3"]
    return [*argv, "--max-frame", "3", "--out", str(tmp_path / "results"), *more]


def test_a_run_over_more_budgets_has_its_own_folder_and_checks_its_chunks(
    tmp_path, capsys, monkeypatch
):
    runs = []
    monkeypatch.setattr(values, "run_chunks", lambda folder, **kw: runs.append((folder, kw)) or {})
    assert main(_argv(tmp_path)) == 2  # k3 is no budget of the checkpoint's
    assert "continuation k=3 is not one of (1, 2)" in capsys.readouterr().err
    assert main(_argv(tmp_path, "--budgets", "2", "3")) == 2
    assert "leave out the checkpoint's [1]" in capsys.readouterr().err
    topic = tmp_path / "results" / GAME / "counterfactual"
    assert main(_argv(tmp_path, "--budgets", "1", "2", "3")) == 0
    assert (
        main(_argv(tmp_path, "--budgets", "1", "2", "3", "--committed", "plan", "--tree-k", "1"))
        == 0
    )
    assert main(_argv(tmp_path, "--continuation", "2")) == 0  # the checkpoint's own: as before
    (more, kw), (plan, _), (own, own_kw) = runs
    assert more == topic / "budgets-1-2-3" / "k3-h3-w2-s0"
    assert plan == topic / "plan-tree1" / "budgets-1-2-3" / "k3-h3-w2-s0"
    assert own == topic / "k2-h3-w2-s0"
    # Every chunk records its budgets, and a resume refuses chunks of others.
    assert kw["head"]["budgets"] == [1, 2, 3] and own_kw["head"]["budgets"] == [1, 2]
    assert "budgets" in kw["fixed"]


def test_budgets_are_refused_on_clock_games(tmp_path, capsys):
    write_checkpoints(tmp_path / "hex", ("speed-hex-v0",))
    argv = ["counterfactual", "--game", "speed-hex-v0", "--t0", "12", "--budgets", "2", "4"]
    argv += ["--planner", str(planner_path(tmp_path / "hex", "speed-hex-v0"))]
    assert main([*argv, "--out", str(tmp_path / "results")]) == 2
    assert "--budgets is for committed-action games: speed-hex-v0" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


def test_fit_gate_fits_a_gate_over_its_labels_budgets(tmp_path, capsys):
    planner = str(planner_path(write_planner(tmp_path / "ck", GAME, **OWN), GAME))
    folder = tmp_path / "labels"
    folder.mkdir()
    scores = np.zeros((2, 2, 3))
    scores[0, :, 2] = [5.0, 5.2]  # k3 pays at the first state
    part = {
        "planner_sha256": file_sha256(planner), "games": 2, "seeds": [0, 1], "frames": [2, 2],
        "budgets": [1, 2, 3], "values": scores.tolist(),
    }  # fmt: skip
    (folder / "chunk-0000000.json").write_text(json.dumps(part))
    (folder / "summary.json").write_text(json.dumps({"continuation": 1}))
    out = tmp_path / "gate.msgpack"
    fit = ["fit-gate", "--game", GAME, "--planner", planner, "--labels", str(folder)]
    fit += ["--out", str(out), "--folds", "0", "--epochs", "2"]
    fit += ["--gate-channels", "8", "--gate-hidden", "16"]
    assert main([*fit, "--budgets", "1", "2"]) == 2
    err = capsys.readouterr().err
    assert "the labels were measured over budgets [1, 2, 3], not [1, 2]" in err
    assert not out.exists()
    assert main(fit) == 0  # the labels' budgets, without the flag
    meta = ckpt.load_metadata(out)
    assert meta["budgets"] == [1, 2, 3] and meta["labels_per_budget"] == {"1": 1, "2": 0, "3": 1}
    pcfg = meta["planner_config"]
    assert (pcfg["budgets"], pcfg["simulations"]) == ([1, 2, 3], [2, 4, 6])


@pytest.mark.slow  # ~30 s: compiles its own runner
def test_a_run_over_more_budgets_branches_each_of_them(tmp_path):
    assert main(_argv(tmp_path, "--budgets", "1", "2", "3")) == 0
    folder = tmp_path / "results" / GAME / "counterfactual" / "budgets-1-2-3" / "k3-h3-w2-s0"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["budgets"] == [1, 2, 3] and set(summary["per_budget"]) == {"1", "2", "3"}
    (chunk,) = folder.glob("chunk-*.json")
    part = json.loads(chunk.read_text())
    assert part["budgets"] == [1, 2, 3] and len(part["values"][0][0]) == 3
