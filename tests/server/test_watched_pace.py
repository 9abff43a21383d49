"""The pace a clock game's session gets when its request names none (`server._config.WATCHED`),
and what the docs and the lobby say of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtplan.server._config import PLAYED, WATCHED

ROOT = Path(__file__).resolve().parents[2]
#: The time control as the lobby and the docs write it: minutes a side + seconds back.
CONTROL = f"{WATCHED.time_s / 60:g}+{WATCHED.increment_s:g}"


@pytest.fixture(scope="module")
def client(serve):
    return serve(("speed-go-v0",)).client


def _config(client, **body) -> dict:
    r = client.post("/v1/sessions", json={"game": "speed-go-v0", **body})
    assert r.status_code == 201, r.text
    created = r.json()
    auth = {"Authorization": f"Bearer {created['token']}"}
    r = client.delete(f"/v1/sessions/{created['id']}", headers=auth)
    assert r.status_code == 200, r.text  # stopped now, not left running to the module's end
    return created["session"]["config"]


def test_a_built_in_agents_clock_game_is_paced_to_be_watched(client):
    """`{"game": "speed-go-v0", "agent": "reflex"}` (or the planner) plays a ply a second on a
    1+1 clock; at the server's 9 FPS on the game's 300 ticks it was over in about 6 s."""
    assert (WATCHED.fps, WATCHED.time_s, WATCHED.increment_s) == (1.0, 60.0, 1.0)
    cfg = _config(client, agent="reflex")
    assert (cfg["fps"], cfg["time_s"], cfg["increment_s"]) == (1.0, 60.0, 1.0)


def test_a_persons_clock_game_is_a_clock_of_minutes(client):
    """`{"game": "speed-go-v0", "agent": "human"}` gets the lobby's 3+2 at 9 FPS; the game's
    300 ticks at 32 ticks a frame were about a second of a person's thinking."""
    assert (PLAYED.fps, PLAYED.time_s, PLAYED.increment_s) == (9.0, 180.0, 2.0)
    cfg = _config(client, agent="human", opponent="random")
    assert (cfg["fps"], cfg["time_s"], cfg["increment_s"]) == (9.0, 180.0, 2.0)
    lobby = (ROOT / "web" / "lobby.js").read_text()
    assert f'"{PLAYED.time_s / 60:g}+{PLAYED.increment_s:g}"' in lobby


@pytest.mark.parametrize(
    "body",
    [
        {"agent": "reflex", "fps": 9.0},  # a frame rate asked for: the game's clock in ticks
        {"agent": "reflex", "time_s": 0.0},  # the game's clock asked for
        {"agent": "reflex", "clock": "simulated"},  # no wall clock to pace
        {"agent": "grpc"},  # an external agent keeps the server's pace
    ],
)
def test_a_request_that_names_its_pace_or_is_no_show_keeps_it(client, body):
    cfg = _config(client, **body)
    assert cfg["fps"] == body.get("fps", 9.0)
    assert (cfg["time_s"], cfg["increment_s"]) == (0.0, 0.0)


def test_the_docs_and_the_lobby_say_the_pace():
    services = (ROOT / "docs" / "services.md").read_text()
    assert f"plays at 1 FPS on a {CONTROL} clock" in services
    lobby = (ROOT / "web" / "lobby.js").read_text()
    assert f'"{CONTROL}"' in lobby
