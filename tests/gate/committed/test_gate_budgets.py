"""`rtplan train-gate --budgets`: a gate over more budgets than the planner checkpoint's trains,
resumes and exports over them, its file records them, and every loader of it (`rtplan eval`,
`--via-services`, the planner service) plays it over them without the flag; other budgets, and
the flag on a clock game, are refused."""

from __future__ import annotations

import json

import jax
import pytest

from rtplan.cli import main
from rtplan.harness import checkpoint as ckpt
from rtplan.harness.checkpoint import planner_path
from support import write_planner

GAME = "snake-rt-v0"
#: The main use's rules: a committed plan searched every frame below the root.
RULES = ["--committed", "plan", "--tree-k", "1"]
#: One game a batch: each budget's option compiles at one group size.
TINY = [
    "--num-envs", "1", "--meta-steps", "3", "--epochs", "1", "--minibatches", "1",
    "--eval-every", "1", "--eval-episodes", "1", "--eval-max-meta-steps", "2",
    "--gate-channels", "8", "--gate-hidden", "16", "--init-k", "3", "--no-progress",
]  # fmt: skip


@pytest.fixture(scope="module")
def planner_file(tmp_path_factory):
    """A fresh tiny Snake planner with budgets 1 and 2, at 2 simulations per frame."""
    root = write_planner(tmp_path_factory.mktemp("ck"), GAME, budgets=(1, 2), simulations=(2, 4))
    return str(planner_path(root, GAME))


@pytest.fixture(scope="module")
def run(tmp_path_factory, planner_file):
    """A one-iteration gate run over budgets 1 2 3 under the plan rules (its folder)."""
    out = tmp_path_factory.mktemp("run")
    argv = ["train-gate", "--game", GAME, "--out", str(out), "--planner", planner_file]
    assert main([*argv, *RULES, "--budgets", "1", "2", "3", "--iterations", "1", *TINY]) == 0
    return out


def test_a_gate_over_more_budgets_trains_exports_and_resumes_over_them(run, capsys):
    meta = ckpt.load_metadata(run / "gate.msgpack")
    assert meta["budgets"] == [1, 2, 3] and meta["train_config"]["budgets"] == [1, 2, 3]
    # k3 searches at the checkpoint's 2 simulations per frame, under the run's rules.
    pcfg = meta["planner_config"]
    assert (pcfg["budgets"], pcfg["simulations"]) == ([1, 2, 3], [2, 4, 6])
    assert (pcfg["committed"], pcfg["tree_k"]) == ("plan", 1)
    header = (run / "log.csv").read_text().splitlines()[0].split(",")
    assert {"k1", "k2", "k3", "eval_mean"} <= set(header)
    # Flags left out on resume keep the checkpoint's budgets; others are refused.
    base = ["train-gate", "--game", GAME, "--out", str(run), "--resume", "--no-progress"]
    assert main([*base, "--budgets", "1", "2", "--iterations", "2"]) == 2
    assert "over budgets [1, 2, 3], but this run asks for" in capsys.readouterr().err
    assert main([*base, "--iterations", "2"]) == 0
    meta = ckpt.load_metadata(run / "gate.msgpack")
    assert meta["iteration"] == 2 and meta["budgets"] == [1, 2, 3]


def test_its_gate_plays_over_its_budgets_wherever_it_is_loaded(run, planner_file, tmp_path, capsys):
    gate, results = str(run / "gate.msgpack"), tmp_path / "results"
    ev = ["eval", "--game", GAME, "--planner", planner_file, "--gate", gate, *RULES]
    ev += ["--split", "tuning", "--episodes", "2", "--out", str(results)]
    assert main([*ev, "--conditions", "gate", "k3"]) == 0  # no --budgets: the gate's own
    folder = results / GAME / "tuning" / "plan-tree1"
    for name in ("gate", "k3"):
        rec = json.loads((folder / f"{name}.json").read_text())
        assert (rec["budgets"], rec["simulations"]) == ([1, 2, 3], [2, 4, 6])
        assert set("".join(rec["ks"])) <= {"1", "2", "3"}
    # Given budgets that are not the gate's, the gate is refused, naming its own.
    capsys.readouterr()
    assert main([*ev, "--budgets", "1", "2", "3", "4", "--conditions", "gate"]) == 2
    err = capsys.readouterr().err
    assert "conditions ['gate'] choose among their gate's budgets [1, 2, 3]" in err
    assert "without --budgets, or with --budgets 1 2 3 (here [1, 2, 3, 4])" in err
    # The services' loaders play it over them too (the cross-check's and the planner service's).
    from rtplan.planner_service._loading import load_game
    from rtplan.via_services import committed

    loaded = committed.load(GAME, planner_file, gate, {"committed": "plan", "tree_k": 1})
    assert loaded.planner.config.budgets == loaded.gate.budgets == (1, 2, 3)
    rules = {"committed": "plan", "tree_k": 1}
    served = load_game(GAME, planner_file, gate, jax.devices()[0], {}, rules=rules)
    assert served.config.budgets == served.options.budgets == (1, 2, 3)
    assert served.config.gumbel_scale == 0.0


def test_budgets_are_refused_on_clock_games_and_without_the_checkpoints(
    planner_file, tmp_path, capsys
):
    out = tmp_path / "run"
    base = ["train-gate", "--game", GAME, "--out", str(out), "--planner", planner_file]
    assert main([*base, "--budgets", "2", "3", *TINY]) == 2
    assert "leave out the checkpoint's [1]" in capsys.readouterr().err
    assert main([*base, "--budgets", "1", "3", "2", *TINY]) == 2
    assert "budgets must be ascending and distinct, got [1, 3, 2]" in capsys.readouterr().err
    hex_argv = ["train-gate", "--game", "speed-hex-v0", "--out", str(tmp_path / "hex")]
    assert main([*hex_argv, "--budgets", "2", "4", "8"]) == 2
    assert "--budgets is for committed-action games: speed-hex-v0" in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "hex").exists()


@pytest.mark.slow  # ~30 s: starts the planner service and the env server
def test_the_services_play_it_over_its_budgets_as_in_process(run, planner_file, capsys):
    gate = str(run / "gate.msgpack")
    argv = ["eval", "--game", GAME, "--planner", planner_file, "--gate", gate, *RULES]
    assert main([*argv, "--via-services", "--episodes", "1", "--split", "tuning"]) == 0
    assert "identical in process and through the services" in capsys.readouterr().out
