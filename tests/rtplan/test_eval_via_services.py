"""`rtplan eval --via-services`: the gate through the real services reproduces in-process play."""

from __future__ import annotations

import dataclasses
import shutil

import jax
import numpy as np
import pytest

import rtplan.planner.store as planner_store
from rtplan import via_services
from rtplan.cli import main
from rtplan.gate.committed import policy as committed_policy
from rtplan.harness.checkpoint import gate_path, planner_path
from rtplan.planner import Planner
from rtplan.planner.store import save_planner
from support import tiny_config, write_gate

GAME = "snake-rt-v0"
# Two budgets (only two options compile) and a gate seed whose argmax picks both.
CFG = dataclasses.replace(tiny_config(GAME), budgets=(1, 2), simulations=(2, 4))


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt")
    save_planner(planner_path(root, GAME), CFG, Planner(CFG).init_params(jax.random.PRNGKey(0)))
    write_gate(root, GAME, seed=9)
    return root


def test_the_services_reproduce_the_in_process_gate(root, capsys, monkeypatch):
    seen, real = [], via_services.committed.compare

    def compare(episodes, served):
        seen.append((episodes, served))
        return real(episodes, served)

    monkeypatch.setattr(via_services.committed, "compare", compare)
    loads = []  # each checkpoint is loaded once in this process (the services load their own)
    for module, name in ((planner_store, "load_planner"), (committed_policy, "load_gate")):
        real_load = getattr(module, name)

        def counted(*a, _real=real_load, _name=name, **kw):
            loads.append(_name)
            return _real(*a, **kw)

        monkeypatch.setattr(module, name, counted)
    planner = str(planner_path(root, GAME))
    # One episode: each budget's option compiles at one group size in process.
    argv = ["eval", "--game", GAME, "--via-services", "--episodes", "1", "--planner", planner]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "identical in process and through the services" in out and "MISMATCH" not in out
    assert sorted(loads) == ["load_gate", "load_planner"], loads
    (episodes, served) = seen[0]
    assert [s.seed for s in served] == [2_000_000] == episodes.seeds.tolist()
    for i, s in enumerate(served):
        # Played to the episode's end (the 200-frame horizon here), every frame compared.
        assert s.frames == episodes.frames[i] == len(s.actions) == len(episodes.actions[i])
        assert s.reason in ("terminated", "truncated") and s.frames > 50
        np.testing.assert_array_equal(s.actions, episodes.actions[i])
        np.testing.assert_array_equal(s.ks, episodes.ks[i])
        np.testing.assert_array_equal(s.decision_frames, episodes.decision_frames[i])
        assert f"{s.seed:>9}" in out
    row_lines = [line.split() for line in out.splitlines() if line.split()[:1] == ["2000000"]]
    assert row_lines and row_lines[0][-2:] == ["yes", "yes"]
    # The gate used both budgets, so the k-sequence compared is a real choice.
    assert set(np.concatenate([s.ks for s in served]).tolist()) == set(CFG.budgets)

    # The comparison catches a changed action or k and names where.
    s = served[0]
    acts = s.actions.copy()
    acts[17] = (acts[17] + 1) % 4
    rows, problems = via_services.committed.compare(
        episodes, [dataclasses.replace(s, actions=acts)]
    )
    assert not rows[0]["actions"] and rows[0]["ks"]
    assert problems == [
        f"seed 2000000: first differing action at frame 17: in-process {s.actions[17]}, "
        f"services {acts[17]}"
    ]
    ks = s.ks.copy()
    ks[3] = 3 - ks[3]
    _, problems = via_services.committed.compare(episodes, [dataclasses.replace(s, ks=ks)])
    assert problems == [
        f"seed 2000000: first differing k at decision 3 (frame {s.decision_frames[3]}): "
        f"in-process k={s.ks[3]}, services k={ks[3]}"
    ]
    _, problems = via_services.committed.compare(
        episodes, [dataclasses.replace(s, returns=s.returns + 1)]
    )
    assert problems == [
        f"seed 2000000: in-process return {episodes.returns[0]:g} over {s.frames} frames, "
        f"services {s.returns + 1:g} over {s.frames}"
    ]


def test_the_services_reproduce_a_gate_under_a_committed_plan(tmp_path, capsys):
    """A gate trained under committed "plan" (tree_k 1) through a planner service started with
    --committed plan --tree-k 1 and sessions that follow its plans: frame for frame equal to
    in-process play under the same rules (served == in-process)."""
    cfg = dataclasses.replace(CFG, budgets=(2, 3), simulations=(4, 6))
    save_planner(planner_path(tmp_path, GAME), cfg, Planner(cfg).init_params(jax.random.PRNGKey(0)))
    write_gate(tmp_path, GAME, seed=9, rules={"committed": "plan", "tree_k": 1})
    planner = str(planner_path(tmp_path, GAME))
    argv = ["eval", "--game", GAME, "--via-services", "--episodes", "1", "--planner", planner]
    assert main([*argv, "--committed", "plan", "--tree-k", "1"]) == 0
    out = capsys.readouterr().out
    assert "identical in process and through the services" in out and "MISMATCH" not in out
    # Under the checkpoint's own rules (the reflex) the plan gate is refused by its rules.
    assert main(argv) == 2
    assert "--committed plan --tree-k 1" in capsys.readouterr().err


def test_via_services_without_a_gate_is_a_clear_error(root, tmp_path, capsys):
    shutil.copytree(root, tmp_path / "nogate")
    gate_path(tmp_path / "nogate", GAME).unlink()
    planner = str(planner_path(tmp_path / "nogate", GAME))
    argv = ["eval", "--game", GAME, "--via-services", "--episodes", "2", "--planner", planner]
    assert main(argv) == 2
    err = capsys.readouterr().err
    missing = gate_path(tmp_path / "nogate", GAME)
    assert f"rtplan eval: error: no gate checkpoint for {GAME} at {missing}: train one" in err
    assert main([*argv, "--conditions", "k1"]) == 2
    assert "--via-services plays the gate only" in capsys.readouterr().err


CLOCK_GAME = "speed-hex-v0"
#: Budgets 2 and 4 simulations and 30 ticks a side: the random-init clock gate of seed 4 plays
#: policy-only and both budgets and runs its clock down (`test_clock_gate_service`).
CLOCK_CFG = dataclasses.replace(tiny_config(CLOCK_GAME), game_params=(("initial_time", 30),))


# ~25 s; the committed gate's run covers the path, test_clock_gate_service the clock gate
# over gRPC.
@pytest.mark.slow
def test_the_services_reproduce_the_in_process_clock_gate(tmp_path, capsys, monkeypatch):
    """A clock game through the real services: the gated planner agent against the reflex,
    ply by ply equal to `play_match` with the in-process clock gate (the game in which the
    gate is player 0), and the comparison names the first ply that differs."""
    from support import write_clock_gate

    save_planner(
        planner_path(tmp_path, CLOCK_GAME),
        CLOCK_CFG,
        Planner(CLOCK_CFG).init_params(jax.random.PRNGKey(0)),
    )
    write_clock_gate(tmp_path, CLOCK_GAME, seed=4)
    seen, real = [], via_services.clock.compare

    def compare(want, served):
        seen.append((want, served))
        return real(want, served)

    monkeypatch.setattr(via_services.clock, "compare", compare)
    planner = str(planner_path(tmp_path, CLOCK_GAME))
    argv = ["eval", "--game", CLOCK_GAME, "--via-services", "--episodes", "2"]
    assert main([*argv, "--planner", planner]) == 0
    out = capsys.readouterr().out
    assert "identical in process and through the services" in out and "MISMATCH" not in out
    want, served = seen[0]
    assert [g.seed for g in served] == [2_000_000, 2_000_001] == [g.seed for g in want]
    for a, b in zip(want, served):
        assert len(b.actions) == len(a.actions) > 10  # played to the game's end
        assert set(b.movers.tolist()) == {0, 1} and len(b.ks) == (b.movers == 0).sum()
        np.testing.assert_array_equal(a.clocks, b.clocks)
        assert b.clocks[-1, 1] == 30  # the reflex moves for free
    assert min(g.clocks[-1, 0] for g in served) == 0  # the gate spent a whole clock
    assert {0, *CLOCK_CFG.budgets} <= set(np.concatenate([g.ks for g in served]).tolist())

    # A changed move, budget or clock is named where it first differs.
    g = served[0]
    moved = dataclasses.replace(g, actions=np.where(np.arange(len(g.actions)) == 5, -7, g.actions))
    _, problems = via_services.clock.compare(want[:1], [moved])
    assert problems == [
        f"seed 2000000: first differing action at ply 5: in-process {g.actions[5]}, services -7"
    ]
    ks = g.ks.copy()
    ks[2] = 99
    _, problems = via_services.clock.compare(want[:1], [dataclasses.replace(g, ks=ks)])
    assert problems == [
        f"seed 2000000: first differing budget at the agent's move 2: in-process k={g.ks[2]}, "
        "services k=99"
    ]
    clocks = g.clocks.copy()
    clocks[3, 0] += 1
    _, problems = via_services.clock.compare(want[:1], [dataclasses.replace(g, clocks=clocks)])
    assert problems == [
        f"seed 2000000: clocks first differ after ply 3: in-process {g.clocks[3].tolist()}, "
        f"services {clocks[3].tolist()}"
    ]


def test_a_replay_read_over_the_wire_gives_each_frame_its_own_report():
    """Frame message n + 1 carries frame n's report (the viewer's `previous`); the reward is
    the agent's, from the running returns; the clocks are those after the frame."""
    frames = [
        {"previous": None, "episode_return": 0.0, "clocks": [9, 9]},
        {"previous": {"frame": 0, "action": 3, "k": 2}, "episode_return": 0.0, "clocks": [8, 9]},
        {"previous": {"frame": 1, "action": 1, "k": 2}, "episode_return": 1.5, "clocks": [8, 7]},
    ]
    rows = via_services.sessions.played_frames({"frames": frames})
    assert [r["frame"] for r in rows] == [0, 1] and [r["action"] for r in rows] == [3, 1]
    assert [r["reward"] for r in rows] == [0.0, 1.5]
    assert [r["clocks"] for r in rows] == [[8, 9], [8, 7]]
    info = {"id": "s", "episode_return": 1.5, "reason": "terminated"}
    served = via_services.committed.served(rows, info, seed=7)
    assert served.ks.tolist() == [2] and served.decision_frames.tolist() == [0]
    with pytest.raises(RuntimeError, match="replay rewards sum to 1.5, the session reports 2"):
        via_services.committed.served(rows, dict(info, episode_return=2.0), seed=7)
