"""A toy game defined here, registered through its one registry record, played by the planner,
in a live env-server session with the planner service, and on the watch page (generic grid);
no other file knows its id."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import fields

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rtplan import games
from rtplan.games import Game, GameRecord, PlannerDefaults, State

TOY_ID = "toy-walk-v0"
ROWS, COLS = 3, 4
GOAL = (2, 3)
MOVES = np.array([[-1, 0], [0, 1], [1, 0], [0, -1]], np.int32)


class ToyWalk(Game):
    """A token walks on a 3x4 grid; each frame it stands on the goal cell pays +1.

    Observation: `[3, 4, 2]` float32 planes (the token, the goal). Actions: up, right, down,
    left (into a wall: stay). Reward: 1.0 on the goal, else 0. Termination: none; truncated at
    the horizon. Fallback: right. No chance events.
    """

    id = TOY_ID
    num_actions = 4
    action_names = ("up", "right", "down", "left")
    observation_shape = (ROWS, COLS, 2)
    fallback_description = "right"

    def __init__(self, *, horizon: int = 400):
        self.horizon = horizon

    def init(self, key: jax.Array) -> State:
        del key
        return State(
            inner=jnp.zeros(2, jnp.int32),
            legal_action_mask=jnp.ones(4, bool),
            reward=jnp.zeros((), jnp.float32),
            terminated=jnp.zeros((), bool),
            truncated=jnp.zeros((), bool),
            frame=jnp.zeros((), jnp.int32),
            current_player=jnp.zeros((), jnp.int32),
        )

    def _step(self, state: State, action: jax.Array) -> State:
        pos = jnp.clip(state.inner + jnp.asarray(MOVES)[action], 0, jnp.array([ROWS - 1, COLS - 1]))
        on_goal = (pos == jnp.array(GOAL)).all()
        return state.replace(inner=pos, reward=on_goal.astype(jnp.float32), frame=state.frame + 1)

    def observe(self, state: State) -> jax.Array:
        token = jnp.zeros((ROWS, COLS)).at[state.inner[0], state.inner[1]].set(1.0)
        goal = jnp.zeros((ROWS, COLS)).at[GOAL].set(1.0)
        return jnp.stack([token, goal], -1)

    def fallback_action(self, state: State) -> jax.Array:
        del state
        return jnp.int32(1)

    def rekey(self, state: State, key: jax.Array) -> State:
        del key
        return state


def render_toy(game: Game, state: State) -> dict:
    cells = np.full((ROWS, COLS), ".", "<U1")
    cells[GOAL] = "G"
    cells[tuple(int(x) for x in state.inner)] = "A"
    return {"board": ["".join(r) for r in cells], "score": int(state.frame)}


def toy_features(state: State) -> dict[str, jax.Array]:
    return {"goal_distance": jnp.abs(state.inner - jnp.array(GOAL)).sum().astype(jnp.float32)}


RECORD = GameRecord(
    game=ToyWalk,
    render=render_toy,
    keys=games.ARROW_KEYS,
    planner=PlannerDefaults(
        budgets=(1, 2),
        simulations=(2, 4),
        gamma=0.9,
        network={
            "channels": 8,
            "blocks": 1,
            "features": 8,
            "value_hidden": 8,
            "value_bins": 11,
            "value_max": 5.0,
            "time_input": True,
        },
    ),
    features=toy_features,
    feature_names=("goal_distance",),
)


@pytest.fixture(scope="module")
def toy() -> Iterator[str]:
    games.register(TOY_ID, RECORD)
    try:
        yield TOY_ID
    finally:
        games.unregister(TOY_ID)


def test_the_record_reaches_every_layer(toy):
    from rtplan.games.render import describe_view, render
    from rtplan.gate.committed.config import GateTrainConfig
    from rtplan.gate.committed.triggers import FEATURES, trigger_features

    game = games.make(toy)
    state = game.init(jax.random.PRNGKey(0))
    assert render(game, game.step(state, 1, 7))["board"] == [".A..", "....", "...G"]
    assert FEATURES[toy] == ("goal_distance",)
    feats = trigger_features(toy)(jax.tree.map(lambda x: x[None], state))
    assert float(feats["goal_distance"][0]) == 5.0
    assert GateTrainConfig(game_id=toy).entropy_coef == 0.01
    view = describe_view(game)
    assert view["module"] is None and view["input"] == "keys"  # the generic grid renderer
    assert view["keys"]["ArrowRight"] == 1 and view["board"] is None


def test_it_is_committed_without_saying_so(toy):
    # Neither the class nor the record names a kind: a `Game` is committed unless it says.
    assert "kind" not in vars(ToyWalk) and "kind" not in {f.name for f in fields(GameRecord)}
    assert games.kind_of(toy) is games.Kind.COMMITTED
    assert games.game_record(toy).kind is games.Kind.COMMITTED
    assert games.kind_of(games.make(toy)) is games.Kind.COMMITTED


def test_the_planner_plays_it(toy):
    from rtplan.planner import Planner
    from rtplan.planner.configs import default_config

    cfg = default_config(toy)
    planner = Planner(cfg)
    params = planner.init_params(jax.random.PRNGKey(0))
    option = jax.jit(planner.option, static_argnums=3)
    states = jax.vmap(planner.game.init)(jax.random.split(jax.random.PRNGKey(1), 2))
    for k in cfg.budgets:
        out = option(params, jax.random.split(jax.random.PRNGKey(k), 2), states, k)
        assert out.actions.shape == (2, k) and bool(((out.actions >= 0) & (out.actions < 4)).all())
        assert out.next_state.frame.tolist() == [k, k]


@pytest.fixture(scope="module")
def toy_server(toy, tmp_path_factory):
    """The env server (uvicorn on a thread of this process, where the toy is registered) with a
    tiny toy planner checkpoint and the real planner service; yields its base URL."""
    from rtplan.harness.checkpoint import planner_path
    from rtplan.planner import Planner
    from rtplan.planner.configs import default_config
    from rtplan.planner.store import save_planner
    from rtplan.server.app import create_app
    from rtplan.server.settings import Settings
    from support import start_planner, uvicorn_app

    tmp = tmp_path_factory.mktemp("toy")
    cfg = default_config(toy)
    save_planner(
        planner_path(tmp / "ckpt", toy), cfg, Planner(cfg).init_params(jax.random.PRNGKey(0))
    )
    planner = start_planner(tmp / "ckpt", (toy,))
    settings = Settings(
        http_port=0,
        grpc_port=0,
        checkpoint_dir=tmp / "ckpt",
        record_dir=tmp / "replays",
        results_dir=tmp / "results",
        planner_address=planner.address,
        late_tick_ms=1500,
    )
    try:
        with uvicorn_app(create_app(settings)) as base:
            yield base
    finally:
        planner.stop()


def test_a_live_session_plays_it_with_the_planner(toy_server):
    from support import get_json, post_session

    sid = post_session(
        toy_server, game=TOY_ID, agent="planner", k=2, clock="simulated", max_frames=8
    )["id"]
    deadline = time.monotonic() + 120
    while (info := get_json(toy_server, f"/v1/sessions/{sid}"))["status"] not in ("finished",):
        assert time.monotonic() < deadline, info
        time.sleep(0.2)
    assert info["frame"] == 8 and info["stats"]["planned"] >= 1, info


def test_the_watch_page_draws_it_with_the_generic_grid(toy_server, tmp_path):
    from bench._page import FLAGS
    from support import CHROMIUM, PROBE, TOLERANCE, hex_rgb, post_session

    if os.environ.get("RTPLAN_SKIP_BROWSER") == "1":
        pytest.skip("RTPLAN_SKIP_BROWSER=1")
    playwright = pytest.importorskip("playwright.sync_api")
    sid = post_session(toy_server, game=TOY_ID, agent="planner", k=1, fps=4.0, max_frames=400)["id"]
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 960, "height": 720})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{toy_server}/watch?session={sid}")
        page.wait_for_function(
            "(() => { const v = window.rtplanViewer;"
            " return v.state && v.state.frame >= 2 && v.palette && v.palette.cells.A; })()",
            timeout=60_000,
        )
        page.evaluate("window.rtplanViewer.paused = true")
        state = page.evaluate("window.rtplanViewer.state")
        cells = page.evaluate("window.rtplanViewer.palette.cells")
        # A colour per character drawn; the goal is hidden while the token stands on it (the
        # planner walks there and stays, so a page that joins late may never see it).
        shown = {ch for row in state["board"] for ch in row} - {"."}
        assert state["game"] == TOY_ID and shown <= set(cells) <= {"A", "G"}, (state, cells)
        assert len(set(cells.values())) == len(cells)
        (r, c) = next(
            (r, c) for r, row in enumerate(state["board"]) for c, ch in enumerate(row) if ch == "A"
        )
        share = page.evaluate(PROBE, [[r, c, hex_rgb(cells["A"]), TOLERANCE]])[0]
        assert share >= 0.2, (state, cells)
        assert page.inner_text("#caption") == f"score {state['score']}"
        browser.close()
    assert errors == []
