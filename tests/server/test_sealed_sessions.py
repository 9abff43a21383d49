"""Sessions the arena asks for: a sealed session hides its seed until it ends, a session nobody
joins stops by itself, and a session's statistics say how much of each frame its answers used."""

from __future__ import annotations

import time

import pytest

from rtplan.server._replay_folder import Retention, prune_replays
from rtplan.server._stats import SHARE_BINS
from support import AgentStream

GAME = "snake-rt-v0"
SEED = 3_000_017


@pytest.fixture(scope="module")
def srv(serve):
    return serve((GAME,))


def details(srv, sid: str) -> dict:
    r = srv.client.get(f"/v1/sessions/{sid}")
    assert r.status_code == 200, r.text
    return r.json()


def listed_replays(srv) -> list[dict]:
    r = srv.client.get("/v1/replays", params={"limit": 200})
    assert r.status_code == 200, r.text
    return r.json()["replays"]


def test_a_sealed_session_shows_its_seed_only_once_it_has_ended(srv):
    body = {"game": GAME, "seed": SEED, "fps": 20.0, "record": True, "max_frames": 12}
    r = srv.client.post("/v1/sessions", json={**body, "sealed": True, "join_within_s": 60})
    assert r.status_code == 201, r.text
    created = r.json()
    sid = created["id"]
    # Nothing shows the seed while the session lives: its creation's answer, its details, a
    # viewer's hello, the replay folder (the file is written under a name it does not list).
    assert created["session"]["config"]["seed"] is None and created["session"]["replay"] is None
    # The lobby marks it ranked (web/lobby.js): its summary says it is sealed.
    assert created["session"]["sealed"] is True
    listed = srv.client.get("/v1/sessions").json()["sessions"]
    assert next(s for s in listed if s["id"] == sid)["sealed"] is True
    assert details(srv, sid)["config"]["seed"] is None
    with srv.client.websocket_connect(f"/v1/sessions/{sid}/ws") as ws:
        hello = ws.receive_json()
    assert hello["type"] == "hello" and hello["config"]["seed"] is None
    assert str(SEED) not in str(hello) and str(SEED) not in str(details(srv, sid))
    assert all(sid not in item["name"] for item in listed_replays(srv))

    agent = AgentStream(srv.address)
    agent.join(session_id=sid, token=created["token"])
    assert agent.next().WhichOneof("message") == "handshake"
    answered = 0
    while (msg := agent.next()) is not None:
        if msg.WhichOneof("message") != "frame":
            continue
        now = details(srv, sid)
        assert now["status"] != "running" or str(SEED) not in str(now)  # mid-game too
        if msg.frame.terminated or msg.frame.truncated:
            break
        if msg.frame.frame % 3:  # two frames in three answered, the others left to the fallback
            agent.act(msg.frame.frame, 0)
            answered += 1
    agent.close()
    end = time.monotonic() + 20
    while (info := details(srv, sid))["status"] in ("waiting", "running"):
        assert time.monotonic() < end, info
        time.sleep(0.05)

    # Ended: the seed and the replay are there for everyone.
    assert info["config"]["seed"] == SEED and info["config"]["sealed"] is True
    assert (info["reason"], info["frame"]) == ("max_frames", 12) or info["reason"] == "terminated"
    names = [item["name"] for item in listed_replays(srv)]
    replay = next(item for item in listed_replays(srv) if sid in item["name"])
    assert replay["seed"] == SEED and replay["complete"] and len(names) == len(set(names))
    assert info["replay"] is not None and info["replay"].endswith(replay["name"])
    assert srv.client.get(f"/v1/replays/{replay['name']}").status_code == 200

    stats = info["stats"]
    share = stats["frame_share"]
    assert share["bins"] == SHARE_BINS and len(share["counts"]) == SHARE_BINS + 1
    # Every answer judged at its frame is in the histogram, each at the share it used.
    judged = stats["on_time"] + stats["late"] + stats["invalid"]
    assert sum(share["counts"]) == judged >= answered - 1
    assert 0 <= share["mean"] <= 1
    slack = stats["slack_ms"]
    assert slack["p5"] <= slack["p50"] <= 50.0  # a 20 FPS frame is 50 ms


def test_a_session_nobody_joins_stops_by_itself(srv):
    r = srv.client.post(
        "/v1/sessions", json={"game": GAME, "seed": 5, "sealed": True, "join_within_s": 0.3}
    )
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    end = time.monotonic() + 20
    while (info := details(srv, sid))["status"] == "waiting":
        assert time.monotonic() < end, info
        time.sleep(0.05)
    assert info["status"] == "stopped" and info["reason"] == "no agent joined within 0.3 s"
    assert info["frame"] == 0 and info["config"]["seed"] == 5
    agent = AgentStream(srv.address)
    agent.join(session_id=sid, token=r.json()["token"])
    msg = agent.next()
    assert msg.WhichOneof("message") == "error"
    assert msg.error.code == 9 and "stopped" in msg.error.message  # FAILED_PRECONDITION
    agent.close()


def test_a_dead_servers_sealed_recordings_go_at_start_up_and_only_then(tmp_path):
    (tmp_path / "snake-rt-v0_aaa.jsonl").write_text("{}\n")
    (tmp_path / ".snake-rt-v0_bbb.jsonl").write_text("{}\n")  # a sealed recording's
    (tmp_path / ".snake-rt-v0_ccc.jsonl").write_text("{}\n")  # one still being written
    keep = ["snake-rt-v0_ccc.jsonl"]
    assert prune_replays(tmp_path, Retention(), keep=keep) == []
    assert prune_replays(tmp_path, Retention(), keep=keep, orphans=True) == [
        ".snake-rt-v0_bbb.jsonl"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".snake-rt-v0_ccc.jsonl",
        "snake-rt-v0_aaa.jsonl",
    ]
