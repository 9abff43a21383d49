"""A ranked-run agent written from rtplan's .proto files alone: grpcio, the stubs protoc makes
from proto/rtplan/v1/*.proto, and Python's standard library. No rtplan code.

    python -m grpc_tools.protoc -I proto --python_out=stubs --grpc_python_out=stubs \
        proto/rtplan/v1/env.proto proto/rtplan/v1/tensor.proto
    TOKEN=$(rtplan arena register my-agent --version 1)
    PYTHONPATH=stubs python docs/examples/ranked_agent.py --arena http://127.0.0.1:8100 \
        --token "$TOKEN" --game tetris-rt-v0

It enters a ranked run (POST /v1/runs), then, episode by episode, asks the arena where to play
(POST /v1/runs/{id}/episodes), joins that session on the env server's Env API and plays it to
its end; it stops when the arena answers that the run is finished. Its policy is a uniformly
random legal action, answered at once: put yours in `choose`.
"""

from __future__ import annotations

import argparse
import json
import queue
import random
import sys
import urllib.error
import urllib.request

import grpc

from rtplan.v1 import env_pb2, env_pb2_grpc  # protoc's stubs, not the rtplan package


def call(arena: str, method: str, path: str, token: str, body: dict | None = None):
    """(status, JSON answer) of one arena REST call."""
    request = urllib.request.Request(
        arena + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def legal_actions(mask: env_pb2.Frame) -> list[int]:
    """The legal actions of a frame: its mask is a bool Tensor, one byte per action."""
    return [i for i, b in enumerate(mask.legal_action_mask.data) if b]


def choose(frame: env_pb2.Frame, rng: random.Random) -> int:
    return rng.choice(legal_actions(frame))


def play(episode: dict, rng: random.Random) -> float:
    """Plays one ranked episode to its end; returns its return."""
    outbox: queue.Queue = queue.Queue()
    join = env_pb2.Join(
        protocol_version="rtplan.v1",
        session_id=episode["session_id"],
        token=episode["session_token"],
    )
    outbox.put(env_pb2.AgentMessage(join=join))
    episode_return = 0.0
    with grpc.insecure_channel(episode["env"]["grpc"]) as channel:
        stream = env_pb2_grpc.EnvStub(channel).Play(iter(outbox.get, None))
        for message in stream:  # a Handshake, then one Frame per frame until the session ends
            if message.WhichOneof("message") == "error":
                print(f"  the server says: {message.error.message}", file=sys.stderr)
            if message.WhichOneof("message") != "frame":
                continue
            frame = message.frame
            episode_return = frame.episode_return
            if frame.terminated or frame.truncated:
                break
            action = env_pb2.Action(frame=frame.frame, action=choose(frame, rng))
            outbox.put(env_pb2.AgentMessage(action=action))
        outbox.put(None)  # closes our side of the stream
    return episode_return


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arena", default="http://127.0.0.1:8100")
    parser.add_argument("--token", required=True, help="the agent version's arena token")
    parser.add_argument("--game", default="tetris-rt-v0")
    parser.add_argument("--tier", default="standard", choices=["standard", "fast"])
    parser.add_argument("--seed", type=int, default=0, help="the policy's own randomness")
    args = parser.parse_args()
    rng = random.Random(args.seed)

    status, run = call(
        args.arena, "POST", "/v1/runs", args.token, {"game": args.game, "tier": args.tier}
    )
    if status not in (200, 201):
        print(f"cannot enter: {run['detail']}", file=sys.stderr)
        return 1
    print(
        f"run {run['id']}: {run['game']} at {run['fps']:g} FPS, {run['episodes_planned']} episodes"
    )
    while True:
        status, episode = call(args.arena, "POST", f"/v1/runs/{run['id']}/episodes", args.token)
        if status == 409 and episode["error"] == "run_finished":
            break
        if status != 201:
            print(f"no episode: {episode['detail']}", file=sys.stderr)
            return 1
        got = play(episode, rng)
        print(f"episode {episode['episode'] + 1}/{episode['of']}: return {got:g}")
    status, run = call(args.arena, "GET", f"/v1/runs/{run['id']}", args.token)
    mean, se = run["mean_return"], run["se_return"]
    print(f"run {run['id']} {run['status']}: mean return {mean:.2f} +- {se:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
