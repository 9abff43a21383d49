"""Simulated-clock mode: games played through the real gRPC services equal in-process play,
and their replay files re-simulate (or fail clearly)."""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rtplan.harness.checkpoint import planner_path
from rtplan.planner.store import load_planner
from rtplan.server import ReplayError, ReplayFile, replay
from rtplan.server._compiled import compiled
from support import REPLAY_V1, planner_fns, session_ended, write_planner

GAME = "snake-rt-v0"
SEEDS = (0, 7)


@pytest.fixture(scope="module")
def env(serve, tmp_path_factory):
    # The two budgets the tests play: the planner service compiles every budget it serves.
    root = tmp_path_factory.mktemp("ckpt")
    write_planner(root, GAME, budgets=(1, 2), simulations=(2, 4))
    return serve(checkpoint_dir=root, planner=True)


def play(client, timeout: float = 120.0, **body) -> tuple[dict, list]:
    """Creates a recorded session, waits until it ends; returns its details and the frames'
    reports (read from its replay file)."""
    r = client.post("/v1/sessions", json={"game": GAME, "record": True, **body})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    info = session_ended(client, sid, timeout=timeout)
    return info, [x.report for x in ReplayFile.read(info["replay"]).frames]


@functools.cache
def batched_option(cfg):
    """The option jitted for the in-process side (its own compile: batch len(SEEDS), not 1)."""
    return jax.jit(planner_fns(cfg)[0].option, static_argnums=3)


def in_process(root, seeds, ks):
    """The batched in-process play of a fixed k-sequence: one `Planner.option` per decision for
    every game at once (as `planner.episodes.play` does), until every game is done."""
    cfg, params, _ = load_planner(GAME, str(planner_path(root, GAME)))
    planner, option = planner_fns(cfg)[0], batched_option(cfg)
    states = jax.vmap(planner.game.init)(jnp.stack([jax.random.PRNGKey(s) for s in seeds]))
    n = len(seeds)
    returns, actions, kseq = np.zeros(n), [[] for _ in seeds], [[] for _ in seeds]
    i = 0
    while not bool(states.done.all()):
        k = ks[i % len(ks)]
        running = ~np.asarray(states.done)
        out = jax.device_get(option(params, jax.random.split(jax.random.PRNGKey(i), n), states, k))
        for e in np.flatnonzero(running):
            returns[e] += out.reward[e]
            actions[e].extend(int(a) for a in out.actions[e])
            kseq[e].append(k)
        states, i = out.next_state, i + 1
    frames = np.asarray(states.frame)
    return returns, [a[: frames[e]] for e, a in enumerate(actions)], kseq, frames


def decisions(lines) -> list[int]:
    """The k-sequence of a recorded planner game, checking each option's frame sources."""
    ks, f = [], 0
    while f < len(lines):
        k = lines[f].k
        ks.append(k)
        option = lines[f : f + k]
        reflex = [x.source for x in option[: k - 1]]
        assert reflex == ["reflex"] * len(reflex)
        if len(option) == k:
            assert option[-1].source == "planned"
        f += k
    return ks


@pytest.mark.parametrize("ks", [(1,), (2,), (2, 1, 1)], ids=["k1", "k2", "kseq"])
def test_simulated_planner_games_equal_in_process_play(env, ks):
    client, root = env.client, env.root
    want_ret, want_actions, want_ks, want_frames = in_process(root, SEEDS, ks)
    for e, seed in enumerate(SEEDS):
        k = list(ks) if len(ks) > 1 else ks[0]
        info, lines = play(client, agent="planner", k=k, clock="simulated", seed=seed)
        assert info["status"] == "finished", info
        assert info["frame"] == want_frames[e]
        assert [x.action for x in lines] == want_actions[e]
        assert decisions(lines) == want_ks[e]
        assert info["episode_return"] == pytest.approx(want_ret[e], abs=0)
        assert {x.provenance.label for x in lines} == {"on_time"}
        stats = info["stats"]
        assert stats["decisions"] == len(want_ks[e]) and stats["planner_errors"] == 0
        assert stats["planned"] == sum(1 for x in lines if x.source == "planned")


def test_a_busy_planner_delays_simulated_plans_and_changes_no_game(env, serve):
    """A planner with one search slot refuses concurrent Plans RESOURCE_EXHAUSTED (with
    retry-after-ms): simulated-clock sessions ask again when it says, so four at once each play
    exactly the in-process game, every frame planned, no planner error."""
    from rtplan.planner_service.background import BackgroundService

    busy = BackgroundService(env.planner.engine, max_concurrent=1).start()  # compiled already
    try:
        s = serve(checkpoint_dir=env.root, planner_address=busy.address)
        want_ret, want_actions, _, want_frames = in_process(env.root, SEEDS, (1,))
        seeds = SEEDS * 2
        body = {"game": GAME, "agent": "planner", "k": 1, "clock": "simulated", "record": True}
        ids = [s.client.post("/v1/sessions", json={**body, "seed": x}).json()["id"] for x in seeds]
        end = time.monotonic() + 120
        for sid, seed in zip(ids, seeds, strict=True):
            while (info := s.client.get(f"/v1/sessions/{sid}").json())["status"] in (
                "waiting",
                "running",
            ):
                assert time.monotonic() < end, info
                time.sleep(0.05)
            e = SEEDS.index(seed)
            assert info["stats"]["planner_errors"] == 0, info["stats"]
            assert info["frame"] == want_frames[e] == info["stats"]["planned"]
            lines = [x.report for x in ReplayFile.read(info["replay"]).frames]
            assert [x.action for x in lines] == want_actions[e]
            assert info["episode_return"] == pytest.approx(want_ret[e], abs=0)
    finally:
        busy.stop()


def test_replay_resimulates_and_names_a_mismatch(env, tmp_path):
    client = env.client
    info, lines = play(client, agent="reflex", clock="simulated", seed=3)
    # The server compiled the re-simulation when it compiled the game (`GameRuntime.warm`): a
    # visitor's replay compiles nothing (its compile had made every live tick seconds late).
    header = json.loads(Path(info["replay"]).read_text().splitlines()[0])
    fns = compiled(GAME, tuple(sorted(header["game_params"].items())), None)
    programs = fns.frame._cache_size()
    assert programs >= 1
    result = replay(info["replay"])
    assert fns.frame._cache_size() == programs
    assert result.complete and result.frames == info["frame"]
    assert result.episode_return == info["episode_return"]
    assert list(result.actions) == [x.action for x in lines]

    raw = Path(info["replay"]).read_text().splitlines()
    # A changed action no longer leads to the recorded state.
    frame = json.loads(raw[5])
    legal_other = (frame["action"] + 1) % 4
    frame["action"] = legal_other
    bad = tmp_path / "changed.jsonl"
    bad.write_text("\n".join([*raw[:5], json.dumps(frame), *raw[6:]]) + "\n")
    with pytest.raises(ReplayError, match=r"changed.jsonl:6: frame 4: the state after action"):
        replay(bad)
    # Corrupt files say where.
    torn = tmp_path / "torn.jsonl"
    torn.write_text("\n".join(raw[:3]) + "\n{not json\n")
    with pytest.raises(ReplayError, match=r"torn.jsonl:4: not JSON"):
        replay(torn)
    headless = tmp_path / "headless.jsonl"
    headless.write_text("\n".join(raw[1:]) + "\n")
    with pytest.raises(ReplayError, match="the first line must be the header"):
        replay(headless)
    reseeded = tmp_path / "reseeded.jsonl"
    header = json.loads(raw[0])
    header["seed"] = 4
    reseeded.write_text("\n".join([json.dumps(header), *raw[1:]]) + "\n")
    with pytest.raises(ReplayError, match="seed 4 gives another initial state"):
        replay(reseeded)
    with pytest.raises(ReplayError, match="cannot read"):
        replay(tmp_path / "missing.jsonl")


#: A replay written by the version 1 writer (format "rtplan.replay.v1", no version field): Snake
#: on its default board, seed 5, frames on time / fallback / invalid, and a late action for 5.
V1_REPLAY = REPLAY_V1


def test_a_version_1_replay_is_read_and_served(env, tmp_path):
    client = env.client
    rf = ReplayFile.read(V1_REPLAY)
    assert rf.version == 1 and rf.game_id == GAME and rf.seed == 5 and len(rf.frames) == 10
    late = [x.report for x in rf.items if x not in rf.frames]
    assert [(r.frame, r.provenance.label, r.source) for r in late] == [(5, "late", "agent")]
    result = replay(V1_REPLAY)
    assert result.complete and result.frames == 10 and result.episode_return == 1.0
    # The replay page gets it as a live viewer would have: hello, frames, end.
    info, _ = play(client, agent="reflex", clock="simulated", seed=2)
    record_dir = Path(info["replay"]).parent
    (record_dir / "old_v1.jsonl").write_text(V1_REPLAY.read_text())
    listed = {r["name"]: r for r in client.get("/v1/replays").json()["replays"]}
    assert listed["old_v1.jsonl"]["version"] == 1 and listed["old_v1.jsonl"]["frames"] == 10
    index = client.get("/v1/replays/old_v1.jsonl").json()
    hello = index["hello"]
    assert hello["type"] == "hello" and hello["spec"]["id"] == GAME
    assert hello["config"]["seed"] == 5 and hello["session"]["status"] == "replay"
    reports = [f["previous"] for f in index["frames"][1:]]
    assert [r["provenance"] for r in reports[:6]] == [
        "on_time", "fallback", "invalid", "on_time", "on_time", "late"
    ]  # fmt: skip
    assert reports[5]["source"] == "fallback" and reports[5]["answer_source"] == "agent"
    assert index["frames"][-1]["stats"]["late"] == 1
    assert index["end"]["type"] == "end" and index["end"]["reason"] == "terminated"


def test_a_replay_is_served_with_the_live_messages_and_other_versions_refused(env, tmp_path):
    client = env.client
    info, reports = play(client, agent="reflex", clock="simulated", seed=4)
    path = Path(info["replay"])
    header = json.loads(path.read_text().splitlines()[0])
    assert (header["format"], header["version"]) == ("rtplan.replay", 2)
    index = client.get(f"/v1/replays/{path.name}").json()
    hello, end = index["hello"], index["end"]
    assert hello["config"] == info["config"] and hello["session"]["id"] == info["id"]
    described = {g["id"]: g for g in client.get("/v1/games").json()["games"]}
    # The game's description, less what the planner service serves now (not a replay's fact).
    assert hello["spec"] == {k: v for k, v in described[GAME].items() if k != "planner"}
    assert [f["previous"]["action"] for f in index["frames"][1:]] == [r.action for r in reports]
    assert {f["previous"]["source"] for f in index["frames"][1:]} == {"reflex"}
    assert end["episode_return"] == info["episode_return"] and end["status"] == "finished"
    assert end["stats"]["frames"] == info["stats"]["frames"] == len(reports)

    raw = path.read_text().splitlines()

    def with_header(name, **fields):
        out = tmp_path / name
        head = {k: v for k, v in {**header, **fields}.items() if v is not None}
        out.write_text("\n".join([json.dumps(head), *raw[1:]]) + "\n")
        return out

    with pytest.raises(ReplayError, match=r"newer.jsonl:1: replay version 3 is newer than this"):
        ReplayFile.read(with_header("newer.jsonl", version=3))
    with pytest.raises(ReplayError, match="needs a version >= 2, got None"):
        ReplayFile.read(with_header("unversioned.jsonl", version=None))
    with pytest.raises(ReplayError, match="'other' is not an rtplan replay"):
        replay(with_header("other.jsonl", format="other"))


def test_the_replay_list_names_a_clock_games_opponent_by_the_games_kind():
    from rtplan.server._replay_folder import players

    settings = {"agent": "grpc", "ks": [], "opponent": "reflex", "opponent_k": 0}

    def opponent(game: str, spec: dict | None = None) -> str | None:
        return players({"game": game, "settings": settings, "spec": spec})["opponent"]

    # A registered game: the registry's kind (`games.kind_of`), with or without a spec.
    assert opponent("speed-hex-v0") == "reflex" and opponent("snake-rt-v0") is None
    assert opponent("speed-go-v0", {"num_players": 2}) == "reflex"
    # A game this server does not know: the kind its recorded spec's players name.
    assert opponent("gone-v0", {"num_players": 2}) == "reflex"
    assert opponent("gone-v0", {"num_players": 1}) is None and opponent("gone-v0") is None
