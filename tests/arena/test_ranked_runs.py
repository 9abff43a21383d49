"""Ranked runs end to end: a real env server process, the arena over HTTP, and agents that play
through the Env API, one of them written from the .proto files alone (docs/examples)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import rtplan
from rtplan.arena import ranked
from rtplan.arena.app import create_app
from rtplan.arena.repository import Repository
from rtplan.arena.settings import ArenaSettings
from support import ROOT, AgentStream, env_server, get_json, uvicorn_app, write_checkpoints

GAME = "snake-rt-v0"
SMOKE = ranked.SEED_SETS["smoke"]
EXAMPLE = ROOT / "docs" / "examples" / "ranked_agent.py"


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("env")
    root = write_checkpoints(tmp / "ckpt", (GAME,))
    with env_server(tmp, root, (GAME,)) as base:
        yield base


@pytest.fixture(scope="module")
def arena(env, tmp_path_factory):
    folder = tmp_path_factory.mktemp("arena")
    db = str(folder / "arena.db")
    repository = Repository.open(db)
    settings = ArenaSettings(database=db, port=0, env=env, seed_set="smoke", join_within_s=2.0)
    with uvicorn_app(create_app(settings, repository=repository)) as base:
        yield base
    repository.close()


def call(base: str, method: str, path: str, token: str | None = None, body=None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def register(arena: str, name: str, version: str = "1") -> str:
    status, body = call(arena, "POST", "/v1/agents", body={"name": name, "version": version})
    assert status == 201, body
    return body["token"]


def play_to_the_end(episode: dict, *, answer: bool = True) -> list:
    """Joins an assigned episode and answers every frame with its first legal action; the
    frames it got."""
    agent = AgentStream(episode["env"]["grpc"])
    agent.join(session_id=episode["session_id"], token=episode["session_token"])
    frames = []
    while (msg := agent.next()) is not None:
        if msg.WhichOneof("message") == "frame":
            frames.append(msg.frame)
            mask = msg.frame.legal_action_mask.data
            if answer:
                agent.act(msg.frame.frame, next(i for i, b in enumerate(mask) if b))
    agent.close()
    return frames


def finished(arena: str, run_id: int, timeout: float = 30.0) -> dict:
    """Run `run_id` once its last episode is committed (its watcher reads the session's end
    within a poll)."""
    end = time.monotonic() + timeout
    while (run := call(arena, "GET", f"/v1/runs/{run_id}")[1])["status"] == "running":
        assert time.monotonic() < end, run
        time.sleep(0.1)
    return run


def protoc_stubs(out: Path) -> Path:
    """The Python stubs grpcio-tools makes from the .proto files, as an outsider makes them."""
    out.mkdir(parents=True, exist_ok=True)
    protos = [str(p.relative_to(ROOT / "proto")) for p in (ROOT / "proto").rglob("*.proto")]
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I", "proto", f"--python_out={out}",
         f"--grpc_python_out={out}", *protos],
        cwd=ROOT, check=True,
    )  # fmt: skip
    return out


#: Runs a script with no rtplan package to import: the editable install's finder is taken out,
#: so `rtplan.v1` can only be the stubs folder; then checks that it was.
_WITHOUT_RTPLAN = """
import runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f)]
sys.path[:] = [p for p in sys.path if p not in ("", {root!r})]
sys.path.insert(0, {stubs!r})
sys.argv = [{script!r}, *{args!r}]
try:
    runpy.run_path({script!r}, run_name="__main__")
finally:
    import rtplan.v1
    assert all(p.startswith({stubs!r}) for p in rtplan.v1.__path__), rtplan.v1.__path__
    assert not any(m.startswith("rtplan.") and m != "rtplan.v1" and not m.startswith("rtplan.v1.")
                   for m in sys.modules), sorted(m for m in sys.modules if "rtplan" in m)
"""


def test_an_agent_written_from_the_proto_alone_plays_a_ranked_run(arena, env, tmp_path):
    token = register(arena, "from-the-proto")
    stubs = protoc_stubs(tmp_path / "stubs")
    args = ["--arena", arena, "--token", token, "--game", GAME, "--tier", "fast"]
    code = _WITHOUT_RTPLAN.format(root=str(ROOT), stubs=str(stubs), script=str(EXAMPLE), args=args)
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{SMOKE.episodes} episodes" in run.stdout and "finished: mean return" in run.stdout
    assert token not in run.stdout + run.stderr

    status, runs = call(arena, "GET", f"/v1/runs?game={GAME}&tier=fast")
    (mine,) = [r for r in runs["runs"] if r["agent"] == "from-the-proto"]
    assert mine["status"] == "finished" and mine["seed_set"] == "smoke"
    assert mine["episodes_finished"] == SMOKE.episodes and mine["fps"] == 30.0
    played = [e for e in mine["episodes"] if e["status"] == "finished"]
    assert sorted(e["seed"] for e in played) == list(SMOKE.seeds)
    for e in played:
        timing = e["timing"]
        assert 0 < e["frames"] <= SMOKE.max_frames
        assert (
            timing["on_time"] + timing["late"] + timing["fallback"] + timing["invalid"]
            == (e["frames"])
        )
        assert timing["on_time"] > 0 and timing["slack_p5_ms"] <= timing["slack_median_ms"]
        assert (
            sum(timing["frame_share_hist"])
            == timing["on_time"] + timing["late"] + (timing["invalid"])
        )
        # The episode's replay is on its env server, and it replays the seed the run says.
        replay = json.load(urllib.request.urlopen(e["replay"], timeout=30))
        config = replay["hello"]["config"]
        assert config["seed"] == e["seed"] and config["sealed"] is True


def test_one_episode_at_a_time_and_no_seed_before_it_is_played(arena, env):
    token = register(arena, "careful")
    status, run = call(arena, "POST", "/v1/runs", token, {"game": GAME, "tier": "fast"})
    assert status == 201 and run["status"] == "running", run
    # Entering again answers the same run to go on with; another tier waits for this one.
    again = call(arena, "POST", "/v1/runs", token, {"game": GAME, "tier": "fast"})
    assert again[0] == 200 and again[1]["id"] == run["id"]
    other = call(arena, "POST", "/v1/runs", token, {"game": GAME, "tier": "standard"})
    assert other[0] == 409 and other[1]["error"] == "run_in_progress"

    status, first = call(arena, "POST", f"/v1/runs/{run['id']}/episodes", token)
    assert status == 201 and first["episode"] == 0 and first["of"] == SMOKE.episodes, first
    # While it is handed out: no second episode, and no seed anywhere.
    busy = call(arena, "POST", f"/v1/runs/{run['id']}/episodes", token)
    assert busy[0] == 409 and busy[1]["error"] == "episode_in_progress"
    for seed in map(str, SMOKE.seeds):  # the run plays them in an order of its own
        assert seed not in json.dumps(call(arena, "GET", f"/v1/runs/{run['id']}")[1])
        assert seed not in json.dumps(get_json(env, f"/v1/sessions/{first['session_id']}"))
    listed = get_json(env, "/v1/replays?limit=200")["replays"]
    assert not [r for r in listed if first["session_id"] in r["name"]]

    frames = play_to_the_end(first)
    assert len(frames) >= 2
    status, second = call(arena, "POST", f"/v1/runs/{run['id']}/episodes", token)
    assert status == 201 and second["episode"] == 1, second
    view = call(arena, "GET", f"/v1/runs/{run['id']}")[1]
    assert view["episodes"][0]["seed"] in SMOKE.seeds and view["episodes"][1]["seed"] is None

    # Abandoned: it never ranks, and the version may enter another run, not this one again.
    status, gone = call(arena, "DELETE", f"/v1/runs/{run['id']}", token)
    assert status == 200 and gone["status"] == "abandoned"
    assert call(arena, "POST", "/v1/runs", token, {"game": GAME, "tier": "fast"})[1]["error"] == (
        "run_abandoned"
    )
    status, other = call(arena, "POST", "/v1/runs", token, {"game": GAME, "tier": "standard"})
    assert status == 201, other


def test_a_no_show_is_played_again_and_a_finished_run_stays_finished(arena):
    token = register(arena, "late-riser")
    status, run = call(arena, "POST", "/v1/runs", token, {"game": GAME, "tier": "fast"})
    assert status == 201
    status, skipped = call(arena, "POST", f"/v1/runs/{run['id']}/episodes", token)
    assert status == 201
    end = time.monotonic() + 30  # never joined: the env server stops it after 2 s
    while (view := call(arena, "GET", f"/v1/runs/{run['id']}")[1])["episodes"][0][
        "status"
    ] == "playing":
        assert time.monotonic() < end, view
        time.sleep(0.1)
    assert view["episodes"][0]["status"] == "no_show"
    assert view["episodes"][0]["seed"] is None
    for episode in range(SMOKE.episodes):
        status, given = call(arena, "POST", f"/v1/runs/{run['id']}/episodes", token)
        assert status == 201 and given["episode"] == episode, given
        assert given["attempt"] == (2 if episode == 0 else 1)
        play_to_the_end(given, answer=episode == 0)
    status, done = call(arena, "POST", f"/v1/runs/{run['id']}/episodes", token)
    assert status == 409 and done["error"] == "run_finished"
    view = call(arena, "GET", f"/v1/runs/{run['id']}")[1]
    assert view["status"] == "finished" and view["episodes_finished"] == SMOKE.episodes
    # The episode played without answers: every frame was the fallback's.
    silent = view["episodes"][-1]["timing"]
    assert silent["fallback"] == view["episodes"][-1]["frames"] and silent["on_time"] == 0
    again = call(arena, "POST", "/v1/runs", token, {"game": GAME, "tier": "fast"})
    assert again[0] == 409 and again[1]["error"] == "run_finished"


def test_bad_entries_get_specific_errors(arena):
    token = register(arena, "erring")
    cases = [
        (None, {"game": GAME}, 401, "token_required"),
        ("rta_0123456789abcdef_nope", {"game": GAME}, 403, "wrong_token"),
        (token, {"game": "speed-go-9x9-v0"}, 422, "unknown_game"),
        (token, {"game": GAME, "tier": "ludicrous"}, 422, "invalid_request"),
    ]
    for given, body, status, kind in cases:
        got = call(arena, "POST", "/v1/runs", given, body)
        assert got[0] == status and got[1]["error"] == kind, (body, got)
    assert call(arena, "GET", "/v1/runs/999999")[1]["error"] == "unknown_run"
    other = register(arena, "bystander")
    status, run = call(arena, "POST", "/v1/runs", token, {"game": GAME, "tier": "fast"})
    got = call(arena, "POST", f"/v1/runs/{run['id']}/episodes", other)
    assert got[0] == 403 and got[1]["error"] == "wrong_token" and "erring" in got[1]["detail"]


def test_references_play_the_same_seeds_and_the_board_pairs_against_the_best(arena, tmp_path):
    """The arena plays a reference run itself (the env server's policy-only player, no one
    joins), and the leaderboard pairs every finished run against the best reference."""
    env = dict(os.environ, RTPLAN_ARENA_URL=arena)
    cli = [sys.executable, "-m", "rtplan", "arena"]
    refs = subprocess.run(
        [*cli, "references", "--game", GAME, "--tier", "fast", "--players", "policy-only"],
        env=env, capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert refs.returncode == 0, refs.stdout + refs.stderr
    assert "rtplan-policy-only" in refs.stdout and f"{SMOKE.episodes}/{SMOKE.episodes}" in (
        refs.stdout
    )
    # An agent's finished run beside it, on the same seeds.
    token = register(arena, "steady")
    status, run = call(arena, "POST", "/v1/runs", token, {"game": GAME, "tier": "fast"})
    for _ in range(SMOKE.episodes):
        play_to_the_end(call(arena, "POST", f"/v1/runs/{run['id']}/episodes", token)[1])
    finished(arena, run["id"])
    status, board = call(arena, "GET", f"/v1/leaderboard?game={GAME}&tier=fast&seed_set=smoke")
    assert status == 200, board
    rows = {r["agent"]: r for r in board["rows"]}
    ref, mine = rows["rtplan-policy-only"], rows["steady"]
    assert ref["kind"] == "reference" and ref["vs_best_reference"] is None
    assert [r["mean_return"] for r in board["rows"]] == sorted(
        (r["mean_return"] for r in board["rows"]), reverse=True
    )
    runs = {r["agent"]: r for r in call(arena, "GET", f"/v1/runs?game={GAME}&tier=fast")[1]["runs"]}
    ours = [e["episode_return"] for e in runs["steady"]["episodes"] if e["status"] == "finished"]
    theirs = [
        e["episode_return"]
        for e in runs["rtplan-policy-only"]["episodes"]
        if e["status"] == "finished"
    ]
    diffs = [a - b for a, b in zip(ours, theirs, strict=True)]
    assert mine["best_reference"] == f"rtplan-policy-only {rtplan.__version__}"
    assert mine["vs_best_reference"] == pytest.approx(sum(diffs) / len(diffs))
    assert ref["on_time"] + ref["late"] + ref["fallback"] + ref["invalid"] == pytest.approx(1.0)
    # Its episodes as CSV, one row per attempt.
    out = tmp_path / "steady.csv"
    exported = subprocess.run(
        [*cli, "export", str(run["id"]), "--out", str(out)], env=env, capture_output=True,
        text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    rows = list(csv.DictReader(out.open()))
    assert sorted(int(r["seed"]) for r in rows) == list(SMOKE.seeds)
    assert [float(r["episode_return"]) for r in rows] == ours
    # A name of the arena's references is not for anyone else.
    taken = call(arena, "POST", "/v1/agents", body={"name": "rtplan-k3", "version": "1"})
    assert taken[0] == 422 and taken[1]["error"] == "reserved_name"


def test_the_example_agent_plays_a_ranked_run_with_the_client_s_helper(arena, tmp_path):
    token = register(arena, "example")
    out = subprocess.run(
        [sys.executable, "-m", "rtplan.examples.random_agent", "--ranked", "--arena", arena,
         "--game", GAME, "--tier", "fast"],
        env={**os.environ, "RTPLAN_ARENA_TOKEN": token, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"episode {SMOKE.episodes}/{SMOKE.episodes} played" in out.stdout
    assert "finished: 2 episodes, mean return" in out.stdout and token not in out.stdout
    # Its version has played this run: a second try is refused in one line.
    again = subprocess.run(
        [sys.executable, "-m", "rtplan.examples.random_agent", "--ranked", "--arena", arena,
         "--game", GAME, "--tier", "fast"],
        env={**os.environ, "RTPLAN_ARENA_TOKEN": token, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert again.returncode == 1 and "run_finished" in again.stderr, again.stderr
