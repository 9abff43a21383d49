"""The committed annotated clock games (`rtplan annotate-games`) in a real headless Chromium: the
results page links them, and the replay page shows each move's annotation (budget, the gate's
probabilities, both clocks, the note on a big spend) and the sides by name."""

# ruff: noqa: F811 (the browser fixtures of test_web.py, imported, are the tests' arguments)
from __future__ import annotations

import shutil
from types import SimpleNamespace
from urllib.parse import quote

import pytest

from support import ROOT, env_server, get_json, write_checkpoints

GAME = "speed-hex-v0"
GAMES = f"{GAME}/clock-eval/games"


@pytest.fixture(scope="module")
def server(chromium_path, tmp_path_factory):  # noqa: F811
    """The env server over a results folder that holds the committed Speed Hex games."""
    tmp = tmp_path_factory.mktemp("web-annotated")
    shutil.copytree(ROOT / "results" / GAMES, tmp / "results" / GAMES)
    root = write_checkpoints(tmp / "ckpt", (GAME,))
    with env_server(tmp, root, (GAME,)) as base:
        yield SimpleNamespace(base=base)


def test_the_replay_page_shows_a_big_spend_with_its_annotation(server, page):
    page.goto(f"{server.base}/results")
    page.wait_for_function("document.getElementById('groups').dataset.ready", timeout=30_000)
    # The games fold away with the other details, their folder inside its topic's section:
    # a click on the section, then one on the folder, shows them.
    for group in page.locator("details.group:has(ul.replays)").all():
        group.locator("> summary").click()
    link = page.locator("ul.replays a.watch").first
    assert link.is_visible()
    href = link.get_attribute("href")
    assert href.startswith("/watch?results_replay=" + quote(GAMES, safe="")), href
    assert " sims = " in link.inner_text()  # its title names the big spend

    rel = sorted((ROOT / "results" / GAMES).glob("*.jsonl"))[0].relative_to(ROOT / "results")
    index = get_json(server.base, "/v1/results/replay?path=" + quote(rel.as_posix(), safe=""))
    notes = index["move_notes"]
    n = next(i for i, m in enumerate(notes) if m and m["note"])
    big = notes[n]
    page.goto(f"{server.base}/watch?results_replay={quote(rel.as_posix(), safe='')}&frame={n}")
    page.wait_for_function(
        "document.getElementById('ann-note').textContent.includes('sims =')", timeout=30_000
    )
    assert page.locator("#ann-note").inner_text() == f"big spend: {big['note']}"
    rows = page.locator("#ann-rows").inner_text()
    assert f"gate played k={big['k']} ({big['cost']} ticks)" in rows, rows
    assert "policy-only" in rows and "k128" in rows  # the gate's probabilities, per option
    gate = index["annotation"]["sides"].index("gate")
    before, after = big["clocks_before"][gate], big["clocks_after"][gate]
    assert f"gate {before} → {after}" in rows, rows
    # The clocks panel names the sides; the big spends list marks the move on screen.
    assert "gate" in page.locator("#clock-rows").inner_text()
    current = page.locator("#ann-big li.current")
    assert current.inner_text() == f"frame {n}: {big['note']}"
    # A click on another big spend shows it.
    others = page.locator("#ann-big li:not(.current)")
    if others.count():
        other = others.first
        m = int(other.get_attribute("data-frame"))
        other.click()
        page.wait_for_function(f"window.rtplanViewer.replay.n === {m}", timeout=10_000)
        assert page.locator("#ann-note").inner_text() == f"big spend: {notes[m]['note']}"
