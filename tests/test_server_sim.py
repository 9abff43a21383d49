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

from planner.store import load_planner, planner_path
from server import ReplayError, replay
from support import planner_fns

GAME = "snake-rt-v0"
SEEDS = (0, 7)


@pytest.fixture(scope="module")
def env(serve):
    s = serve((GAME,), planner=True)
    return s.client, s.root


def play(client, timeout: float = 120.0, **body) -> tuple[dict, list[dict]]:
    """Creates a recorded session, waits until it ends; returns its details and frame lines."""
    r = client.post("/v1/sessions", json={"game": GAME, "record": True, **body})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    end = time.monotonic() + timeout
    while (info := client.get(f"/v1/sessions/{sid}").json())["status"] in ("waiting", "running"):
        assert time.monotonic() < end, f"session {sid} did not end: {info}"
        time.sleep(0.05)
    lines = [json.loads(x) for x in Path(info["replay"]).read_text().splitlines()]
    return info, [x for x in lines if x["type"] == "frame"]


@functools.cache
def batched_option(cfg):
    """The option jitted for the in-process side (its own compile: batch len(SEEDS), not 1)."""
    return jax.jit(planner_fns(cfg)[0].option, static_argnums=3)


def in_process(root, seeds, ks):
    """The batched in-process play of a fixed k-sequence: one `Planner.option` per decision for
    every game at once (as `make_committed_eval` does), until every game is done."""
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
        k = lines[f]["k"]
        ks.append(k)
        option = lines[f : f + k]
        reflex = [x["source"] for x in option[: k - 1]]
        assert reflex == ["reflex"] * len(reflex)
        if len(option) == k:
            assert option[-1]["source"] == "planned"
        f += k
    return ks


@pytest.mark.parametrize("ks", [(1,), (2,), (2, 1, 1)], ids=["k1", "k2", "kseq"])
def test_simulated_planner_games_equal_in_process_play(env, ks):
    client, root = env
    want_ret, want_actions, want_ks, want_frames = in_process(root, SEEDS, ks)
    for e, seed in enumerate(SEEDS):
        k = list(ks) if len(ks) > 1 else ks[0]
        info, lines = play(client, agent="planner", k=k, clock="simulated", seed=seed)
        assert info["status"] == "finished", info
        assert info["frame"] == want_frames[e]
        assert [x["action"] for x in lines] == want_actions[e]
        assert decisions(lines) == want_ks[e]
        assert info["episode_return"] == pytest.approx(want_ret[e], abs=0)
        assert {x["provenance"] for x in lines} == {"on_time"}
        stats = info["stats"]
        assert stats["decisions"] == len(want_ks[e]) and stats["planner_errors"] == 0
        assert stats["planned"] == sum(1 for x in lines if x["source"] == "planned")


def test_replay_resimulates_and_names_a_mismatch(env, tmp_path):
    client, _ = env
    info, lines = play(client, agent="reflex", clock="simulated", seed=3)
    result = replay(info["replay"])
    assert result.complete and result.frames == info["frame"]
    assert result.episode_return == info["episode_return"]
    assert list(result.actions) == [x["action"] for x in lines]

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
