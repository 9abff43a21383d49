"""Nothing lost: `kill -9` of the arena or of an env server in the middle of a ranked run loses
no finished episode, and the run goes on with the same remaining seeds (an episode cut short by
its server's death is played again from its seed, and the record keeps both attempts)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rtplan.arena import ranked
from support import ROOT, AgentStream, free_port, post_session, write_checkpoints

GAME = "snake-rt-v0"
SMOKE = ranked.SEED_SETS["smoke"]
sys.path.insert(0, str(Path(__file__).parent))
from test_ranked_runs import call, finished, play_to_the_end, register  # noqa: E402


@contextlib.contextmanager
def process(cmd: list[str], ready: str, log: Path | None = None) -> Iterator[subprocess.Popen]:
    """A service process, once its start-up line (containing `ready`) is out; killed after.
    `log`: where its stderr goes (else a pipe)."""
    err = subprocess.PIPE if log is None else log.open("a")
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True, env=os.environ.copy()
    )
    try:
        line = proc.stdout.readline()
        assert ready in line, line + (proc.stderr.read() if log is None else log.read_text())
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def env_server(root: Path, record: Path, http: int, grpc: int):
    cmd = [
        sys.executable,
        "-m",
        "rtplan.server",
        "--http-port",
        str(http),
        "--grpc-port",
        str(grpc),
    ]
    cmd += ["--checkpoint-dir", str(root), "--record-dir", str(record), "--log-level", "warning"]
    return process(cmd, "rtplan env server")


def arena_server(db: Path, port: int, env_url: str, log: Path | None = None):
    cmd = [sys.executable, "-m", "rtplan", "arena", "serve", "--port", str(port)]
    cmd += ["--database", str(db), "--env", env_url, "--seed-set", "smoke"]
    cmd += ["--join-within-s", "10", "--lost-after-s", "2", "--log-level", "info"]
    return process(cmd, "rtplan arena", log)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return write_checkpoints(tmp_path_factory.mktemp("ckpt"), (GAME,))


def start_and_kill(episode: dict, server: subprocess.Popen, frames: int = 1) -> None:
    """Joins the episode, reads its first frame, then kills `server` with SIGKILL (at once: a
    Snake that nobody steers can die within a few frames, and an episode that ended before
    its server died is cut short all the same, as the arena cannot learn how it ended)."""
    agent = AgentStream(episode["env"]["grpc"])
    agent.join(session_id=episode["session_id"], token=episode["session_token"])
    seen = 0
    while seen < frames:
        msg = agent.next()
        assert msg is not None, agent.status
        seen += msg.WhichOneof("message") == "frame"
    os.kill(server.pid, signal.SIGKILL)
    server.wait(timeout=30)
    agent.close()


def test_an_env_server_killed_mid_episode_costs_that_attempt_only(root, tmp_path):
    """Two env servers on this machine: the episodes go to the one with fewer playing; when
    one dies mid-episode, that attempt is cut short and the episode is played again, from its
    seed, on the other; the dead one's unfinished sealed recording goes when it restarts."""
    ports = [(free_port(), free_port()) for _ in range(2)]
    urls = [f"http://127.0.0.1:{http}" for http, _ in ports]
    records = [tmp_path / "replays-a", tmp_path / "replays-b"]
    log = tmp_path / "arena.log"
    with (
        env_server(root, records[0], *ports[0]) as env_a,
        env_server(root, records[1], *ports[1]) as env_b,
    ):
        for url in urls:
            post_session(url, game=GAME, agent="reflex", fps=50.0, max_frames=1)  # compiled
        port = free_port()
        with arena_server(tmp_path / "arena.db", port, ",".join(urls), log=log):
            arena = f"http://127.0.0.1:{port}"
            token = register(arena, "survivor")
            run = call(arena, "POST", "/v1/runs", token, {"game": GAME, "tier": "fast"})[1]
            first = call(arena, "POST", f"/v1/runs/{run['id']}/episodes", token)[1]
            play_to_the_end(first)
            second = call(arena, "POST", f"/v1/runs/{run['id']}/episodes", token)[1]
            assert second["episode"] == 1
            dead = urls.index(second["env"]["http"])  # which one: the fewer playing, then A
            start_and_kill(second, (env_a, env_b)[dead])
            # Unreachable for --lost-after-s: the attempt is cut short, the finished one stays.
            end = time.monotonic() + 30
            while (view := call(arena, "GET", f"/v1/runs/{run['id']}")[1])["episodes"][-1][
                "status"
            ] == "playing":
                assert time.monotonic() < end, view
                time.sleep(0.2)
            cut = view["episodes"][-1]
            assert cut["status"] == "cut_short" and "unreachable" in cut["note"]
            assert view["episodes"][0]["status"] == "finished" and cut["seed"] is None
            # The same episode, attempt 2, on the env server that lives.
            again = call(arena, "POST", f"/v1/runs/{run['id']}/episodes", token)
            assert again[0] == 201 and again[1]["episode"] == 1, again
            assert again[1]["attempt"] == 2 and again[1]["env"]["http"] == urls[1 - dead]
            play_to_the_end(again[1])
            view = finished(arena, run["id"])
            sessions = [first["session_token"], second["session_token"], again[1]["session_token"]]
        # The dead server restarts (as a pod would): its unfinished sealed recording goes.
        assert [p.name[0] for p in records[dead].iterdir()].count(".") == 1
        with env_server(root, records[dead], *ports[dead]):
            assert [p.name[0] for p in records[dead].iterdir()].count(".") == 0
    assert view["status"] == "finished" and view["episodes_finished"] == SMOKE.episodes
    attempts = [(e["episode"], e["attempt"], e["status"]) for e in view["episodes"]]
    assert attempts == [(0, 1, "finished"), (1, 1, "cut_short"), (1, 2, "finished")]
    # The attempt played again played the seed of the one cut short: both show it now.
    assert view["episodes"][1]["seed"] == view["episodes"][2]["seed"]
    assert sorted(e["seed"] for e in view["episodes"][::2]) == list(SMOKE.seeds)
    # What the arena logged (its warnings and errors: the lost server) holds no token.
    said = log.read_text()
    assert "cut_short" in said  # the log is the arena's own (INFO: each attempt's end)
    assert not [t for t in [token, *sessions] if t in said]


def test_an_arena_killed_mid_episode_commits_it_when_it_comes_back(root, tmp_path):
    http, grpc, port = free_port(), free_port(), free_port()
    env_url = f"http://127.0.0.1:{http}"
    db = tmp_path / "arena.db"
    with env_server(root, tmp_path / "replays", http, grpc):
        post_session(env_url, game=GAME, agent="reflex", fps=50.0, max_frames=1)
        with arena_server(db, port, env_url) as arena_proc:
            arena = f"http://127.0.0.1:{port}"
            token = register(arena, "patient")
            run = call(arena, "POST", "/v1/runs", token, {"game": GAME, "tier": "fast"})[1]
            first = call(arena, "POST", f"/v1/runs/{run['id']}/episodes", token)[1]
            play_to_the_end(first)
            second = call(arena, "POST", f"/v1/runs/{run['id']}/episodes", token)[1]
            before = finished_rows(db)  # the first, committed before the second was handed out
            assert len(before) == 1
            agent = AgentStream(second["env"]["grpc"])
            agent.join(session_id=second["session_id"], token=second["session_token"])
            assert agent.next().WhichOneof("message") == "handshake"
            os.kill(arena_proc.pid, signal.SIGKILL)
            arena_proc.wait(timeout=30)
            # The episode goes on without the arena, to its end.
            while (msg := agent.next()) is not None:
                if msg.WhichOneof("message") == "frame":
                    agent.act(msg.frame.frame, 0)
            agent.close()
        assert finished_rows(db) == before  # nothing committed was lost
        with arena_server(db, port, env_url):
            view = finished(arena, run["id"])
    assert view["status"] == "finished"
    assert [(e["episode"], e["attempt"], e["status"]) for e in view["episodes"]] == [
        (0, 1, "finished"),
        (1, 1, "finished"),
    ]
    assert finished_rows(db)[: len(before)] == before


def finished_rows(db: Path) -> list[tuple]:
    """The finished episodes as the database holds them (read with sqlite3, not the arena)."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute(
            "SELECT run_id, episode_index, attempt, seed, episode_return, frames FROM episodes "
            "WHERE status = 'finished' ORDER BY id"
        ).fetchall()
