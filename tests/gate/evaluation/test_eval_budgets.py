"""`rtplan eval --budgets`: a larger fixed k plays at the checkpoint's simulations per frame and
is recorded with the budgets played, the checkpoint's own always-k conditions play the same
games with or without the flag (and their files are kept across the two), and the conditions
that choose among the checkpoint's budgets (a gate, random k) are refused under others."""

from __future__ import annotations

import json

import pytest

from rtplan.cli import main
from rtplan.gate.evaluation.committed import run_conditions
from rtplan.harness.checkpoint import planner_path
from support import write_gate, write_planner

GAME = "snake-rt-v0"
#: The main use's rules: a committed plan searched every frame below the root.
RULES = ["--committed", "plan", "--tree-k", "1"]


def test_a_larger_k_plays_and_the_checkpoints_own_play_the_same_games(tmp_path):
    # Seed 1: a planner that eats in one of the two games.
    root = write_planner(tmp_path / "ck", GAME, seed=1, budgets=(1, 2), simulations=(2, 4))
    planner = str(planner_path(root, GAME))
    kw = dict(split="tuning", episodes=2, planner_file=planner, committed="plan", tree_k=1)
    without = run_conditions(GAME, conditions=["k2"], out=str(tmp_path / "a"), **kw)
    out = tmp_path / "b"
    base = ["eval", "--game", GAME, "--planner", planner, "--split", "tuning", "--episodes", "2"]
    more = [*base, *RULES, "--budgets", "1", "2", "3", "--out", str(out)]
    assert main([*more, "--conditions", "k2", "k3"]) == 0
    folder = out / GAME / "tuning" / "plan-tree1"
    a = json.loads(without["k2"].read_text())
    b, k3 = (json.loads((folder / f"{n}.json").read_text()) for n in ("k2", "k3"))
    # k2 reads its previous option's plan, whose horizon grows with the largest budget (4 -> 9
    # frames): the same games all the same, one of them scored.
    for key in ("seeds", "returns", "frames", "ks", "decision_frames"):
        assert a[key] == b[key], key
    assert sum(a["returns"]) > 0
    assert (a["budgets"], a["simulations"]) == ([1, 2], [2, 4])
    played = ([1, 2, 3], [2, 4, 6])
    assert (b["budgets"], b["simulations"]) == played == (k3["budgets"], k3["simulations"])
    assert (k3["committed"], k3["tree_k"]) == ("plan", 1) and set("".join(k3["ks"])) == {"3"}
    # A file played with the flag is kept without it (and the other way round).
    logs = []
    run_conditions(GAME, conditions=["k2"], out=str(out), log=logs.append, **kw)
    assert logs == [f"k2: kept {folder / 'k2.json'}"]
    again = dict(kw, out=str(tmp_path / "a"), budgets=(1, 2, 3, 4))
    run_conditions(GAME, conditions=["k2"], log=logs.append, **again)
    assert logs[-1] == f"k2: kept {without['k2']}"


def test_gate_and_random_k_are_refused_under_other_budgets(tmp_path, capsys):
    root = write_planner(tmp_path / "ck", GAME, budgets=(1, 2), simulations=(2, 4))
    write_gate(root, GAME, channels=8, head_hidden=16)
    planner = str(planner_path(root, GAME))
    base = ["eval", "--game", GAME, "--planner", planner, "--out", str(tmp_path / "res")]
    for conditions in (["gate", "k3"], ["random"], ["gate-no-board"]):
        assert main([*base, "--budgets", "1", "2", "3", "--conditions", *conditions]) == 2
        err = capsys.readouterr().err
        assert f"conditions {[n for n in conditions if n != 'k3']} choose among the planner " in err
        assert "budgets [1, 2]: play them without --budgets (here [1, 2, 3])" in err
    assert main([*base, "--budgets", "2", "3", "--conditions", "k3"]) == 2
    assert "leave out the checkpoint's [1]" in capsys.readouterr().err
    assert main([*base, "--budgets", "1", "2", "10", "--conditions", "k10"]) == 2
    assert "budgets above 9 are not played" in capsys.readouterr().err
    assert main([*base, "--budgets", "1", "2", "3", "--via-services"]) == 2
    assert "drop --budgets" in capsys.readouterr().err
    assert main(["eval", "--game", "speed-hex-v0", "--budgets", "2", "4", "8"]) == 2
    assert "--budgets is for committed-action games" in capsys.readouterr().err
    with pytest.raises(ValueError, match="choose among the planner checkpoint's budgets"):
        run_conditions(GAME, conditions=["gate"], planner_file=planner, budgets=(1, 2, 3))
