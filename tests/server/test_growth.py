"""Bounded growth: the replay and session lists come a page at a time (live first), a 10,000-file
record folder lists within a second, and the retention policy deletes the oldest replays beyond
its count and age."""

from __future__ import annotations

import os
import time
from pathlib import Path

from fastapi.testclient import TestClient

from rtplan.server import Settings, create_app
from rtplan.server._replay_folder import Retention, list_replays, prune_replays
from support import REPLAY_V1

WEB = Path(__file__).resolve().parents[2] / "web"
GAMES = ("snake-rt-v0", "tetris-rt-v0")


def replay_folder(folder: Path, n: int, *, start: float = 1.7e9) -> list[str]:
    """`n` real (small) replay files, a copy of `REPLAY_V1` each, named as the `Recorder` names
    them and one second apart (the newest last); returns their names, oldest first."""
    folder.mkdir(parents=True, exist_ok=True)
    text = REPLAY_V1.read_bytes()
    names = []
    for i in range(n):
        name = f"{GAMES[i % 2]}_{i:016x}.jsonl"
        path = folder / name
        path.write_bytes(text)
        os.utime(path, (start + i, start + i))
        names.append(name)
    return names


def test_a_10000_replay_folder_lists_in_pages_within_a_second(tmp_path):
    names = replay_folder(tmp_path / "replays", 10_000)
    settings = Settings(http_port=0, grpc_port=0, web_dir=WEB, record_dir=tmp_path / "replays")
    settings = settings.model_copy(update={"replay_keep": 0, "replay_max_age_days": 0})
    with TestClient(create_app(settings)) as client:
        t0 = time.perf_counter()
        first = client.get("/v1/replays?limit=50").json()
        first_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        last = client.get("/v1/replays?offset=9990&limit=50").json()
        last_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        tetris = client.get("/v1/replays?game=tetris-rt-v0&offset=10&limit=5").json()
        game_s = time.perf_counter() - t0
    print(f"10,000 replays: first page {first_s:.3f} s, last {last_s:.3f} s, game {game_s:.3f} s")
    assert max(first_s, last_s, game_s) < 1.0
    assert first["total"] == 10_000 and (first["offset"], first["limit"]) == (0, 50)
    assert [r["name"] for r in first["replays"]] == names[::-1][:50]  # newest first
    assert [r["name"] for r in last["replays"]] == names[::-1][9990:]
    assert first["replays"][0]["frames"] == 10 and first["replays"][0]["complete"]
    assert tetris["total"] == 5_000
    assert [r["name"] for r in tetris["replays"]] == names[::-1][0::2][10:15]


def test_retention_deletes_the_oldest_beyond_count_and_age(tmp_path):
    folder = tmp_path / "replays"
    names = replay_folder(folder, 30, start=1_000_000.0)  # file i modified at 1,000,000 + i
    now = 1_000_000.0 + 29 + 100.0  # the newest is 100 s old
    # Count: the 20 newest stay; a recording in progress (the oldest's name here) stays too.
    deleted = prune_replays(folder, Retention(max_count=20, max_age_s=0), keep={names[0]}, now=now)
    assert deleted == names[1:11]  # oldest first
    assert sorted(p.name for p in folder.iterdir()) == sorted([names[0], *names[11:]])
    # Age: files older than 110 s go (files 0 .. 18), but not the one in progress.
    deleted = prune_replays(folder, Retention(max_count=0, max_age_s=110), keep={names[0]}, now=now)
    assert deleted == names[11:19]
    assert sorted(p.name for p in folder.iterdir()) == sorted([names[0], *names[19:]])
    # No limits: nothing goes.
    assert prune_replays(folder, Retention(max_count=0, max_age_s=0), now=now) == []
    assert list_replays(folder, limit=100)["total"] == 12


def test_the_server_prunes_its_record_folder_at_start_up_and_lists_sessions_live_first(tmp_path):
    folder = tmp_path / "replays"
    names = replay_folder(folder, 12, start=time.time() - 100)
    settings = Settings(
        http_port=0,
        grpc_port=0,
        web_dir=WEB,
        record_dir=folder,
        checkpoint_dir=tmp_path,
        replay_keep=5,
    )
    with TestClient(create_app(settings)) as client:
        assert sorted(p.name for p in folder.iterdir()) == sorted(names[-5:])
        listed = client.get("/v1/replays").json()
        assert listed["total"] == 5
        created = [
            client.post(
                "/v1/sessions",
                json={"game": "snake-rt-v0", "agent": "grpc", "max_frames": 1, **extra},
            ).json()
            for extra in ({}, {"featured": True}, {})
        ]
        assert all("id" in c for c in created), created
        # Waiting sessions (no agent joined yet); one deleted: live first, newest first.
        client.request(
            "DELETE",
            f"/v1/sessions/{created[2]['id']}",
            headers={"Authorization": f"Bearer {created[2]['token']}"},
        )
        page = client.get("/v1/sessions?limit=2").json()
        assert (page["total"], page["live"], page["limit"]) == (2, 2, 2)
        assert [s["id"] for s in page["sessions"]] == [created[1]["id"], created[0]["id"]]
        assert client.get("/v1/sessions?status=ended").json()["total"] == 0
        assert (
            client.get("/v1/sessions?offset=1&limit=1").json()["sessions"][0]["id"]
            == (created[0]["id"])
        )
        assert client.get("/v1/sessions?game=tetris-rt-v0").json()["total"] == 0
        # The featured session is what /tv shows while it is live.
        assert client.get("/v1/featured").json()["session"]["id"] == created[1]["id"]
        r = client.get("/v1/sessions?limit=0")
        assert r.status_code == 422 and "limit" in r.json()["detail"], r.text
        assert client.get("/tv").status_code == 200
