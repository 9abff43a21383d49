"""bench/plan_curves.py: reads rtplan eval's three settings and pairs them by seed (no JAX)."""

from __future__ import annotations

import json

import pytest

from bench.plan_curves import curves, main


def _write(root, game, folder, k, returns, seeds=None):
    path = root / game / folder / f"k{k}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    seeds = list(range(len(returns))) if seeds is None else seeds
    path.write_text(json.dumps({"returns": returns, "seeds": seeds}))


def test_pairs_each_setting_by_seed_and_k1_is_shared(tmp_path, capsys):
    g = "snake-rt-v0"
    _write(tmp_path, g, "tuning", 1, [1.0, 3.0])
    _write(tmp_path, g, "tuning", 2, [2.0, 4.0])
    _write(tmp_path, g, "tuning/tree1", 2, [1.0, 1.0])
    _write(tmp_path, g, "tuning/plan-tree1", 2, [3.0, 7.0])
    rows = curves(tmp_path, "tuning", [g])
    k1, k2 = rows
    assert k1["plan-tree1_mean"] == k1["shipped_mean"] == 2.0  # no committed frame at k1
    assert k2["plan-tree1_minus_reflex-tree1"] == 4.0  # (2 + 6) / 2
    assert k2["plan-tree1_minus_reflex-tree1_se"] == pytest.approx(2.0)  # sd 2.83 / sqrt 2
    assert k2["plan-tree1_minus_shipped"] == 2.0 and k2["plan-tree1_minus_shipped_se"] == 1.0
    assert main(["--results", str(tmp_path), "--games", g, "--csv", str(tmp_path / "c.csv")]) == 0
    out = capsys.readouterr().out
    assert "| snake-rt-v0 | 2 | 3.0 +- 1.0 | 1.0 +- 0.0 | 5.0 +- 2.0 | +4.0 +- 2.0 |" in out
    assert (tmp_path / "c.csv").read_text().count("\n") == 3


def test_a_larger_k_gets_a_row_paired_with_k1(tmp_path):
    g = "pacman-rt-v0"
    _write(tmp_path, g, "tuning", 1, [1.0, 3.0])
    _write(tmp_path, g, "tuning/plan-tree1", 6, [4.0, 4.0])  # rtplan eval --budgets ... k6
    k1, k6 = curves(tmp_path, "tuning", [g])
    assert k1["k"] == 1 and k1["plan-tree1_minus_k1"] == 0.0
    assert k6["k"] == 6 and "shipped_mean" not in k6 and k6["plan-tree1_mean"] == 4.0
    assert k6["plan-tree1_minus_k1"] == 2.0 and k6["plan-tree1_minus_k1_se"] == 1.0


def test_refuses_other_seeds(tmp_path):
    g = "tetris-rt-v0"
    _write(tmp_path, g, "tuning", 2, [2.0, 4.0])
    _write(tmp_path, g, "tuning/tree1", 2, [1.0, 1.0], seeds=[5, 6])
    with pytest.raises(SystemExit, match="other seeds"):
        curves(tmp_path, "tuning", [g])


def test_a_gate_under_the_plan_is_paired_with_k1_and_each_plan_budget(tmp_path):
    g = "pacman-rt-v0"
    _write(tmp_path, g, "holdout", 1, [1.0, 3.0])
    _write(tmp_path, g, "holdout/plan-tree1", 3, [2.0, 2.0])
    path = tmp_path / g / "holdout/plan-tree1/gate.json"
    path.write_text(json.dumps({"returns": [2.0, 6.0], "seeds": [0, 1]}))
    *_, gate = curves(tmp_path, "holdout", [g])
    assert gate["k"] == "gate" and gate["plan-tree1_mean"] == 4.0
    assert gate["plan-tree1_minus_k1"] == 2.0 and gate["plan-tree1_minus_k1_se"] == 1.0
    assert gate["minus_k3"] == 2.0 and gate["minus_k3_se"] == 2.0
