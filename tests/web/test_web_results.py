"""The results page as a report, in a real headless Chromium over a copy of the checkout's
results/: the headline gate figures and table first, a caption and a command for every figure,
rounded numbers, raw JSON folded, relative paths, no horizontal overflow at 1280 px and nothing
wider than the screen at 390 px."""

# ruff: noqa: F811 (the browser fixtures of test_web.py, imported, are the tests' arguments)
from __future__ import annotations

import json
import os
import re
import shutil
from types import SimpleNamespace

import pytest

from support import ROOT, env_server, get_json, write_checkpoints

#: Where the page's screenshots go when set.
SHOTS = os.environ.get("RTPLAN_SCREENSHOT_DIR")


@pytest.fixture(scope="module")
def server(chromium_path, tmp_path_factory):  # noqa: F811
    """The env server over a copy of the checkout's results/ (Snake compiled, no planner)."""
    tmp = tmp_path_factory.mktemp("web-results")
    shutil.copytree(ROOT / "results", tmp / "results")
    root = write_checkpoints(tmp / "ckpt", ("snake-rt-v0",))
    with env_server(tmp, root, ("snake-rt-v0",)) as base:
        yield SimpleNamespace(base=base, tmp=tmp)


def test_the_results_listing_captions_every_file_headline_first(server):
    body = get_json(server.base, "/v1/results")
    text = json.dumps(body)
    assert str(server.tmp) not in text  # no path of the server's disk
    groups = body["groups"]
    assert all(g["folder"].startswith("results") for g in groups)
    ranks = [g["rank"] for g in groups]
    assert ranks == sorted(ranks) and ranks[0] == 0
    first = [f["name"] for g in groups if g["rank"] == 0 for f in g["figures"]]
    assert "main.png" in first  # the gate against the fixed budgets leads
    for g in groups:
        for entry in g["figures"] + g["tables"]:
            assert entry["shows"] and entry["command"], entry
    evals = [t for g in groups if g["folder"].endswith("/eval") for t in g["tables"]]
    gate = next(t for t in evals if t["name"] == "gate.json")
    assert "--conditions gate" in gate["command"]  # the command the file records


def page_figures(page) -> dict:
    return page.evaluate(
        "() => ({width: document.documentElement.scrollWidth,"
        # Inside a .scroll box a wide table scrolls on its own (the box fits the window).
        " wide: [...document.querySelectorAll('body *')].filter(e => {"
        "   if (e.parentElement && e.parentElement.closest('.scroll')) return false;"
        "   const r = e.getBoundingClientRect();"
        "   return r.width > innerWidth + 1 || r.right > innerWidth + 1; })"
        "   .map(e => e.tagName + (e.className ? '.' + e.className : '')).slice(0, 8),"
        " text: document.body.innerText})"
    )


@pytest.mark.parametrize("width", [1280, 390])
def test_the_results_page_reads_as_a_report_and_fits(server, page, width):
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{server.base}/results")
    page.wait_for_selector("section.headline table", timeout=20_000)
    page.wait_for_function(
        "document.getElementById('groups').dataset.ready && document.images[0].complete",
        timeout=30_000,
    )
    # The headlines come first (the pre-registered ones lead), then the figures.
    heads = page.locator("main h2").all_inner_texts()
    assert heads[0].lower().startswith("pre-registered"), heads[:3]
    rows = page.locator("section.headline tr").all_inner_texts()
    assert any(r.startswith("tetris-rt-v0") for r in rows), rows
    first_figure = page.locator("figure").first
    assert first_figure.locator("img").get_attribute("src").endswith("main.png")
    cap = first_figure.locator("figcaption").inner_text()
    assert "gate" in cap and "made by rtplan report" in cap, cap
    if SHOTS:
        page.screenshot(path=f"{SHOTS}/results-top-{width}.png")
    # Raw JSON folds away; shown numbers are rounded; paths are relative.
    assert page.locator("details.table[data-file$='.json'][open]").count() == 0
    # Details and training logs are folded: the page is a few screens, not a scroll through
    # every file; a group opens on a click.
    assert page.locator("details.group[open]").count() == 0
    assert page.locator("details.group").count() > 0
    # Sub-folders (a player's cells of a clock evaluation, a forced budget's deployment) fold
    # under one section per game and topic, so the page lists each topic once (16,433 px at
    # 390 px wide with 103 folders, 47 sections; 18,728 px with 60 folders, each its own).
    assert page.evaluate("document.documentElement.scrollHeight") < 20 * 900
    nest = page.locator("section[data-nest='tetris-rt-v0 · deploy']")
    nest.locator("details.group > summary").first.click()
    k1 = nest.locator("details.group details.group", has_text="k1:")
    k1.locator("> summary").click()
    k1.locator("details.table[data-file='fps_96.json']").wait_for(timeout=10_000)
    page.locator("details.group:has(details.table[data-file='gate.json']) > summary").first.click()
    page.locator("details.table[data-file='gate.json'] summary").first.click()
    page.wait_for_selector("details.table[data-file='gate.json'] pre", timeout=10_000)
    got = page_figures(page)
    # Numbers read rounded: no run of 6+ significant digits (0.000236 is three).
    noise = r"\d\.0*[1-9]\d{5,}"
    assert not re.search(noise, got["text"]), re.search(r".{30}" + noise, got["text"])
    assert str(server.tmp) not in got["text"] and "results/tetris-rt-v0/eval" in got["text"]
    if SHOTS:
        page.screenshot(path=f"{SHOTS}/results-{width}.png")
    # Nothing sideways: the page is as wide as the window and no element is wider.
    assert got["width"] <= width and got["wide"] == [], got["wide"]


def test_the_results_page_leads_with_the_pre_registered_results(server, page):
    page.goto(f"{server.base}/results")
    page.wait_for_function("document.getElementById('groups').dataset.ready", timeout=30_000)
    heads = [h.lower() for h in page.locator("main h2").all_inner_texts()]
    # The committed games' holdout, then the clock games' gates, then the evaluation seeds.
    assert heads[0].startswith("pre-registered holdout"), heads[:4]
    assert heads[1].startswith("pre-registered: the clock games"), heads[:4]
    assert heads[2].startswith("evaluation seeds"), heads[:4]
    holdout = page.locator("section[data-headline='holdout'] tr").all_inner_texts()
    tetris = next(r for r in holdout if r.startswith("tetris-rt-v0"))
    assert "-0.35 ± 4.15" in tetris, tetris  # the number the README stands on, open
    clock = page.locator("section[data-headline='clock'] tr").all_inner_texts()
    games = {r.split("\t")[0]: r for r in clock[1:]}
    assert set(games) == {"speed-go-v0", "speed-hex-v0"}, clock
    assert "0.704 ± 0.00833" in games["speed-go-v0"], games
    assert "k32" in games["speed-go-v0"] and "3000" in games["speed-go-v0"]
