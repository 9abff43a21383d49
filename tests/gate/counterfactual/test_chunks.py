"""The chunked, resumable loop of both kinds of counterfactual values
(`gate.counterfactual._chunks.run_chunks`): a file per chunk, a rerun keeps the chunks of the
same planner, replays another planner's, and refuses chunks measured under other rules."""

from __future__ import annotations

import json

import pytest

from rtplan.gate.counterfactual._chunks import run_chunks

RULES = {"committed": "reflex", "tree_k": 0}


def _run(folder, labelled: list, *, head=None, fixed=RULES, states=5):
    def label(first, seeds):
        labelled.append(first)
        return {"seeds": seeds[::2].tolist(), "values": (seeds * 10).tolist()}

    def summarize(parts):
        return {"games": sum(p["games"] for p in parts), "firsts": [p["seeds"] for p in parts]}

    head = head or {"game": "g", "planner": "p", "planner_sha256": "a"}
    return run_chunks(
        folder, head=head, seed=3, states=states, chunk=2, label=label, summarize=summarize,
        fixed=fixed, command="cmd", log=lambda line: None,
    )  # fmt: skip


def test_chunks_are_files_a_rerun_keeps(tmp_path):
    labelled = []
    summary = _run(tmp_path / "run", labelled)
    assert labelled == [3, 5, 7]  # games 3-4, 5-6, 7
    assert summary == {"games": 5, "firsts": [[3], [5], [7]]}
    assert json.loads((tmp_path / "run" / "summary.json").read_text()) == summary
    part = json.loads((tmp_path / "run" / "chunk-0000005.json").read_text())
    assert list(part) == [
        "game", "planner", "planner_sha256", "games", "seeds", "values", "seconds", "command",
    ]  # fmt: skip
    assert part["games"] == 2 and part["values"] == [50, 60] and part["command"] == "cmd"
    labelled.clear()
    assert _run(tmp_path / "run", labelled) == summary
    assert labelled == []  # resumed: nothing played again


def test_a_chunk_of_another_planner_is_played_again(tmp_path):
    _run(tmp_path / "run", [])
    path = tmp_path / "run" / "chunk-0000005.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "planner_sha256": "b"}))
    labelled = []
    _run(tmp_path / "run", labelled)
    assert labelled == [5]
    assert json.loads(path.read_text())["planner_sha256"] == "a"


def test_a_chunk_of_other_rules_is_refused(tmp_path):
    """A file without the rules' fields was measured under their defaults (the reflex, tree_k
    0): a run under other rules refuses it, and a run under the defaults refuses one with them."""
    plan = {"game": "g", "planner": "p", "planner_sha256": "a", "committed": "plan", "tree_k": 1}
    _run(tmp_path / "reflex", [])
    with pytest.raises(ValueError, match="measured with committed='reflex'"):
        _run(tmp_path / "reflex", [], head=plan)
    _run(tmp_path / "plan", [], head=plan)
    with pytest.raises(ValueError, match="measured with committed='plan'"):
        _run(tmp_path / "plan", [])
    deeper = {**plan, "tree_k": 2}
    with pytest.raises(ValueError, match="measured with tree_k=1"):
        _run(tmp_path / "plan", [], head=deeper)


def test_seeds_stay_in_the_train_range(tmp_path):
    from rtplan.planner.episodes import seeds_of

    first = int(seeds_of("tuning", 1)[0])

    def label(first, seeds):  # pragma: no cover: refused before it plays
        raise AssertionError("played a tuning seed")

    with pytest.raises(ValueError, match="positions must come from train-range seeds"):
        run_chunks(
            tmp_path, head={"planner_sha256": "a"}, seed=first - 1, states=2, chunk=2,
            label=label, summarize=dict, noun="positions",
        )  # fmt: skip
    assert not list(tmp_path.iterdir())
