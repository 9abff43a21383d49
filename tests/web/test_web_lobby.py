"""The lobby tells the planner's readiness as it changes, per choice, in a real headless Chromium:
a real planner service whose compile is held after Snake's gate, then released; the page follows
without a reload and starts the gated planner (what the demo plays) from its own choice."""

# ruff: noqa: F811 (the browser fixtures of conftest.py are the tests' arguments)
from __future__ import annotations

from types import SimpleNamespace

import pytest

from rtplan.planner_service import BackgroundService, Engine
from support import HeldCompile, env_server, get_json, write_checkpoints, write_gate, write_planner

SNAKE = "snake-rt-v0"
GAME = f'select[name="game"] option[value="{SNAKE}"]'
AGENT = 'select[name="agent"] option[value="{}"]'


@pytest.fixture(scope="module")
def server(chromium_path, tmp_path_factory):
    """The env server with a Snake checkpoint, over a real planner service of Snake (one budget
    and a gate) that answers before it compiles (`HeldCompile`: the test says when)."""
    tmp = tmp_path_factory.mktemp("web-lobby")
    root = write_checkpoints(tmp / "ckpt", (SNAKE,))
    folder = write_planner(tmp / "planner", SNAKE, budgets=(2,), simulations=(2,))
    write_gate(folder, SNAKE)
    engine = Engine.from_dir(folder, compiler_options={"xla_backend_optimization_level": 0})
    service = BackgroundService(engine).start(compile=False)
    try:
        with env_server(tmp, root, (SNAKE,), "--planner-address", service.address) as base:
            yield SimpleNamespace(base=base, compiling=HeldCompile(engine))
    finally:
        service.stop()


def _shown(page, label: str, timeout_ms: int = 20_000) -> None:
    """Waits until the game list labels Snake `label` (its text after the id)."""
    page.wait_for_function(
        f"(document.querySelector('{GAME}') || {{}}).textContent === {SNAKE + label!r}",
        timeout=timeout_ms,
    )


def test_the_lobby_follows_the_planner_as_each_choice_becomes_ready(server, page):
    page.goto(f"{server.base}/")
    _shown(page, " (planner compiling)")
    page.select_option('select[name="game"]', SNAKE)
    page.evaluate("window.notReloaded = true")
    gate, forced = page.locator(AGENT.format("gate")), page.locator(AGENT.format("planner"))
    assert gate.is_disabled() and forced.is_disabled()
    assert "still compiling" in gate.get_attribute("title")

    server.compiling.start()
    assert server.compiling.gate_ready.wait(300)  # held there: the budgets compile later
    _shown(page, " (gated planner ready, budgets compiling)")
    assert gate.is_enabled() and forced.is_disabled()
    assert "still compiling" in forced.get_attribute("title")

    server.compiling.release()
    assert server.compiling.ready.wait(300)
    _shown(page, "")
    assert gate.is_enabled() and forced.is_enabled()
    assert page.evaluate("window.notReloaded === true")  # one page all along

    # The planner with its gate starts the session the demo starts: the planner, no k.
    page.select_option('select[name="agent"]', "gate")
    assert not page.locator('select[name="k"]').is_visible()
    page.fill('input[name="max_frames"]', "5")
    page.click('form#start button[type="submit"]')
    page.wait_for_url("**/watch?session=*", timeout=30_000)
    config = get_json(server.base, f"/v1/sessions/{page.url.split('session=')[1]}")["config"]
    assert (config["agent"], config["ks"]) == ("planner", [])
