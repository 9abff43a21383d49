"""`rtplan deploy`: the agent live at each FPS against its simulated-clock return on the same seeds.

The end-to-end tests run the real services on a tiny Snake planner and gate, a few frames per
episode; the ladder, resume and statistics are checked on fakes of the sessions.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math

import jax
import pytest

from rtplan import deploy
from rtplan.cli import main
from rtplan.deploy import _play
from rtplan.harness.checkpoint import gate_path, planner_path
from rtplan.planner import Planner
from rtplan.planner.episodes import seeds_of
from rtplan.planner.store import save_planner
from rtplan.processes import Placement, place_services, services
from support import tiny_config, write_gate

GAME = "snake-rt-v0"
CFG = dataclasses.replace(tiny_config(GAME), budgets=(1, 2), simulations=(2, 4))
FILES = ("simulated.json", "deploy.csv", "deploy.json", "deploy.png")
SUMMARY_FIELDS = {
    "inputs",
    "fps",
    "seeds",
    "return",
    "simulated",
    "deployed_minus_simulated",
    "returns",
    "simulated_returns",
    "budgets",
    "latency_ms",
    "miss_rate",
    "misses",
    "invalid",
    "landings",
    "slack_p95_ms",
    "late_ticks",
    "planner_errors",
    "placement",
}
FRAME_FIELDS = {
    "fps",
    "seed",
    "frame",
    "action",
    "k",
    "landing",
    "provenance",
    "source",
    "answer_source",
    "latency_ms",
    "slack_ms",
    "reward",
}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt")
    save_planner(planner_path(root, GAME), CFG, Planner(CFG).init_params(jax.random.PRNGKey(0)))
    write_gate(root, GAME, seed=9)
    return root


def _err_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


# End to end, on the real services -------------------------------------------------------------


def test_deploy_plays_two_fps_and_resumes(root, tmp_path, capsys):
    out = tmp_path / "deploy"
    argv = [
        "deploy", "--game", GAME, "--fps", "10", "240", "--episodes", "2", "--max-frames", "30",
        "--checkpoint-dir", str(root), "--out", str(out),
    ]  # fmt: skip
    assert main(argv) == 0
    seeds = seeds_of("eval", 2).tolist()
    for name in FILES:
        assert (out / name).stat().st_size > 0, name
    sim = json.loads((out / "simulated.json").read_text())
    assert sim["seeds"] == seeds and len(sim["returns"]) == 2 and sim["frames"] == [30, 30]
    for fps in (10, 240):
        s = json.loads((out / f"fps_{fps}.json").read_text())
        assert set(s) >= SUMMARY_FIELDS and s["fps"] == fps
        # Paired on the same seeds: the simulated side is the simulated-clock sessions' return.
        assert s["seeds"] == seeds == s["inputs"]["seeds"]
        assert s["simulated_returns"] == sim["returns"]
        diff = [a - b for a, b in zip(s["returns"], s["simulated_returns"])]
        assert math.isclose(s["deployed_minus_simulated"]["mean"], sum(diff) / 2, abs_tol=1e-9)
        assert set(s["budgets"]) == {"1", "2"}
        assert s["latency_ms"]["all"]["n"] == s["landings"] > 0
        rows = [json.loads(x) for x in (out / f"fps_{fps}.jsonl").read_text().splitlines()]
        # A frame a row; missed frames play the fallback, which may end an episode early.
        assert all(set(r) == FRAME_FIELDS for r in rows)
        assert [r["seed"] for r in rows] == [seeds[0]] * s["frames"][0] + [seeds[1]] * s["frames"][
            1
        ]
        for i, seed in enumerate(seeds):
            got = sum(r["reward"] for r in rows if r["seed"] == seed)
            assert math.isclose(got, s["returns"][i], abs_tol=1e-6)
        landing = [r for r in rows if r["landing"]]
        assert len(landing) == s["landings"]
        # Deadline misses; an on-time answer made illegal by an earlier miss is `invalid`.
        assert sum(r["provenance"] in ("fallback", "late") for r in landing) == s["misses"]
        assert sum(r["provenance"] == "invalid" for r in landing) == s["invalid"]
        if all(r["provenance"] == "on_time" for r in rows if not r["landing"]):
            assert s["invalid"] == 0  # nothing moved the game off its plan
        assert set(s["placement"]) == {"planner", "env_server"}
    # At 240 FPS (the server's most) a 4 ms frame: misses on a loaded machine, not always.
    fast = json.loads((out / "fps_240.json").read_text())
    assert fast["miss_rate"] == fast["misses"] / fast["landings"]
    # Missed latencies are censored: the median is unknown once more than half missed.
    assert (fast["latency_ms"]["all"]["p50"] is None) == (2 * fast["misses"] > fast["landings"])
    # Live episodes end by max_frames, or earlier where a miss's fallback ended the game.
    slow = json.loads((out / "fps_10.json").read_text())
    assert all(1 <= f <= 30 for f in slow["frames"])
    table = list(csv.DictReader((out / "deploy.csv").open()))
    assert [float(r["fps"]) for r in table] == [10, 240]
    assert {"return_mean", "deployed_minus_simulated_se", "miss_rate", "slack_p95_ms"} <= set(
        table[0]
    )
    capsys.readouterr()

    # Resume: both FPS and the simulated returns are kept, nothing is played again.
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("fps_*")}
    assert main(argv) == 0
    out_text = capsys.readouterr().out
    assert "10 FPS: kept" in out_text and "240 FPS: kept" in out_text
    assert "simulated clock: kept" in out_text
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("fps_*")} == before


def test_deploy_against_remote_services(root, tmp_path, capsys):
    out = tmp_path / "remote"
    with services(GAME, echo=False, checkpoint_dir=root, record_dir=tmp_path / "rep") as addr:

        def argv(k: str) -> list[str]:
            return [
                "deploy", "--game", GAME, "--fps", "10", "--episodes", "1", "--max-frames", "20",
                "--k", k, "--remote", addr["http"], "--planner", addr["planner"],
                "--out", str(out),
            ]  # fmt: skip

        assert main(argv("2")) == 0
        printed = capsys.readouterr().out
        assert "env server at" in printed and "planner service at" in printed
        s = json.loads((out / "fps_10.json").read_text())
        assert s["inputs"]["agent"] == "k2" and s["budgets"] == {"1": 0.0, "2": 1.0}
        assert s["inputs"]["services"]["env_server"] == addr["http"]
        assert s["placement"] is None
        assert len((out / "fps_10.jsonl").read_text().splitlines()) == 20
        # A budget the remote planner does not plan: one line.
        assert main(argv("3")) == 2
        assert "--k 3: the planner service plans snake-rt-v0 at [1, 2]" in _err_line(capsys)


# Bad input: one line each -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--game", "nope-v0", "--fps", "9"], "unknown game 'nope-v0'"),
        (["--game", GAME, "--fps"], "--fps needs at least one frame rate"),
        (["--game", GAME], "--fps needs at least one frame rate"),
        (["--game", GAME, "--fps", "0"], "frame rates must be > 0"),
        (["--game", GAME, "--fps", "9", "--episodes", "0"], "--episodes must be >= 1"),
        (
            ["--game", GAME, "--fps", "9", "--remote", "http://127.0.0.1:9"],
            "env server at http://127.0.0.1:9/healthz is unreachable",
        ),
        (
            ["--game", GAME, "--fps", "9", "--api-key-file", "keys"],
            "--api-key-file holds the keys of a --remote env server",
        ),
        (
            ["--game", GAME, "--fps", "9", "--remote", "http://127.0.0.1:9"]
            + ["--api-key-file", "/nonexistent/keys"],
            "--api-key-file: cannot read the API key file /nonexistent/keys",
        ),
    ],
)
def test_bad_input_is_one_line(extra, message, tmp_path, capsys):
    assert main(["deploy", *extra, "--out", str(tmp_path)]) in (1, 2)
    line = _err_line(capsys)
    assert line.startswith("rtplan deploy: error: ") and message in line, line


def test_missing_gate_is_one_line(root, tmp_path, capsys):
    import shutil

    shutil.copytree(root, tmp_path / "nogate")
    gate_path(tmp_path / "nogate", GAME).unlink()
    argv = ["deploy", "--game", GAME, "--fps", "9", "--checkpoint-dir", str(tmp_path / "nogate")]
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    missing = gate_path(tmp_path / "nogate", GAME)
    line = _err_line(capsys)
    assert f"no gate checkpoint for snake-rt-v0 at {missing}" in line and "--k K" in line


# The experiment's logic on fake sessions ----------------------------------------------------


def _fake_sessions(monkeypatch, miss_at):
    """Fakes the services: every session lasts 10 frames of k=2 options; an option misses when
    `miss_at(fps, seed, option)`; the simulated return is 5, the live one 5 minus the misses."""
    played = []

    def live(http, exp, fps, seed, key=None):
        played.append((fps, seed))
        rows, misses = [], 0
        for f in range(10):
            landing = f % 2 == 1
            miss = landing and miss_at(fps, seed, f // 2)
            misses += miss
            rows.append(
                {
                    "fps": fps, "seed": seed, "frame": f, "action": 0, "k": 2,
                    "landing": landing, "provenance": "fallback" if miss else "on_time",
                    "source": "fallback" if miss else ("planned" if landing else "reflex"),
                    "answer_source": "planned" if landing else "reflex",
                    "latency_ms": None if miss else 10.0 + f, "slack_ms": 0.0 if miss else 50.0,
                    "reward": 0.5 - (0.5 if miss else 0.0),
                }
            )  # fmt: skip
        info = {
            "episode_return": 5.0 - 0.5 * misses,
            "frame": 10,
            "reason": "terminated",
            "stats": {"late_ticks": 0, "ticks": 10},
        }
        return info, rows

    def sim(http, game, seeds, log, *, k, max_frames, key=None):
        stats = {"k_histogram": {"2": 5}}
        return [
            {"episode_return": 5.0, "frame": 10, "reason": "terminated", "stats": stats}
            for _ in seeds
        ]

    spec = {"id": GAME, "num_players": 1, "planner": {"available": True, "budgets": [1, 2],
            "gate": True, "reason": ""}}  # fmt: skip
    monkeypatch.setattr(_play, "_live_episode", live)
    monkeypatch.setattr(_play, "play_sessions", sim)
    monkeypatch.setattr(_play, "served_game", lambda http, exp: spec)
    return played


def test_ladder_goes_on_until_the_miss_rate_passes(monkeypatch, tmp_path):
    # Misses grow with the FPS: from 12 FPS on, one option in five misses (20%).
    played = _fake_sessions(monkeypatch, lambda fps, seed, o: fps >= 12 and o == 0)
    exp = deploy.Experiment(game=GAME, fps=(8, 9, 10), episodes=2, until_miss_rate=0.05)
    result = deploy.run("http://fake", exp, tmp_path, services={}, log=lambda s: None)
    assert sorted({f for f, _ in played}) == [8, 9, 10, 11, 12]
    assert result["highest_fps_within_miss_rate"] == 11
    s12 = json.loads((tmp_path / "fps_12.json").read_text())
    assert s12["miss_rate"] == pytest.approx(0.2) and s12["misses"] == 2
    assert s12["deployed_minus_simulated"] == {"mean": -0.5, "se": 0.0}
    # The 20% of missed k=2 latencies are censored: p50 exact, p95 and p99 unknown.
    assert s12["latency_ms"]["2"]["p50"] is not None and s12["latency_ms"]["2"]["p95"] is None
    assert s12["slack_p95_ms"] is None  # more than 5% missed: fewer than 95% beat any slack
    s8 = json.loads((tmp_path / "fps_8.json").read_text())
    assert s8["miss_rate"] == 0 and s8["slack_p95_ms"] == 50.0
    assert s8["budgets"] == {"1": 0.0, "2": 1.0}

    # Resume: nothing played again; a changed input (max_frames) replays every FPS.
    played.clear()
    deploy.run("http://fake", exp, tmp_path, services={}, log=lambda s: None)
    assert played == []
    deploy.run(
        "http://fake",
        dataclasses.replace(exp, fps=(8,), until_miss_rate=None, max_frames=7),
        tmp_path,
        services={},
        log=lambda s: None,
    )
    assert played == [(8, s) for s in seeds_of("eval", 2).tolist()]


def test_an_interrupted_fps_resumes_at_its_next_episode(monkeypatch, tmp_path):
    played = _fake_sessions(monkeypatch, lambda fps, seed, o: o == 1 and seed % 2 == 1)
    live = _play._live_episode
    seeds = seeds_of("eval", 3).tolist()

    def interrupted(http, exp, fps, seed, key):
        if seed == seeds[2]:
            raise KeyboardInterrupt
        return live(http, exp, fps, seed, key)

    monkeypatch.setattr(_play, "_live_episode", interrupted)
    exp = deploy.Experiment(game=GAME, fps=(9,), episodes=3)
    with pytest.raises(KeyboardInterrupt):
        deploy.run("http://fake", exp, tmp_path, services={}, log=lambda s: None)
    # A half-written episode (its rows without its episode line) is dropped on resume.
    with (tmp_path / "fps_9.jsonl").open("a") as f:
        f.write(json.dumps({"seed": seeds[2], "frame": 0}) + "\n" + '{"seed": 20')
    monkeypatch.setattr(_play, "_live_episode", live)
    played.clear()
    deploy.run("http://fake", exp, tmp_path, services={}, log=lambda s: None)
    assert played == [(9, seeds[2])]
    s = json.loads((tmp_path / "fps_9.json").read_text())
    assert s["frames"] == [10, 10, 10] and s["returns"] == [5.0, 4.5, 5.0]
    rows = [json.loads(x) for x in (tmp_path / "fps_9.jsonl").read_text().splitlines()]
    assert [r["seed"] for r in rows] == [seeds[0]] * 10 + [seeds[1]] * 10 + [seeds[2]] * 10


def test_ladder_ends_where_the_server_refuses_the_fps(monkeypatch, tmp_path):
    from rtplan.processes import HTTPStatusError

    played = _fake_sessions(monkeypatch, lambda fps, seed, o: False)
    live = _play._live_episode

    def capped(http, exp, fps, seed, key):
        if fps > 11:
            raise HTTPStatusError(f"POST /v1/sessions: 422 fps {fps} above max_fps 11", 422)
        return live(http, exp, fps, seed, key)

    monkeypatch.setattr(_play, "_live_episode", capped)
    exp = deploy.Experiment(game=GAME, fps=(9, 10), episodes=1, until_miss_rate=0.05)
    result = deploy.run("http://fake", exp, tmp_path, services={}, log=lambda s: None)
    assert [f for f, _ in played] == [9, 10, 11] and result["highest_fps_within_miss_rate"] == 11
    assert not (tmp_path / "fps_12.jsonl").exists() and not (tmp_path / "fps_12.json").exists()
    # A given FPS the server refuses is an error, not the ladder's end.
    with pytest.raises(HTTPStatusError):
        deploy.run("http://fake", dataclasses.replace(exp, fps=(12,)), tmp_path, services={})


def test_censored_percentile():
    assert deploy.censored_percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert deploy.censored_percentile([1.0] * 19 + [math.inf], 95) == 1.0
    assert deploy.censored_percentile([1.0] * 18 + [math.inf] * 2, 95) is None
    assert deploy.censored_percentile([], 50) is None
    assert deploy.fps_ladder([8, 9, 10]) == (11, 1)
    assert deploy.fps_ladder([8, 10, 12]) == (14, 2)
    assert deploy.fps_ladder([9]) == (10, 1)


def test_placement_splits_cores_and_gpus():
    two = place_services([0, 1], [])
    assert two.env_server.cpus == (0,) and two.planner.cpus == (1,) and not two.planner.args
    many = place_services(range(16), ["0", "1"])
    assert many.env_server.cpus == (0,) and many.planner.cpus == tuple(range(1, 16))
    assert dict(many.env_server.env) == {"CUDA_VISIBLE_DEVICES": "0"}
    assert dict(many.planner.env) == {"CUDA_VISIBLE_DEVICES": "1"}
    assert many.planner.args == ("--device", "cuda:0")
    one = place_services([3], ["0"])
    assert one.env_server.cpus == one.planner.cpus == ()
    assert dict(one.env_server.env) == {"JAX_PLATFORMS": "cpu"}
    assert Placement().describe()["planner"] == {"cpus": [], "env": {}, "args": []}


# A given gate, and the latency its rows measured --------------------------------------------


def test_a_deploy_runs_rows_are_a_latency_source_that_misses_as_the_run_did(monkeypatch, tmp_path):
    """`gate.committed.latency` reads a deploy run's frame rows: at the run's own FPS the model
    misses each budget's planned actions as often as the run did."""
    from rtplan.gate.committed.latency import load_latency

    _fake_sessions(monkeypatch, lambda fps, seed, o: o in (1, 3) and seed % 2 == 0)
    exp = deploy.Experiment(game=GAME, fps=(9,), episodes=4)
    deploy.run("http://fake", exp, tmp_path, services={}, log=lambda s: None)
    summary = json.loads((tmp_path / "fps_9.json").read_text())
    model = load_latency(str(tmp_path / "fps_9.jsonl"), simulations={1: 2, 2: 4})
    assert summary["miss_rate"] == pytest.approx(0.2)
    assert model.miss_probability(2, 9) == pytest.approx(summary["miss_rate"])
    assert len(model.samples[2]) == summary["landings"] and 1 not in model.samples


def test_deploy_plays_a_given_gate_over_exactly_that_planner_and_gate(
    root, tmp_path, monkeypatch, capsys
):
    import contextlib
    import shutil

    from rtplan import processes
    from rtplan.gate.files import file_sha256

    gate = tmp_path / "tuned.msgpack"
    shutil.copyfile(gate_path(root, GAME), gate)
    served = {}

    @contextlib.contextmanager
    def fake_services(game, *, checkpoint_dir, **kw):
        served["files"] = sorted(p.name for p in (checkpoint_dir / GAME).iterdir())
        served["gate"] = file_sha256(checkpoint_dir / GAME / "gate.msgpack")
        yield {"http": "http://fake"}

    def fake_run(http, exp, out, *, services):
        served["out"], served["ident"] = out, services

    monkeypatch.setattr(processes, "services", fake_services)
    monkeypatch.setattr(deploy, "run", fake_run)
    argv = ["deploy", "--game", GAME, "--fps", "9", "--checkpoint-dir", str(root), "--no-pin"]
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--gate", str(gate)]) == 0
    assert served["files"] == ["gate.msgpack", "planner.msgpack"]
    assert served["gate"] == served["ident"]["gate_sha256"] == file_sha256(gate)
    assert served["out"].name == f"gate-{file_sha256(gate)[:12]}"
    # Refused before anything starts: with a forced k, a missing file, another planner's gate.
    capsys.readouterr()
    assert main([*argv, "--gate", str(gate), "--k", "2"]) == 2
    assert "--gate is played by the services deploy starts" in _err_line(capsys)
    assert main([*argv, "--gate", str(tmp_path / "none.msgpack")]) == 2
    missing = tmp_path / "none.msgpack"
    assert f"no gate checkpoint for {GAME} at {missing}" in _err_line(capsys)
    elsewhere = tmp_path / "elsewhere"
    save_planner(
        planner_path(elsewhere, GAME), CFG, Planner(CFG).init_params(jax.random.PRNGKey(1))
    )
    foreign = write_gate(elsewhere, GAME)
    assert main([*argv, "--gate", str(foreign)]) == 2
    assert "was trained over the planner with sha256" in _err_line(capsys)
