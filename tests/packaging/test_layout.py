"""The checkout's folders (harness.layout): checkpoints/ holds only what ships, and the one index
of results/ that the results page lists and serves from."""

from __future__ import annotations

import re
from pathlib import Path

from rtplan import games
from rtplan.harness.layout import is_listed, replays_root, result_index, user_data_dir
from rtplan.server.settings import Settings

ROOT = Path(__file__).resolve().parents[2]

#: The only files a shipped game folder may hold: params, provenance, curves.
SHIPPED = {
    "planner.msgpack",
    "planner.msgpack.json",
    "README.md",
    "learning_curve.png",
    "gate.msgpack",
    "gate.msgpack.json",
    "gate.md",
    "gate_learning_curve.png",
    # A clock game's midpeak baseline, tuned on tuning openings (`rtplan eval --tune-midpeak`).
    "midpeak.json",
}


def test_checkpoints_hold_only_what_ships():
    folders = sorted((ROOT / "checkpoints").iterdir())
    assert [p.name for p in folders] == sorted(games.registered_games()), folders
    for folder in folders:
        names = {p.name for p in folder.iterdir()}
        assert names <= SHIPPED, (folder, sorted(names - SHIPPED))
        assert {"planner.msgpack", "planner.msgpack.json", "README.md"} <= names, folder
        assert ("gate.msgpack" in names) == ("gate.md" in names), folder


def test_the_index_lists_each_folder_with_figures_or_tables(tmp_path):
    for rel in ("summary.json", "g/main.png", "g/calibration/c.csv", "g/calibration/c.png"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    (tmp_path / "g" / "notes").mkdir()
    (tmp_path / "g" / "notes" / "todo.txt").write_text("not a result")
    groups = result_index(tmp_path)
    assert [g.title for g in groups] == ["results", "g", "g · calibration"]
    assert groups[2].figures == ["g/calibration/c.png"] and groups[2].tables == [
        "g/calibration/c.csv"
    ]
    assert groups[0].tables == ["summary.json"] and groups[0].folder == tmp_path
    assert result_index(tmp_path / "missing") == []


def test_only_listed_files_inside_the_root_are_served(tmp_path):
    root = tmp_path / "results"
    (root / "g").mkdir(parents=True)
    (root / "g" / "t.csv").write_text("a,b")
    (root / "g" / "notes.txt").write_text("x")
    (tmp_path / "secret.csv").write_text("x")
    assert is_listed(root, "g/t.csv") == (root / "g" / "t.csv").resolve()
    assert is_listed(root, "g/notes.txt") is None  # not a figure or table
    assert is_listed(root, "../secret.csv") is None  # outside the root
    assert is_listed(root, "g/missing.csv") is None


def test_the_checkouts_results_are_indexed_by_game_and_topic():
    titles = {g.title for g in result_index(ROOT / "results")}
    for game in ("snake-rt-v0", "tetris-rt-v0", "speed-hex-v0"):
        assert f"{game} · calibration" in titles and f"{game} · training" in titles


def test_every_committed_results_file_has_a_caption_and_a_command():
    """The results page captions each file by its kind (`describe_result`); a new kind of
    results file needs its entry in `RESULT_KINDS` (nested cells by their topic folder)."""
    from pathlib import Path

    from rtplan.harness.layout import FIGURES, TABLES, describe_result

    root = Path(__file__).resolve().parents[2] / "results"
    files = [p for p in root.rglob("*") if p.suffix in FIGURES + TABLES]
    assert files
    missing = [
        str(p.relative_to(root)) for p in files if describe_result(str(p.relative_to(root))) is None
    ]
    assert not missing, missing[:5]
    nested = describe_result("tetris-rt-v0/counterfactual/k2-h32-w8-s0/summary.json")
    assert "counterfactual" in nested.shows  # the topic's kind, not the root summary.json's
    plan = describe_result("pacman-rt-v0/counterfactual/plan-tree1/k3-h32-w8-s0/summary.json")
    assert "plan-treeM/" in plan.shows  # a plan run nests under the same topic


def test_committed_results_name_no_machine_paths():
    """Results say where things are relative to a checkout (`checkpoints/...`, `results/...`),
    never a path on the machine that made them."""
    root = Path(__file__).resolve().parents[2] / "results"
    absolute = re.compile(r"(?<![\w.])/(work|tmp|home|root|Users)/")
    found = [
        str(p.relative_to(root))
        for p in sorted(root.rglob("*"))
        if p.suffix in (".json", ".csv", ".md", ".txt") and absolute.search(p.read_text())
    ]
    assert found == []


def test_the_per_user_data_directory_follows_xdg():
    home = {"HOME": "/home/ann"}
    assert user_data_dir(home) == Path("/home/ann/.local/share/rtplan")
    assert user_data_dir({**home, "XDG_DATA_HOME": "/data"}) == Path("/data/rtplan")
    for ignored in ("", "relative/data"):  # the spec: unset, empty or relative is the default
        assert user_data_dir({**home, "XDG_DATA_HOME": ignored}) == Path(
            "/home/ann/.local/share/rtplan"
        )


def test_a_checkout_records_into_its_own_replays_folder(monkeypatch, tmp_path):
    """From a checkout the default is its replays/ (an installed package's, the per-user data
    directory: tests/packaging/test_wheel.py); a flag or RTPLAN_SERVER_RECORD_DIR wins."""
    root = Path(__file__).resolve().parents[2]
    monkeypatch.delenv("RTPLAN_SERVER_RECORD_DIR", raising=False)
    assert replays_root() == root / "replays" == Settings().record_dir
    assert replays_root(tmp_path) == tmp_path
    monkeypatch.setenv("RTPLAN_SERVER_RECORD_DIR", str(tmp_path))
    assert Settings().record_dir == tmp_path
