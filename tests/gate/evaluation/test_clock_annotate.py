"""Annotated clock games (`rtplan annotate-games`): the spend that picks them, the re-play that
must equal its cell, the replay file the server reads, and the routes that serve them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from rtplan.gate.evaluation import clock as clock_eval
from rtplan.gate.evaluation.annotate import CellMismatch, biggest_spend, pick_games, replay_pick
from rtplan.harness.checkpoint import planner_path
from rtplan.planner import Planner
from rtplan.planner.store import load_planner
from rtplan.server import Settings, create_app
from rtplan.server.annotated import annotated_name, write_annotated
from rtplan.server.replay import ReplayFile, replay
from support import write_checkpoints, write_clock_gate

GAME = "speed-hex-v0"
ROOT = Path(__file__).resolve().parents[3]
WEB = ROOT / "web"
#: The committed annotated games (`rtplan annotate-games --game speed-hex-v0 --t0 1200`).
COMMITTED = ROOT / "results" / GAME / "clock-eval" / "games"


def test_biggest_spend_is_the_most_ticks_then_the_largest_share():
    costs = [0, 2, 4]
    # Clock 12: k4 (12 left, 33%), k2 (8 left), k4 (6 left, 67%), policy-only, k4 (2 left: fits
    # no k4, but the game charges what is left), then an empty clock that charges nothing.
    options = np.array([2, 1, 2, 0, 1, 2])
    share, move, cost = biggest_spend(options, costs, 12)
    assert (move, cost) == (2, 4) and share == pytest.approx(4 / 6)
    assert biggest_spend(np.array([0, 0, -1]), costs, 12) == (0.0, -1, 0)
    # On an empty clock a move spends nothing.
    assert biggest_spend(np.array([2, 2, 2, 2]), costs, 8)[1:] == (1, 4)


@pytest.fixture(scope="module")
def cell(tmp_path_factory):
    """A tiny planner and clock gate, and the gate's cell against always-k4 at T0 12: one
    opening played with both colours, by `rtplan eval`'s own path. (A re-play alone of a game
    its cell played in a batch of others is what the committed games are: 100 a batch.)"""
    tmp = tmp_path_factory.mktemp("annotate")
    root = write_checkpoints(tmp / "ck", game_ids=(GAME,))
    gate_file = write_clock_gate(root, GAME)
    planner_file = str(planner_path(root, GAME))
    out = tmp / "results"
    (path,) = clock_eval.run_clock_eval(
        GAME, games_per_cell=2, t0s=(12,), players=["gate"], opponents=["k4"],
        planner_file=planner_file, gate_file=str(gate_file), out=out, log=lambda s: None,
    )  # fmt: skip
    cfg, params, _ = load_planner(GAME, planner_file)
    return dict(
        out=out,
        path=path,
        gate_file=gate_file,
        planner_file=planner_file,
        planner=Planner(cfg),
        params=params,
    )


def test_a_second_gate_name_keeps_its_cells_beside_the_first(cell):
    """`rtplan eval --gate-name`: the same gate under another player name plays the same games
    into its own cell, with the gate's sha256; a name that is a baseline is refused."""
    (path,) = clock_eval.run_clock_eval(
        GAME, games_per_cell=2, t0s=(12,), players=["gate-b"], opponents=["k4"],
        planner_file=cell["planner_file"], gate_file=str(cell["gate_file"]), gate_name="gate-b",
        out=cell["out"], log=lambda s: None,
    )  # fmt: skip
    first, second = (json.loads(p.read_text()) for p in (cell["path"], path))
    assert path.parent.name == "gate-b" and second["player"] == "gate-b"
    assert second["gate_sha256"] == first["gate_sha256"] is not None
    for key in ("returns", "options", "game_ids", "clocks_end"):
        assert second[key] == first[key], key
    with pytest.raises(ValueError, match="gate name 'k4': a gate is named 'gate' or 'gate-<name>'"):
        clock_eval.run_clock_eval(
            GAME, games_per_cell=2, t0s=(12,), players=["k4"], opponents=["k4"],
            planner_file=cell["planner_file"], gate_name="k4", out=cell["out"],
        )  # fmt: skip


def test_a_picked_game_replays_as_its_cell_and_reads_as_a_replay(cell, tmp_path):
    """The pick is by spend; its re-play equals the cell's record; the file it is written to
    is a replay the server's reader re-simulates, to the cell's plies, with an annotation per
    move."""
    (pick,) = pick_games(cell["out"], GAME, count=1)
    rec = json.loads(cell["path"].read_text())
    spends = [biggest_spend([int(c) for c in o], [0, 2, 4], 12) for o in rec["options"]]
    best = max(range(2), key=lambda i: (spends[i][2], spends[i][0], -i))
    assert (pick.index, pick.cost) == (best, spends[best][2])

    g = replay_pick(
        cell["out"], pick, cell["planner"], cell["params"], cell["gate_file"],
        planner_file=cell["planner_file"],
    )  # fmt: skip
    i = pick.index
    assert g.score == rec["returns"][i]
    gate_moves = [m for m in g.moves if m.mover == g.gate_player]
    assert "".join(str(m.option) for m in gate_moves) == rec["options"][i]
    assert len(g.opening) + len(g.moves) == rec["plies"][i]
    assert all(m.probabilities is not None for m in gate_moves)
    assert all(abs(sum(m.probabilities) - 1) < 1e-5 for m in gate_moves)
    big = gate_moves[pick.move]
    assert big.cost == pick.cost and big.note.startswith(f"{pick.cost} sims = ")
    assert big.clocks_after[g.gate_player] == big.clocks_before[g.gate_player] - big.cost

    path = write_annotated(tmp_path / annotated_name(g), g, "rtplan annotate-games")
    rf = ReplayFile.read(path)
    result = replay(path)
    assert result.complete and result.frames == rec["plies"][i]
    # The replay's return is player 0's; the gate's score is 1 win, 0.5 draw, 0 loss.
    gate_return = result.episode_return if g.gate_player == 0 else -result.episode_return
    assert gate_return == 2 * rec["returns"][i] - 1
    notes = [f.annotation for f in rf.frames]
    assert notes[: len(g.opening)] == [None] * len(g.opening)
    first = notes[len(g.opening)]
    assert set(first) >= {"side", "k", "probabilities", "clocks_before", "clocks_after", "value"}
    assert rf.header["annotation"]["sides"][g.gate_player] == "gate"
    assert rf.header["annotation"]["cell"] == pick.cell
    assert str(tmp_path) not in path.read_text()


def test_a_game_that_differs_from_its_cell_is_refused(cell, tmp_path):
    out = tmp_path / "results"
    shutil.copytree(cell["out"], out)
    (pick,) = pick_games(out, GAME, count=1)
    path = out / pick.cell
    rec = json.loads(path.read_text())
    opts = rec["options"][pick.index]
    rec["options"][pick.index] = opts[:-1] + ("1" if opts[-1] != "1" else "2")
    path.write_text(json.dumps(rec))
    with pytest.raises(CellMismatch, match=r"re-played options .* the cell recorded"):
        replay_pick(out, pick, cell["planner"], cell["params"], cell["gate_file"])


def _client(results: Path) -> TestClient:
    settings = Settings(http_port=0, grpc_port=0, web_dir=WEB, results_dir=results)
    return TestClient(create_app(settings))


def test_the_server_serves_a_committed_annotated_game_and_nothing_else(tmp_path):
    names = sorted(p.name for p in COMMITTED.glob("*.jsonl"))
    assert len(names) >= 3, names
    results = tmp_path / "results"
    folder = results / GAME / "clock-eval" / "games"
    folder.mkdir(parents=True)
    shutil.copy(COMMITTED / names[0], folder / names[0])
    (tmp_path / "secret.jsonl").write_text("{}\n")
    rel = f"{GAME}/clock-eval/games/{names[0]}"
    with _client(results) as client:
        body = client.get("/v1/results/replay", params={"path": rel})
        assert body.status_code == 200, body.text
        index = body.json()
        assert index["annotation"]["sides"].count("gate") == 1
        notes = [n for n in index["move_notes"] if n and n["note"]]
        assert notes and all(" sims = " in n["note"] for n in notes)
        assert len(index["move_notes"]) == len(index["frames"])
        boards = client.get("/v1/results/replay/boards", params={"path": rel, "count": 2})
        assert boards.status_code == 200 and len(boards.json()["boards"]) == 2
        # The results listing links it to the replay page, with its title.
        groups = client.get("/v1/results").json()["groups"]
        (entry,) = [r for g in groups for r in g["replays"]]
        assert entry["watch"] == "/watch?results_replay=" + rel.replace("/", "%2F")
        assert entry["title"] == index["annotation"]["title"]
        for bad in (
            f"{GAME}/clock-eval/games/unknown.jsonl",  # no such file
            "../secret.jsonl",  # outside the results
            f"{GAME}/../../secret.jsonl",
            str(tmp_path / "secret.jsonl"),  # an absolute path
            f"{GAME}/clock-eval/games",  # a folder
        ):
            r = client.get("/v1/results/replay", params={"path": bad})
            assert r.status_code == 404, (bad, r.text)
            assert "no replay" in r.json()["detail"]
        assert (
            client.get("/v1/results/replay/boards", params={"path": "../x.jsonl"}).status_code
            == 404
        )


def test_the_command_says_what_it_cannot_annotate(capsys, tmp_path):
    from rtplan.cli import main

    assert main(["annotate-games", "--game", "snake-rt-v0"]) == 2
    assert "snake-rt-v0 is not a clock game" in capsys.readouterr().err
    args = ["annotate-games", "--game", GAME, "--results", str(tmp_path), "--t0", "999"]
    assert main(args) == 1
    assert "no cell of the gate in" in capsys.readouterr().err
