"""`rtplan eval` files and `rtplan report`: paired differences, best fixed k from the tuning
seeds only, the README table between its markers, figures, and clear errors."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest

from rtplan.cli import main
from rtplan.gate.evaluation.committed import (
    _resumable,
    condition_file,
    load_conditions,
    partial_file,
    run_conditions,
)
from rtplan.gate.evaluation.report import (
    HOLDOUT_README_BEGIN,
    HOLDOUT_README_END,
    README_BEGIN,
    README_END,
    best_fixed_k,
    summarize,
)
from rtplan.harness.checkpoint import planner_path
from rtplan.planner import Planner
from rtplan.planner.store import save_planner
from support import tiny_config, write_gate

GAME = "snake-rt-v0"


def _write(root, split, name, returns, ks=None, seeds=None, budgets=(1, 2)):
    n = len(returns)
    ks = ks if ks is not None else [""] * n
    rec = {
        "game": GAME,
        "split": split,
        "condition": name,
        "budgets": list(budgets),
        "seeds": seeds if seeds is not None else list(range(2_000_000, 2_000_000 + n)),
        "returns": list(map(float, returns)),
        "frames": [max(len(k), 1) * 2 for k in ks],
        "ks": ks,
        "decision_frames": [list(range(0, 2 * len(k), 2)) for k in ks],
        "features": {},
    }
    path = condition_file(root, GAME, split, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec))


def test_one_rule_names_a_gate_in_every_game():
    """`gate` and `gate-<name>` are gates (committed and clock games alike); ablations,
    baselines and malformed names are not, and `check_gate_name` says the rule."""
    from rtplan.gate.committed.choosers import ABLATIONS, check_gate_name, is_gate

    for name in ("gate", "gate-heur", "gate-supervised-stats", "gate-ppo.2", "gate-a_b"):
        assert is_gate(name) and check_gate_name(name) == name
    for name in (*ABLATIONS, "k4", "always-32", "gate-", "gate-Big", "gates", "policy-only"):
        assert not is_gate(name)
        with pytest.raises(ValueError, match=f"gate name '{name}': a gate is named"):
            check_gate_name(name)


def test_summary_pairs_seeds_and_best_fixed_comes_from_tuning(tmp_path):
    _write(tmp_path, "eval", "gate", [5, 7, 9], ks=["12", "2", "11"])
    _write(tmp_path, "eval", "k1", [4, 7, 6], ks=["111", "11", "1"])
    _write(tmp_path, "eval", "k2", [6, 6, 6], ks=["22", "2", "2"])
    # On the tuning seeds k1 is better, although k2 has the better evaluation mean.
    _write(tmp_path, "tuning", "k1", [9, 9], seeds=[1_000_000, 1_000_001])
    _write(tmp_path, "tuning", "k2", [1, 1], seeds=[1_000_000, 1_000_001])
    evals, tuning = (
        load_conditions(tmp_path, GAME, "eval"),
        load_conditions(tmp_path, GAME, "tuning"),
    )
    assert best_fixed_k(tuning) == "k1" and best_fixed_k({}) is None
    rows = {r["condition"]: r for r in summarize(GAME, evals, tuning)}
    assert rows["k1"]["best_fixed"] and not rows["k2"]["best_fixed"]
    d = np.array([5, 7, 9]) - np.array([4, 7, 6])
    assert rows["k1"]["gate_minus"] == pytest.approx(d.mean())
    assert rows["k1"]["gate_minus_se"] == pytest.approx(d.std(ddof=1) / np.sqrt(3))
    assert rows["gate"]["mean_k"] == pytest.approx(np.mean([1, 2, 2, 1, 1]))
    assert rows["gate"]["k2"] == pytest.approx(2 / 5)
    _write(tmp_path, "eval", "random", [1, 2, 3], seeds=[7, 8, 9])
    with pytest.raises(ValueError, match=r"conditions \['random'\] played other seeds"):
        summarize(GAME, load_conditions(tmp_path, GAME, "eval"), tuning)


def test_report_tables_the_holdout_decision_and_what_is_unfinished(tmp_path):
    """The pre-registered table: the gate against the best fixed k of the tuning seeds (k2
    here, though k1 does better on the holdout), the 2-SE decision, and the conditions still
    to finish (a partial file, or none at all)."""
    res = tmp_path / "results"
    hold = list(range(2_500_000, 2_500_004))
    _write(res, "holdout", "gate", [6, 8, 7, 9], seeds=hold)
    _write(res, "holdout", "k2", [5, 6, 6, 7], seeds=hold)
    _write(res, "holdout", "k1", [9, 9, 9, 9], seeds=hold)
    _write(res, "holdout", "gate-second", [5, 6, 5, 7], seeds=hold)  # `--gate-name`
    _write(res, "tuning", "k1", [1, 1], seeds=[1_000_000, 1_000_001])
    _write(res, "tuning", "k2", [3, 3], seeds=[1_000_000, 1_000_001])
    (res / GAME / "holdout" / "partial").mkdir()
    (res / GAME / "holdout" / "partial" / "random.json").write_text("{}")
    readme = tmp_path / "README.md"
    readme.write_text(f"x\n{HOLDOUT_README_BEGIN}\nold\n{HOLDOUT_README_END}\ny\n")
    assert main(["report", "--results", str(res), "--readme", str(readme), "--no-figures"]) == 0
    d = np.array([6, 8, 7, 9]) - np.array([5, 6, 6, 7])
    z = d.mean() / (d.std(ddof=1) / 2)
    row = f"| {GAME} (4) | shipped | 7.5 ± 0.6 | 6.0 ± 0.4 (k2) | +1.5 ± 0.3 | yes ({z:+.1f} SE) |"
    text = readme.read_text()
    assert row + " random (partial), policy-only |" in text and "\nold\n" not in text
    # The second gate against the same baseline, paired seed by seed, on its own line.
    d = np.array([5, 6, 5, 7]) - np.array([5, 6, 6, 7])
    z = d.mean() / (d.std(ddof=1) / 2)
    second = f"| {GAME} (4) | gate-second | 5.8 ± 0.5 | 6.0 ± 0.4 (k2) | -0.2 ± 0.2 | no ({z:+.1f}"
    assert second + " SE) |  |" in text
    rows = json.loads((res / "holdout-summary.json").read_text())
    assert {r["condition"] for r in rows} == {"gate", "gate-second", "k1", "k2"}
    assert all(r["split"] == "holdout" for r in rows)


def test_report_writes_tables_figures_and_the_readme_table(tmp_path, capsys):
    res = tmp_path / "results"
    _write(res, "eval", "gate", [5, 7, 9], ks=["12", "2", "11"])
    _write(res, "eval", "k1", [4, 7, 6], ks=["111", "11", "1"])
    _write(res, "eval", "policy-only", [1, 1, 2])
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\nbefore\n{README_BEGIN}\nold table\n{README_END}\nafter\n")
    assert main(["report", "--results", str(res), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert "old table" not in text and text.startswith("# x\nbefore\n") and "after" in text
    line = next(x for x in text.splitlines() if x.startswith(f"| {GAME}"))
    assert "7.0 ± 1.2" in line and "— (no tuning run)" in line
    for name in ("main.png", "profile.png"):
        png = res / GAME / name
        assert png.read_bytes()[:4] == b"\x89PNG"
    rows = list(csv_rows(res / "summary.csv"))
    assert {r["condition"] for r in rows} == {"gate", "k1", "policy-only"}
    assert json.loads((res / "summary.json").read_text())[0]["condition"] == "gate"
    assert main(["report", "--results", str(tmp_path / "none")]) == 2
    assert "no evaluation results under" in capsys.readouterr().err


def csv_rows(path):
    import csv

    with path.open() as f:
        yield from csv.DictReader(f)


@pytest.fixture(scope="module")
def ckdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("ck")
    cfg = dataclasses.replace(tiny_config(GAME), budgets=(1, 2), simulations=(2, 4))
    save_planner(planner_path(root, GAME), cfg, Planner(cfg).init_params(jax.random.PRNGKey(0)))
    write_gate(root, GAME, channels=8, head_hidden=16)
    return root


def test_eval_writes_each_condition_once_and_resumes(ckdir, tmp_path):
    out = tmp_path / "res"
    # One episode: each budget's option compiles at one group size.
    kw = dict(episodes=1, planner_file=str(planner_path(ckdir, GAME)), out=str(out))
    logs = []
    files = run_conditions(GAME, conditions=["gate", "k1", "policy-only"], log=logs.append, **kw)
    assert set(files) == {"gate", "k1", "policy-only"}
    gate = json.loads(files["gate"].read_text())
    assert gate["seeds"] == [2_000_000] and gate["gate_sha256"]
    assert set("".join(gate["ks"])) <= {"1", "2"}
    # The gate's decisions carry Snake's trigger features, one value per decision.
    assert len(gate["features"]["reachable_cells"][0]) == len(gate["ks"][0])
    k1 = json.loads(files["k1"].read_text())
    assert set("".join(k1["ks"])) == {"1"} and k1["gate_sha256"] is None
    logs.clear()
    run_conditions(GAME, conditions=["k1"], log=logs.append, **kw)
    assert logs == [f"k1: kept {files['k1']}"]
    run_conditions(GAME, conditions=["k1"], force=True, log=logs.append, **kw)
    assert logs[-1].startswith("k1: ") and "kept" not in logs[-1]


class _Killed(Exception):
    pass


@pytest.mark.slow  # ~45 s: its own runner per chunk; eval's resume test covers the resume
def test_a_chunked_evaluation_killed_after_a_chunk_resumes_to_the_same_record(ckdir, tmp_path):
    """Chunks of 2 seeds; the run is killed once the first chunk is saved. The rerun resumes
    from the partial file and ends with the record an unchunked run writes, seed for seed.
    The chunked run plays the same gate as a second gate (`gate_name`): only the name moves."""
    kw = dict(episodes=3, planner_file=str(planner_path(ckdir, GAME)), split="holdout")
    whole = run_conditions(GAME, conditions=["gate"], out=str(tmp_path / "a"), **kw)

    def kill(line):
        if "seeds done" in line:
            raise _Killed(line)

    out = str(tmp_path / "b")
    kw["gate_name"] = name = "gate-second"
    with pytest.raises(_Killed, match=f"{name}: 2 of 3 seeds done"):
        run_conditions(GAME, conditions=["gate"], out=out, chunk=2, log=kill, **kw)
    part = partial_file(out, GAME, "holdout", name)
    assert json.loads(part.read_text())["seeds"] == [2_500_000, 2_500_001]
    assert not condition_file(out, GAME, "holdout", name).exists()
    logs = []
    files = run_conditions(GAME, conditions=["gate"], out=out, chunk=2, **kw, log=logs.append)
    assert logs[0] == f"{name}: resuming after 2 of 3 seeds ({part})"
    assert not part.exists() and files[name] == condition_file(out, GAME, "holdout", name)
    a, b = json.loads(whole["gate"].read_text()), json.loads(files[name].read_text())
    assert (a["condition"], b["condition"]) == ("gate", name)
    assert a["gate_sha256"] == b["gate_sha256"]
    for key in ("seeds", "returns", "frames", "ks", "decision_frames", "features"):
        assert a[key] == b[key], key
    # A partial file of another gate, planner or seed list is not resumed.
    rec = json.loads(files[name].read_text())
    rec["seeds"], seeds = rec["seeds"][:2], np.asarray(rec["seeds"])
    part.write_text(json.dumps(rec))
    prov = {"planner_sha256": rec["planner_sha256"]}
    assert _resumable(part, seeds, prov, rec["gate_sha256"])["seeds"] == rec["seeds"]
    assert _resumable(part, seeds, prov, "another gate") is None
    assert _resumable(part, seeds, {"planner_sha256": "another"}, rec["gate_sha256"]) is None
    assert _resumable(part, seeds + 1, prov, rec["gate_sha256"]) is None
    part.write_text("{")
    with pytest.raises(ValueError, match="is not a partial evaluation"):
        _resumable(part, seeds, prov, rec["gate_sha256"])


@pytest.mark.slow  # ~30 s: trains its own gate; test_gate_train covers the memory's path
def test_a_gate_with_memory_plays_its_conditions_and_its_memory_ablation(tmp_path):
    """`--gate-memory` gates evaluate like any other: their memory starts empty in every
    play (the same seeds give the same budgets twice) and `gate-no-memory` zeroes it."""
    root = tmp_path / "ck"
    cfg = dataclasses.replace(tiny_config(GAME), budgets=(1, 2), simulations=(2, 4))
    save_planner(planner_path(root, GAME), cfg, Planner(cfg).init_params(jax.random.PRNGKey(0)))
    write_gate(root, GAME, channels=8, head_hidden=16, memory=True)
    kw = dict(episodes=2, planner_file=str(planner_path(root, GAME)), ablations=True)
    files = run_conditions(
        GAME, out=str(tmp_path / "a"), conditions=["gate", "gate-no-memory"], **kw
    )
    with pytest.raises(ValueError, match="unknown condition 'gate-no-stats'"):
        run_conditions(GAME, out=str(tmp_path / "a"), conditions=["gate-no-stats"], **kw)
    again = run_conditions(GAME, out=str(tmp_path / "b"), conditions=["gate"], **kw)
    first, second = (json.loads(f["gate"].read_text()) for f in (files, again))
    assert first["ks"] == second["ks"] and first["returns"] == second["returns"]


def test_eval_rejects_bad_input(ckdir, tmp_path, capsys):
    base = ["eval", "--game", GAME, "--planner", str(planner_path(ckdir, GAME))]
    assert main([*base, "--conditions", "k9", "--out", str(tmp_path)]) == 2
    assert "unknown condition 'k9'" in capsys.readouterr().err
    assert main([*base, "--gate", str(tmp_path / "no.msgpack"), "--conditions", "gate"]) == 2
    assert "need a gate" in capsys.readouterr().err
    assert main([*base, "--episodes", "1"]) == 2
    assert "--episodes must be >= 2" in capsys.readouterr().err
    bad = tmp_path / "gate.msgpack"
    bad.write_bytes(b"not a checkpoint")
    assert main([*base, "--gate", str(bad), "--conditions", "gate", "--out", str(tmp_path)]) == 2
    assert "rtplan eval: error:" in capsys.readouterr().err
    # A second gate is named gate-<name> (`gate.committed.choosers.GATE_NAME`), and without the
    # ablations.
    for name in ("gate-no-board", "second", "gate-Big"):
        assert main([*base, "--gate-name", name, "--out", str(tmp_path)]) == 2
        assert f"gate name {name!r}: a gate is named 'gate' or 'gate-<name>'" in (
            capsys.readouterr().err
        )
    assert main([*base, "--gate-name", "gate-x", "--ablations", "--out", str(tmp_path)]) == 2
    assert "gate-x plays its gate only" in capsys.readouterr().err


def test_one_evaluation_runner_is_held_at_a_time():
    """Switching between the gate's tree and always-k drops the held runner (its executables
    are freed with it), so the two runners' compile sets never add up; the same future reuses."""
    import gc
    import weakref

    from rtplan.gate.evaluation.committed import _RunnerSlot

    cfg = dataclasses.replace(tiny_config(GAME), budgets=(1, 2), simulations=(2, 4))
    slot = _RunnerSlot(Planner(cfg), episodes=4)
    plain = slot.get(None)
    assert slot.get(None) is plain and slot.built == 1
    gone = weakref.ref(plain)
    del plain
    future = object()  # any future other than None asks for the gate's runner
    tree = slot.get(future)
    gc.collect()
    assert gone() is None, "the always-k runner outlived the switch"
    assert slot.get(future) is tree and slot.built == 2
