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
    # The annotated games are the replays; a deploy run's .jsonl logs are files (they were
    # listed as 20-odd "annotated games" per deploy folder that the replay page cannot play).
    replays = [g["folder"] for g in groups if g["replays"]]
    assert replays and all(f.endswith("/clock-eval/games") for f in replays), replays
    deploy = next(g for g in groups if g["folder"] == "results/tetris-rt-v0/deploy")
    logs = {t["name"]: t for t in deploy["tables"]}
    assert "per frame" in logs["fps_8.jsonl"]["shows"] and "watch" not in logs["fps_8.jsonl"]
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
    page.wait_for_function("document.getElementById('groups').dataset.ready", timeout=30_000)
    # The headlines come first (the pre-registered ones lead), then a section per game.
    heads = page.locator("main h2").all_inner_texts()
    assert heads[0].lower().startswith("pre-registered"), heads[:3]
    rows = page.locator("section.headline tr").all_inner_texts()
    assert any(r.startswith("tetris-rt-v0") for r in rows), rows
    games = page.locator("section.game").evaluate_all("s => s.map(e => e.dataset.game)")
    assert games[:1] == ["results"] and {"tetris-rt-v0", "speed-hex-v0"} <= set(games), games
    # Every folder is folded: the page is the headline tables and a line per game.
    assert page.locator("details.group[open]").count() == 0
    assert page.locator("details.table[data-file$='.json'][open]").count() == 0
    tetris = page.locator("section[data-game='tetris-rt-v0'] > details")
    tetris.locator("> summary").click()
    first_figure = tetris.locator("figure").first
    assert first_figure.locator("img").get_attribute("src").endswith("main.png")
    cap = first_figure.locator("figcaption").inner_text()
    assert "gate" in cap and "made by rtplan report" in cap, cap
    if SHOTS:
        page.screenshot(path=f"{SHOTS}/results-top-{width}.png")
    # A deploy folder holds its forced budgets' folders, each folded inside it.
    deploy = page.locator("details[data-folder='tetris-rt-v0/deploy']")
    deploy.locator("> summary").click()
    k1 = page.locator("details[data-folder='tetris-rt-v0/deploy/k1']")
    k1.locator("> summary").click()
    k1.locator("details.table[data-file='fps_96.json']").wait_for(timeout=10_000)
    evals = page.locator("details[data-folder='tetris-rt-v0/eval']")
    evals.locator("> summary").click()
    evals.locator("details.table[data-file='gate.json'] summary").click()
    evals.locator("details.table[data-file='gate.json'] pre").wait_for(timeout=10_000)
    got = page_figures(page)
    # Numbers read rounded: no run of 6+ significant digits (0.000236 is three).
    noise = r"\d\.0*[1-9]\d{5,}"
    assert not re.search(noise, got["text"]), re.search(r".{30}" + noise, got["text"])
    assert str(server.tmp) not in got["text"] and "results/tetris-rt-v0/eval" in got["text"]
    if SHOTS:
        page.screenshot(path=f"{SHOTS}/results-{width}.png")
    # Nothing sideways: the page is as wide as the window and no element is wider.
    assert got["width"] <= width and got["wide"] == [], got["wide"]


#: The screens a first load of the results page may take: the pre-registered and evaluation
#: tables (about one screen at 1280 px, two on a phone, where their cells wrap) and a line per
#: game; a folder's figures and files open on a click. The page was 16,933 px at 1280 x 800
#: (21 screens) and 20,141 px at 390 x 844 (24 screens) with every folder laid out open.
FIRST_LOAD_SCREENS = 3
#: The share of its natural width a figure is drawn at, at least, where the window allows:
#: rtplan's figures draw their axis text at matplotlib's 10 pt at 100-110 dpi (14-15 px), so at
#: 0.6 it is 9 px or more. The deploy figures (1320 px wide, three panels) were drawn in a
#: 601 px grid cell at 1280 px (0.46: 7 px text).
MIN_SCALE = 0.6

DEPLOY_FIGURES = """() => [...document.images].filter(i => i.src.endsWith('/deploy.png'))
  .map(i => ({src: i.src.split('/files/')[1], width: i.getBoundingClientRect().width,
              natural: i.naturalWidth}))"""


def load_every_image(page) -> None:
    """Loads every image of the page, lazy or not, so that the heights measured are those
    a reader meets once the figures in view have loaded."""
    page.evaluate("document.querySelectorAll('img').forEach(i => { i.loading = 'eager'; })")
    page.wait_for_function(
        "[...document.images].every(i => i.complete && i.naturalWidth > 0)", timeout=60_000
    )


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (390, 844)])
def test_the_results_page_is_a_few_screens_and_its_figures_readable(server, page, width, height):
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{server.base}/results")
    page.wait_for_function("document.getElementById('groups').dataset.ready", timeout=30_000)
    load_every_image(page)
    tall = page.evaluate("document.documentElement.scrollHeight")
    assert tall <= FIRST_LOAD_SCREENS * height, f"{tall} px: {tall / height:.1f} screens"
    # Every folder opened: each deploy figure is drawn at a readable share of its natural
    # width, or (narrower windows) a click on it shows it at its natural size.
    page.evaluate("document.querySelectorAll('details.group').forEach(d => { d.open = true; })")
    load_every_image(page)
    figures = page.evaluate(DEPLOY_FIGURES)
    assert len(figures) >= 30, figures  # three games' ladders and their forced budgets
    small = [f for f in figures if f["width"] < MIN_SCALE * f["natural"]]
    if width >= 1280:
        assert small == [], small
    # Every small one opens full size by the same click; three (one per game) are clicked.
    links = page.evaluate(
        "() => [...document.images].filter(i => i.src.endsWith('/deploy.png'))"
        ".every(i => i.closest('figure > a[title=\"open at full size\"]'))"
    )
    assert links
    per_game = {f["src"].split("/")[0]: f for f in small or figures[:1]}
    for f in per_game.values():
        img = page.locator(f"img[src$='{f['src']}']")
        img.scroll_into_view_if_needed()
        img.click()
        full = page.locator("dialog.figure-full[open] img")
        full.wait_for(timeout=5_000)
        page.wait_for_function(
            "document.querySelector('dialog.figure-full[open] img').complete", timeout=10_000
        )
        shown = full.evaluate("i => [i.getBoundingClientRect().width, i.naturalWidth, i.src]")
        assert shown[0] == shown[1] == f["natural"] and shown[2].endswith(f["src"]), (f, shown)
        page.keyboard.press("Escape")
        page.locator("dialog.figure-full[open]").wait_for(state="detached", timeout=5_000)
    assert page.url.endswith("/results") or "#" in page.url  # the page never left


def test_a_folder_s_address_opens_it(server, page):
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{server.base}/results#tetris-rt-v0/deploy/k1")
    page.wait_for_function("document.getElementById('groups').dataset.ready", timeout=30_000)
    k1 = page.locator("details[data-folder='tetris-rt-v0/deploy/k1']")
    # The folder, the topic and the game around it are open, and it is in view.
    assert k1.evaluate("d => d.open && d.parentElement.closest('details').open")
    assert page.locator("section[data-game='tetris-rt-v0'] > details").evaluate("d => d.open")
    assert page.locator("details.group[open]").count() == 3
    top = k1.evaluate("d => d.getBoundingClientRect().top")
    assert -1 <= top < 800, top  # scrolled to (to the subpixel)
    assert page.url.endswith("#tetris-rt-v0/deploy/k1")
    # Opening another folder makes the address its link; an address of a folder inside
    # a listed one (no figures of its own) opens the nearest listed one.
    page.locator("details[data-folder='tetris-rt-v0/calibration'] > summary").click()
    page.wait_for_function("location.hash === '#tetris-rt-v0/calibration'", timeout=5_000)
    page.goto(f"{server.base}/results#snake-rt-v0/deploy/no-such-folder")
    page.wait_for_function("document.getElementById('groups').dataset.ready", timeout=30_000)
    assert page.locator("details[data-folder='snake-rt-v0/deploy']").evaluate("d => d.open")


def test_the_results_page_leads_with_the_pre_registered_results(server, page):
    page.goto(f"{server.base}/results")
    page.wait_for_function("document.getElementById('groups').dataset.ready", timeout=30_000)
    heads = [h.lower() for h in page.locator("main h2").all_inner_texts()]
    # The committed games' holdout, the clock games' gates on the eval split and Speed Hex's
    # replication on the holdout split, then the evaluation seeds.
    assert heads[0].startswith("pre-registered holdout"), heads[:4]
    assert heads[1].startswith("pre-registered, eval split: the clock games"), heads[:4]
    assert heads[2].startswith("pre-registered replication, holdout split"), heads[:4]
    assert heads[3].startswith("evaluation seeds"), heads[:4]
    holdout = page.locator("section[data-headline='holdout'] tr").all_inner_texts()
    tetris = next(r for r in holdout if r.startswith("tetris-rt-v0"))
    assert "-0.35 ± 4.15" in tetris, tetris  # the number the README stands on, open
    clock = page.locator("section[data-headline='clock'] tr").all_inner_texts()
    games = {r.split("\t")[0]: r for r in clock[1:]}
    assert set(games) == {"speed-go-v0", "speed-hex-v0"}, clock
    assert "0.704 ± 0.00833" in games["speed-go-v0"], games
    assert "k32" in games["speed-go-v0"] and "3000" in games["speed-go-v0"]
    # The replication: every gate played on Speed Hex's holdout openings against the bars
    # fixed on the eval split (docs/results.md: gate-heur 0.698, the shipped gate 0.651).
    rows = page.locator("section[data-headline='clock-holdout'] tr").all_inner_texts()
    gates = {r.split("\t")[1]: r for r in rows[1:]}
    assert {"gate", "gate-heur"} <= set(gates), rows
    assert all(r.startswith("speed-hex-v0") for r in rows[1:]), rows
    assert "0.698 ± 0.00838" in gates["gate-heur"] and "k32: 0.0463" in gates["gate-heur"]
    assert "0.651 ± 0.0087" in gates["gate"] and "proportional: -0.0607" in gates["gate"]


def test_the_clock_tables_name_their_split_and_file_as_registered(server, page):
    """Each clock table's caption names the file it reads and its split, as
    docs/preregistration.md registered them: the eval split for the clock games' evaluation,
    the holdout split for Speed Hex's replication."""
    registered = (ROOT / "docs" / "preregistration.md").read_text(encoding="utf-8")
    clock = registered.split("## Clock games", 1)[1].split("\n## ", 1)[0]
    assert "the eval split's first 50 seeds" in clock
    replication = registered.split("## Amendment, 2026-11-26: Speed Hex", 1)[1]
    assert "the `holdout` split's first 50 seeds" in replication.split("\n## ", 1)[0]
    page.goto(f"{server.base}/results")
    page.wait_for_function("document.getElementById('groups').dataset.ready", timeout=30_000)
    eval_cap = page.locator("section[data-headline='clock'] p").inner_text()
    assert "clock-eval/eval-scores.json" in eval_cap, eval_cap
    assert "the eval split's first 50 openings" in eval_cap and "3,000 games" in eval_cap
    assert "holdout" not in eval_cap.lower(), eval_cap
    hold_cap = page.locator("section[data-headline='clock-holdout'] p").inner_text()
    assert "clock-eval/holdout-scores.json" in hold_cap, hold_cap
    assert "the holdout split's first 50 openings" in hold_cap and "2026-11-26" in hold_cap
    # The files' own captions say their split too (harness.layout.RESULT_KINDS).
    listed = {
        t["name"]: t["shows"]
        for g in get_json(server.base, "/v1/results")["groups"]
        if g["folder"] == "results/speed-hex-v0/clock-eval"
        for t in g["tables"]
    }
    assert "eval split" in listed["eval-scores.csv"], listed["eval-scores.csv"]
    assert "pre-registered" in listed["eval-scores.csv"]
    assert "eval split" in listed["eval-scores.json"]
    assert "holdout split" in listed["holdout-scores.json"]
    assert "tuning openings" in listed["tuning-scores.csv"], listed["tuning-scores.csv"]
    assert "not pre-registered" in listed["tuning-scores.csv"]
    assert "midpeak" in listed["midpeak-sweep.csv"], listed["midpeak-sweep.csv"]
