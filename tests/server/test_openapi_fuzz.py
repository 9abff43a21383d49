"""The env server held to its OpenAPI document: schemathesis (every check, the stateful phase
too) against a live server, and the parts of the document it relies on."""

from __future__ import annotations

import http.client
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from rtplan import games
from rtplan.server import Settings, create_app
from rtplan.server._routes_results import ResultsIndex
from support import env_server, get_json, post_session, write_checkpoints

GAME = "snake-rt-v0"
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")

#: What the fuzzer draws, half the time, for the replay routes' names and the results routes'
#: paths (else random ones, which are 404s): the replay and result files `live` makes.
CONFIG = """
[dictionaries]
replays = {{ values = ["{replay}"] }}
results = {{ values = ["{result}", "{figure}"] }}
[parameters]
"path.name" = {{ dictionary = "replays", probability = 0.5 }}
"query.path" = {{ dictionary = "results", probability = 0.5 }}
"path.path" = {{ dictionary = "results", probability = 0.5 }}
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A live env server (`python -m rtplan.server`) with every game compiled, one recorded
    replay, and a results folder that lists it and a figure; yields its URL and a folder with
    the fuzzer's config."""
    tmp = tmp_path_factory.mktemp("openapi")
    root = write_checkpoints(tmp / "ckpt", (GAME,))
    # Every game compiled up front: a fuzzed session of any of them answers within the timeout.
    every = games.registered_games()
    with env_server(tmp, root, (GAME,), "--preload", *every, "--max-sessions", "4") as base:
        post_session(base, game=GAME, agent="reflex", fps=50.0, max_frames=4, record=True)
        deadline = time.monotonic() + 60
        while not (listed := get_json(base, "/v1/replays")["replays"]):
            assert time.monotonic() < deadline, "no replay recorded"
            time.sleep(0.1)
        replay = listed[0]["name"]
        games_dir = tmp / "results" / GAME / "games"
        games_dir.mkdir(parents=True)
        shutil.copy(tmp / "replays" / replay, games_dir / "game.jsonl")
        (tmp / "results" / GAME / "main.png").write_bytes(b"\x89PNG\r\n\x1a\n")
        names = {"result": f"{GAME}/games/game.jsonl", "figure": f"{GAME}/main.png"}
        (tmp / "schemathesis.toml").write_text(CONFIG.format(replay=replay, **names))
        yield base, tmp


def schemathesis(base: str, tmp: Path, examples: int) -> subprocess.CompletedProcess:
    """`schemathesis run` on the server's document: seeded, `examples` per operation, every
    check and phase (examples, coverage, fuzzing, stateful)."""
    cmd = [str(SCHEMATHESIS), "--config-file", str(tmp / "schemathesis.toml"), "run"]
    cmd += [f"{base}/openapi.json", "--checks", "all"]
    cmd += ["--seed", "1", "--max-examples", str(examples), "--workers", "1"]
    cmd += ["--phases", "examples,coverage,fuzzing,stateful", "--request-timeout", "60"]
    cmd += ["--suppress-health-check", "all", "--no-color"]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, timeout=900)


def assert_no_failures(run: subprocess.CompletedProcess) -> None:
    summary = run.stdout[-3000:]
    assert run.returncode == 0, run.stdout[-12000:] + run.stderr[-2000:]
    assert "failures" not in summary.splitlines()[-1] and "passed" in summary, summary


def test_schemathesis_finds_nothing_against_a_live_server(live):
    base, tmp = live
    assert_no_failures(schemathesis(base, tmp, examples=20))


@pytest.mark.slow
def test_schemathesis_longer_run_finds_nothing(live):
    base, tmp = live
    assert_no_failures(schemathesis(base, tmp, examples=500))


def test_a_gif_of_a_step_past_the_end_or_a_slow_fps_is_one_long_frame(live):
    """Found by the fuzzer: a GIF frame's delay past 16 bits of 10 ms was a 500."""
    base, _ = live
    name = get_json(base, "/v1/replays")["replays"][0]["name"]
    for query in ("every=430080", "fps=0.0001", "fps=5e-324"):
        answer = httpx.get(f"{base}/v1/replays/{name}/gif?{query}", timeout=60)
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == "image/gif"


def test_a_kept_alive_connection_answers_without_a_delayed_ack(live):
    """The server's socket sets TCP_NODELAY on its connections: an answer's second write does
    not wait for the client's delayed ACK (~40 ms a request before)."""
    base, _ = live
    conn = http.client.HTTPConnection(*base.removeprefix("http://").split(":"), timeout=30)
    times = []
    for _ in range(15):
        start = time.perf_counter()
        conn.request("GET", "/healthz")
        assert conn.getresponse().read()
        times.append(time.perf_counter() - start)
    conn.close()
    assert statistics.median(times) < 0.02, times


def test_a_session_body_takes_an_integral_number_and_refuses_an_empty_game(serve):
    client = serve(()).client  # its own server: the fuzzer may have filled the live one's
    answer = client.post("/v1/sessions", json={"game": ""})
    assert answer.status_code == 422 and answer.json()["error"] == "invalid_request"
    assert "game must be" in answer.json()["detail"], answer.json()
    # JSON does not tell 7.0 from 7 (nor does the document's "integer"): both are the seed 7.
    created = client.post("/v1/sessions", json={"game": GAME, "seed": 7.0, "max_frames": 1.0})
    assert created.status_code == 201, created.text
    assert created.json()["session"]["config"]["seed"] == 7
    # A 401 names its scheme (RFC 9110).
    refused = client.delete(f"/v1/sessions/{created.json()['id']}")
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app(Settings()))


def test_every_error_is_the_one_error_model(client):
    doc = client.get("/openapi.json").json()
    assert "HTTPValidationError" not in str(doc)
    error = {"$ref": "#/components/schemas/ErrorBody"}
    assert doc["components"]["schemas"]["ErrorBody"]["required"] == ["error", "detail"]
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            for status, answer in op["responses"].items():
                if status.startswith("4"):
                    assert answer["content"] == {"application/json": {"schema": error}}, (
                        method,
                        path,
                        status,
                    )
    sessions = doc["paths"]["/v1/sessions"]["post"]["responses"]
    assert set(sessions) == {"201", "400", "401", "403", "409", "422", "429"}
    gif = doc["paths"]["/v1/replays/{name}/gif"]["get"]["responses"]
    assert list(gif["200"]["content"]) == ["image/gif"] and set(gif) == {"200", "404", "422"}
    assert list(doc["paths"]["/watch"]["get"]["responses"]["200"]["content"]) == ["text/html"]
    game = doc["components"]["schemas"]["CreateSession"]["properties"]["game"]
    assert game["minLength"] == 1 and GAME in game["enum"]
    # Exact, not pydantic's float 2**63: the slow fuzz sent 2**63 + 190 as a valid seed.
    seed = doc["components"]["schemas"]["CreateSession"]["properties"]["seed"]
    assert (seed["minimum"], seed["maximum"]) == (0, 2**63 - 1)
    assert isinstance(seed["maximum"], int)


def test_a_405_names_every_method_of_the_path(client):
    answer = client.request("OPTIONS", "/v1/sessions")
    assert answer.status_code == 405 and answer.headers["allow"] == "GET, POST"
    assert answer.json() == {"error": "http_error", "detail": "Method Not Allowed"}
    assert client.request("TRACE", "/v1/sessions/x").headers["allow"] == "DELETE, GET"


def test_the_results_index_is_built_once_and_again_on_change(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.csv").write_text("a,b\n")
    index = ResultsIndex(tmp_path)
    first = index.body()
    assert [g["title"] for g in json.loads(first)["groups"]] == ["a"]
    assert index.body() is first  # unchanged: not rebuilt
    (tmp_path / "a" / "y.png").write_bytes(b"png")
    assert [e["name"] for e in json.loads(index.body())["groups"][0]["figures"]] == ["y.png"]
    second = index.body()
    (tmp_path / "a" / "x.csv").write_text("a,b,c\n")  # rewritten: a new size
    assert index.body() is not second
