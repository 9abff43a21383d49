"""The host side of `make compose-check` (deploy/compose_check.sh): checks that creating a
session needs a key, plays a planner session over REST with one and watches its websocket,
then finds its replay after the stack restarts; plays one episode of a ranked run through the
arena and the Env API the host reaches, then finds the run after the restart.

    python deploy/compose_probe.py play --http http://127.0.0.1:8000 --api-key-file KEYS \
        --out play.json
    python deploy/compose_probe.py replay --http http://127.0.0.1:8000 --expect play.json
    python deploy/compose_probe.py arena --arena http://127.0.0.1:8100 \
        --grpc localhost:50052 --out arena.json --secrets-out TOKENS
    python deploy/compose_probe.py arena-kept --arena http://127.0.0.1:8100 --expect arena.json

Each prints one line of what it saw and exits non-zero, with the reason, when a check fails.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

from rtplan.processes import HTTPStatusError, first_key, http_json

#: Session creations tried while the env server cannot reach the planner service yet.
CREATE_TRIES = 5


def _ws_url(http: str) -> str:
    return "ws" + http.removeprefix("http")


def refusals(http: str, body: dict) -> dict[str, int]:
    """The statuses of creating a session with no key and with a wrong one (the env server
    must answer 401 and 403 before it creates anything)."""
    seen = {}
    for name, key in (("no_key", None), ("wrong_key", "not-a-key-of-this-server")):
        try:
            http_json("POST", f"{http}/v1/sessions", body, key)
            seen[name] = 201
        except HTTPStatusError as e:
            seen[name] = e.status
    return seen


def play(
    http: str, *, key: str, game: str, k: int, fps: float, frames: int, timeout_s: float
) -> dict:
    """Creates a recorded planner session of `frames` frames with `key` (after checking that
    no key and a wrong one are refused), watches its websocket to the end, and returns what
    was seen (the refusals' statuses, frames, provenance counts, the replay's file name)."""
    from websockets.exceptions import ConnectionClosedOK
    from websockets.sync.client import connect

    body = {"game": game, "agent": "planner", "k": k, "fps": fps, "record": True}
    body["max_frames"] = frames
    refused = refusals(http, body)
    # The env server compiles the game's step at its first session: minutes on a loaded CPU;
    # its first call to the planner may time out while the connection opens (a 409 that says
    # UNAVAILABLE), as `via_services.create_session` retries it.
    for attempt in range(CREATE_TRIES):
        try:
            created = http_json("POST", f"{http}/v1/sessions", body, key, timeout=timeout_s)
            break
        except HTTPStatusError as e:
            if "UNAVAILABLE" not in str(e) or attempt == CREATE_TRIES - 1:
                raise
            print(f"compose_probe play: try {attempt + 1}: {e}; again in 5 s", file=sys.stderr)
            time.sleep(5.0)
    sid = created["id"]
    seen: collections.Counter[str] = collections.Counter()
    planned = 0
    last = None
    until = time.monotonic() + timeout_s
    with connect(_ws_url(http) + created["viewer_path"], max_size=2**22) as ws:
        while True:
            try:
                raw = ws.recv(timeout=max(until - time.monotonic(), 0.1))
            except ConnectionClosedOK:  # the server closes the stream once the session ends
                break
            msg = json.loads(raw)
            if msg.get("type") != "frame":
                continue
            last = msg
            prev = msg.get("previous") or {}
            seen[prev.get("provenance", "none")] += 1
            planned += bool(prev.get("k")) and prev.get("provenance") == "on_time"
            if msg["done"]:
                break
    # The replay is written as the session ends; its details name it.
    details: dict = {}
    for _ in range(60):
        details = http_json("GET", f"{http}/v1/sessions/{sid}")
        if details.get("replay"):
            break
        time.sleep(0.5)
    return {
        "refused": refused,
        "session": sid,
        "game": game,
        "frames_seen": sum(seen.values()),
        "last_frame": last["frame"] if last else None,
        "provenance": dict(seen),
        "planner_on_time": planned,
        "episode_return": details.get("episode_return"),
        "stats": details.get("stats", {}),
        "replay": Path(details["replay"]).name if details.get("replay") else None,
    }


def _call(
    method: str, url: str, body: dict | None = None, token: str | None = None
) -> tuple[int, dict]:
    """One REST call to the arena: (its status, its JSON), an error status included."""
    request = urllib.request.Request(
        url,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Content-Type": "application/json"},
    )
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def _page(url: str) -> tuple[int, str, str]:
    with urllib.request.urlopen(url, timeout=60) as answer:
        return answer.status, answer.headers.get("Content-Type", ""), answer.read().decode()


#: The agent version the probe registers (a fresh database: `down -v` ends every check).
AGENT = {"name": "compose-check", "version": "1"}


def arena(url: str, *, grpc: str, game: str, tier: str, timeout_s: float) -> tuple[dict, list]:
    """Checks the arena's health, leaderboard page and API; registers a version, enters its
    ranked run of `game` at `tier`, takes its first episode (created on the env server with the
    arena's key) and plays it with random legal actions through the Env API at the address the
    arena hands out (which must be `grpc`, the one the host reaches), then waits until the
    arena has read its end.

    Returns:
        (what was seen, the secrets made: the version's token and the session's token).
    """
    from rtplan.client import EnvClient
    from rtplan.examples.random_agent import play as random_play

    seen: dict = {"health": _call("GET", f"{url}/healthz")[1]}
    status, kind, html = _page(f"{url}/arena?game={game}")
    seen["page"] = {"status": status, "type": kind, "bytes": len(html)}
    status, board = _call("GET", f"{url}/v1/leaderboard?game={game}&tier={tier}")
    seen["leaderboard"] = {"status": status, "rows": len(board.get("rows", []))}
    status, agent = _call("POST", f"{url}/v1/agents", AGENT)
    if status != 201:
        raise RuntimeError(f"POST /v1/agents: {status} {agent}")
    token = agent["token"]
    status, run = _call("POST", f"{url}/v1/runs", {"game": game, "tier": tier}, token)
    seen["run"] = {"status": status, "id": run.get("id"), "seed_set": run.get("seed_set")}
    if status != 201:
        raise RuntimeError(f"POST /v1/runs: {status} {run}")
    status, given = _call("POST", f"{url}/v1/runs/{run['id']}/episodes", None, token)
    if status != 201:
        raise RuntimeError(f"POST /v1/runs/{run['id']}/episodes: {status} {given}")
    seen["episode"] = {
        "status": status,
        "session_id": given["session_id"],
        "grpc": given["env"]["grpc"],
        "fps": given["fps"],
        "max_frames": given["max_frames"],
    }
    secrets = [token, given["session_token"]]
    if given["env"]["grpc"] != grpc:
        raise RuntimeError(f"the arena sends agents to {given['env']['grpc']}, not {grpc}")
    with (
        EnvClient(grpc) as client,
        client.play(session_id=given["session_id"], token=given["session_token"]) as episode,
    ):
        provenance, last = random_play(episode, np.random.default_rng(0))
    seen["played"] = {
        "frames": last.frame if last else None,
        "return": last.episode_return if last else None,
        "provenance": dict(provenance),
    }
    # The arena commits the episode once it has read the session's end (within a poll).
    until = time.monotonic() + timeout_s
    while True:
        _, now = _call("GET", f"{url}/v1/runs/{run['id']}")
        attempts = now.get("episodes", [])
        if (attempts and attempts[0]["status"] != "playing") or time.monotonic() > until:
            break
        time.sleep(1.0)
    seen["recorded"] = [
        {k: a[k] for k in ("episode", "attempt", "status", "episode_return", "frames", "seed")}
        for a in attempts
    ]
    return seen, secrets


def _fail(message: str) -> int:
    print(f"compose_probe: {message}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("play", help="play and watch one recorded planner session")
    p.add_argument("--http", required=True, help="the env server, http://HOST:PORT")
    p.add_argument(
        "--api-key-file", type=Path, required=True, help="the env server's keys (its first)"
    )
    p.add_argument("--game", default="snake-rt-v0")
    p.add_argument("--k", type=int, default=2, help="the planner's budget on every option")
    p.add_argument("--fps", type=float, default=9.0)
    p.add_argument("--frames", type=int, default=60, help="the session's max_frames")
    p.add_argument("--timeout-s", type=float, default=600.0, help="for the creation, then the play")
    p.add_argument("--out", type=Path, required=True, help="what was seen, as JSON")
    r = sub.add_parser("replay", help="find the played session's replay on the env server")
    r.add_argument("--http", required=True)
    r.add_argument("--expect", type=Path, required=True, help="play's --out")
    a = sub.add_parser("arena", help="play one episode of a ranked run through the arena")
    a.add_argument("--arena", required=True, help="the arena, http://HOST:PORT")
    a.add_argument("--grpc", required=True, help="the Env API as the host reaches it, HOST:PORT")
    a.add_argument("--game", default="snake-rt-v0")
    a.add_argument("--tier", default="fast", help="fast: 30 FPS, the shortest episodes")
    a.add_argument("--timeout-s", type=float, default=120.0, help="for the arena to record it")
    a.add_argument("--out", type=Path, required=True, help="what was seen, as JSON")
    a.add_argument(
        "--secrets-out", type=Path, required=True, help="the tokens made, one a line (private)"
    )
    k = sub.add_parser("arena-kept", help="find the arena's run after the restart")
    k.add_argument("--arena", required=True)
    k.add_argument("--expect", type=Path, required=True, help="arena's --out")
    args = parser.parse_args(argv)

    try:
        return _run(args)
    except (OSError, RuntimeError, KeyError, ValueError) as e:  # timeouts are OSErrors
        return _fail(f"{args.command}: {type(e).__name__}: {e}")


def _run(args: argparse.Namespace) -> int:
    if args.command == "arena":
        seen, secrets = arena(
            args.arena, grpc=args.grpc, game=args.game, tier=args.tier, timeout_s=args.timeout_s
        )
        args.secrets_out.write_text("".join(f"{s}\n" for s in secrets))
        args.out.write_text(json.dumps(seen, indent=1))
        print("compose_probe arena: " + json.dumps(seen, sort_keys=True))
        if seen["health"].get("status") != "ok":
            return _fail(f"the arena's /healthz: {seen['health']}")
        page = seen["page"]
        if page["status"] != 200 or not page["type"].startswith("text/html"):
            return _fail(f"GET /arena: {page}")
        if seen["leaderboard"]["status"] != 200:
            return _fail(f"GET /v1/leaderboard: {seen['leaderboard']}")
        if seen["run"]["status"] != 201 or seen["episode"]["status"] != 201:
            return _fail(f"entering the run or taking its episode: {seen}")
        if not seen["played"]["frames"]:
            return _fail("the episode showed no frame over the Env API")
        if [a["status"] for a in seen["recorded"]] != ["finished"]:
            return _fail(f"the arena did not record the episode as finished: {seen['recorded']}")
        return 0
    if args.command == "arena-kept":
        expected = json.loads(args.expect.read_text())
        run_id = expected["run"]["id"]
        status, run = _call("GET", f"{args.arena}/v1/runs/{run_id}")
        attempts = [(a["episode"], a["status"]) for a in run.get("episodes", [])]
        print(f"compose_probe arena-kept: GET /v1/runs/{run_id}: {status}, attempts {attempts}")
        want = [(a["episode"], a["status"]) for a in expected["recorded"]]
        if status != 200 or run["agent"] != AGENT["name"] or attempts != want:
            return _fail(f"run {run_id} after the restart: {status} {attempts}, not {want}")
        return 0
    if args.command == "play":
        seen = play(
            args.http,
            key=first_key(args.api_key_file),
            game=args.game,
            k=args.k,
            fps=args.fps,
            frames=args.frames,
            timeout_s=args.timeout_s,
        )
        args.out.write_text(json.dumps(seen, indent=1))
        print("compose_probe play: " + json.dumps(seen, sort_keys=True))
        if seen["refused"] != {"no_key": 401, "wrong_key": 403}:
            return _fail(f"creating a session with no key or a wrong one: {seen['refused']}")
        if seen["frames_seen"] < args.frames // 2:
            return _fail(f"the websocket showed {seen['frames_seen']} of {args.frames} frames")
        if seen["planner_on_time"] == 0:
            return _fail("no frame was played by an on-time planner decision")
        if not seen["replay"]:
            return _fail("the session ended without naming its replay file")
        return 0

    expected = json.loads(args.expect.read_text())
    page = http_json("GET", f"{args.http}/v1/replays?limit=200")
    names = [json.dumps(item) for item in page.get("replays", page.get("items", []))]
    found = [n for n in names if expected["replay"] in n]
    print(
        f"compose_probe replay: {page.get('total')} replay(s) in {page.get('record_dir')}; "
        f"{expected['replay']}: {'found' if found else 'MISSING'}"
    )
    if not found:
        return _fail(f"{expected['replay']} is not listed by GET /v1/replays after the restart")
    view = http_json("GET", f"{args.http}/v1/replays/{expected['replay']}", timeout=300)
    print(f"compose_probe replay: GET /v1/replays/{expected['replay']}: keys {sorted(view)[:8]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
