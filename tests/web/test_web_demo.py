"""`rtplan demo` (what `make demo` runs): the planner service and the env server in subprocesses,
a game that starts again when it ends, the lobby served until Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
from pathlib import Path

from support import write_checkpoints, write_planner

ROOT = Path(__file__).resolve().parents[2]
#: A line of uvicorn's access log: `INFO:     127.0.0.1:PORT - "GET /v1/games HTTP/1.1" 200 OK`.
ACCESS_LINE = re.compile(r'"(GET|POST|DELETE) /\S* HTTP/1\.1" \d{3}')


def get(url: str) -> dict:
    return json.load(urllib.request.urlopen(url, timeout=30))


def test_demo_serves_the_lobby_and_restarts_its_game_until_ctrl_c(tmp_path, page):
    # Snake with two budgets (the demo's k=2 and one more), as tests/rtplan/test_deploy_command.py
    # serves it: its planner service compiles every budget before the demo's game starts.
    root = write_checkpoints(tmp_path / "ckpt", ("speed-hex-v0",))
    write_planner(root, "snake-rt-v0", budgets=(1, 2), simulations=(2, 4))
    # Port 0: the env server binds a free port itself and the demo prints the lobby's address.
    cmd = [sys.executable, "-m", "rtplan", "demo", "--port", "0", "--fps", "20"]
    cmd += ["--frames", "6", "--checkpoint-dir", str(root), "--record-dir", str(tmp_path)]
    # The demo's arena keeps its database in the user data folder: here, the test's; it plays
    # the short seed set (2 episodes of 30 frames), so a new user's path fits in the test.
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "RTPLAN_ARENA_SEED_SET": "smoke"}
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 600  # the services compile the tiny planner first
        while not any("lobby at" in line for line in lines):
            assert proc.poll() is None, "".join(lines)
            assert time.monotonic() < deadline, "".join(lines)
            time.sleep(0.2)
        lobby = next(line for line in lines if "lobby at" in line)
        base = re.search(r"lobby at (http://127\.0\.0\.1:\d+)/", lobby).group(1)
        assert (
            "<title>rtplan · lobby</title>"
            in urllib.request.urlopen(base, timeout=30).read().decode()
        )
        # The demo's arena, over its env server, in the test's data folder; the lobby links it
        # and it plays the policy-only reference of the demo's game.
        said = next(line for line in lines if "arena at" in line)
        arena = re.search(r"arena at (http://127\.0\.0\.1:\d+)/arena", said).group(1)
        while True:  # named with the lobby, before it answers: it starts beside the planner
            try:
                health = get(f"{arena}/healthz")
                break
            except OSError:
                assert time.monotonic() < deadline, "".join(lines)
                time.sleep(0.2)
        assert health["status"] == "ok"
        assert json.load(urllib.request.urlopen(f"{base}/healthz"))["arena_url"] == arena
        assert (tmp_path / "data" / "rtplan" / "arena.db").is_file()
        while not (runs := json.load(urllib.request.urlopen(f"{arena}/v1/runs"))["runs"]):
            assert time.monotonic() < deadline, "".join(lines)  # entered after the lines above
            time.sleep(0.2)
        assert [(r["agent"], r["game"], r["tier"]) for r in runs] == [
            ("rtplan-policy-only", "snake-rt-v0", "standard")
        ]
        # Its planner services serve every game with a checkpoint: the demo's game in one (it
        # plays now), Hex in the other; each is offered as "compiling" until it is ready (the
        # lobby's answer may be up to `COMPILING_CACHE_S` old, so even the demo's game may say
        # so once; the second service may not answer yet: it starts at nice 19).
        while True:
            listed = json.load(urllib.request.urlopen(f"{base}/v1/games", timeout=30))["games"]
            planner = {g["id"]: g["planner"] for g in listed}
            shown = [planner[g] for g in ("snake-rt-v0", "speed-hex-v0")]
            starting = "did not answer"  # the second service, still starting
            assert all(
                p["available"] or p["compiling"] or starting in p["reason"] for p in shown
            ), planner
            if all(p["available"] for p in shown) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        served = {g for g, p in planner.items() if p["available"]}
        assert served == {"snake-rt-v0", "speed-hex-v0"}, listed
        # What the terminal says: the lobby as soon as the env server answers (before the
        # planner is ready), then each game compiling (budgets, an estimate) and ready, each in
        # its own service (the two services' lines interleave as they come).
        while not any("speed-hex-v0 ready in" in line for line in lines):
            assert time.monotonic() < deadline, "".join(lines)
            time.sleep(0.2)
        said = [line.rstrip() for line in lines if line.startswith("rtplan demo: ")]
        progress = [line for line in said if re.search(r" (compiling \(|ready in )", line)]
        shown = [re.sub(r"\d+ s\b", "N s", line) for line in progress]
        snake = [line for line in shown if "snake-rt-v0" in line]
        hex_ = [line for line in shown if "speed-hex-v0" in line]
        assert (snake, hex_) == (
            [
                "rtplan demo: snake-rt-v0 compiling (budgets 1, 2; 3 executables; about "
                "N s on a cold cache)",
                "rtplan demo: snake-rt-v0 ready in N s (1/1 games)",
            ],
            [
                "rtplan demo: speed-hex-v0 compiling (budgets 2, 4; 3 executables; about N s "
                "on a cold cache)",
                "rtplan demo: speed-hex-v0 ready in N s (1/1 games)",
            ],
        ), said
        # Nothing but the demo's game in its planner service: each service counts its own
        # games, and each says "1/1" above, so Snake and Hex are each alone in theirs. (Their
        # INFO log lines, which named the games, are left out of the terminal.)
        assert not any(re.match(r"\[planner(-others)?\] \S+ \S+ INFO ", line) for line in lines)
        lobby_at = said.index(next(line for line in said if "lobby at" in line))
        snake_ready = next(line for line in said if "snake-rt-v0 ready in" in line)
        assert lobby_at < said.index(snake_ready), said  # before the demo's game is ready
        assert any(re.search(r"rtplan demo: started in \d+ s", line) for line in lines)
        # The address it prints to watch: /tv, which shows the demo's (featured) game.
        assert any(f"watch at {base}/tv" in line for line in lines), lines
        featured = json.load(urllib.request.urlopen(f"{base}/v1/featured", timeout=30))
        assert featured["session"]["game"] == "snake-rt-v0", featured
        # The demo's game: the planner agent at the forced k (no gate here), 6 frames, then the
        # next game: the lobby lists both.
        while True:
            listed = json.load(urllib.request.urlopen(f"{base}/v1/sessions", timeout=30))[
                "sessions"
            ]
            # Besides the arena's ranked episodes (its reference's, sealed).
            listed = [s for s in listed if not s["sealed"]]
            if len(listed) >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert len(listed) >= 2, listed
        assert {(s["game"], s["agent"], tuple(s["ks"])) for s in listed} == {
            ("snake-rt-v0", "planner", (2,))
        }
        assert any(s["status"] in ("finished",) for s in listed), listed
        # A new user's path (docs/arena.md): register, run the example agent --ranked, and find
        # its row on /arena beside the reference's, with its timing profile.
        token = subprocess.run(
            [sys.executable, "-m", "rtplan", "arena", "register", "newcomer", "--version", "1",
             "--arena", arena],
            capture_output=True, text=True, timeout=120, cwd=ROOT, env=env, check=True,
        ).stdout.strip()  # fmt: skip
        played = subprocess.run(
            [sys.executable, "-m", "rtplan.examples.random_agent", "--ranked", "--arena", arena,
             "--game", "snake-rt-v0"],
            capture_output=True, text=True, timeout=300, cwd=ROOT,
            env={**env, "RTPLAN_ARENA_TOKEN": token},
        )  # fmt: skip
        assert played.returncode == 0, played.stdout + played.stderr
        while any(r["status"] == "running" for r in get(f"{arena}/v1/runs")["runs"]):
            assert time.monotonic() < deadline, get(f"{arena}/v1/runs")
            time.sleep(0.5)
        page.goto(f"{arena}/arena?game=snake-rt-v0&tier=standard&seed_set=smoke")
        page.locator("#board tbody tr").nth(1).wait_for(timeout=20_000)
        headers = page.locator("#board thead th").all_text_contents()
        rows = {
            r[headers.index("agent")]: dict(zip(headers, r, strict=True))
            for r in (
                row.locator("td").all_text_contents()
                for row in page.locator("#board tbody tr").all()
            )
        }
        assert set(rows) == {"newcomer", "rtplan-policy-only"}, rows
        assert rows["newcomer"]["on time"].endswith("%") and rows["newcomer"]["slack p50 ms"]
        assert rows["newcomer"]["vs best reference ± SE"].startswith(("+", "-", "−"))
    finally:
        proc.send_signal(signal.SIGINT)
        # The services get 10 s together to stop before they are killed; a clean-up still
        # running 60 s after the signal prints every thread's stack and exits 1
        # (`rtplan.processes.stop_on_signals`), so a hang fails here with its diagnosis.
        rc = proc.wait(timeout=120)
    reader.join(timeout=10)
    assert rc == 0, "".join(lines)
    assert "rtplan demo: stopped" in "".join(lines)
    # Its terminal holds what a person needs: no access log (uvicorn's line per HTTP request,
    # about 4 a second per open page: 92% of a demo's lines; `--access-log` brings it back),
    # and no traceback.
    access = [line for line in lines if ACCESS_LINE.search(line)]
    assert not access, "".join(access[:5])
    assert not any("Traceback" in line for line in lines), "".join(lines)
    # ... nor what it reads and says in its own words, nor uvicorn's start-up and shutdown.
    quiet = ("planner service bound to", "planner service listening on", "Application startup")
    assert not any(q in line for q in quiet for line in lines), "".join(lines)
    # The services are gone with it.
    try:
        urllib.request.urlopen(base, timeout=5)
    except OSError:
        pass
    else:
        raise AssertionError("the env server still answers after Ctrl-C")
    assert list(tmp_path.glob("snake-rt-v0_*.jsonl"))  # its games were recorded


def test_the_demo_shows_a_services_traceback_as_its_errors_line_and_leaves_out_noise(capsys):
    """`rtplan demo`'s view of its services' lines (`_DemoEcho`): a real traceback (two chained
    exceptions) becomes each exception's line, uvicorn's start-up and the planner's ports are
    left out, progress becomes the demo's own line; `--verbose` shows every line as it comes."""
    from rtplan.live import _DemoEcho

    try:
        try:
            {}["planner"]
        except KeyError:
            raise ValueError("the session's planner went away") from None
    except ValueError:
        chained = traceback.format_exc()
    try:
        try:
            {}["frame"]
        except KeyError as e:
            raise RuntimeError("tick failed") from e
    except RuntimeError:
        caused = traceback.format_exc()
    said = [
        "INFO:     Started server process [1]",
        "INFO:     Application startup complete.",
        "planner service bound to 127.0.0.1:5 (compiling)",
        "2026-12-07 20:44:32,551 INFO matplotlib.font_manager generated new fontManager",
        "2026-12-07 20:44:33,713 INFO planner_service compiling 5 options and gates of snake-rt-v0",
        "2026-12-07 20:49:01,002 WARNING planner_service planner service: Plan: the caller had "
        "gone",
        "ERROR rtplan.server: session 1 failed",
        *chained.splitlines(),
        "planner service: snake-rt-v0 ready in 3 s (1/1 games)",
        "ERROR rtplan.server: session 2 failed",
        *caused.splitlines(),
        "WARNING rtplan.server: something a person should read",
    ]
    echo = _DemoEcho()
    for line in said:
        echo("env-server" if "planner service" not in line else "planner", line)
    hint = "  (rtplan demo --verbose shows the traceback)"
    assert capsys.readouterr().out.splitlines() == [
        "[planner] 2026-12-07 20:49:01,002 WARNING planner_service planner service: Plan: the "
        "caller had gone",
        "[env-server] ERROR rtplan.server: session 1 failed",
        f"[env-server] ValueError: the session's planner went away{hint}",
        "rtplan demo: snake-rt-v0 ready in 3 s (1/1 games)",
        "[env-server] ERROR rtplan.server: session 2 failed",
        f"[env-server] KeyError: 'frame'{hint}",
        f"[env-server] RuntimeError: tick failed{hint}",
        "[env-server] WARNING rtplan.server: something a person should read",
    ]
    verbose = _DemoEcho(verbose=True)
    for line in said:
        verbose("env-server", line)
    assert capsys.readouterr().out.splitlines() == [f"[env-server] {line}" for line in said]


def test_the_demo_plays_the_first_game_that_ships_a_gate(tmp_path):
    from rtplan.harness.checkpoint import gate_path
    from rtplan.live import demo_game

    assert demo_game(tmp_path) == "snake-rt-v0"  # no gate anywhere: Snake, forced k
    gate_path(tmp_path, "pacman-rt-v0").parent.mkdir()
    gate_path(tmp_path, "pacman-rt-v0").write_bytes(b"")
    assert demo_game(tmp_path) == "pacman-rt-v0"
    gate_path(tmp_path, "snake-rt-v0").parent.mkdir()
    gate_path(tmp_path, "snake-rt-v0").write_bytes(b"")
    assert demo_game(tmp_path) == "snake-rt-v0"
    gate_path(tmp_path, "tetris-rt-v0").parent.mkdir()
    gate_path(tmp_path, "tetris-rt-v0").write_bytes(b"")
    assert demo_game(tmp_path) == "tetris-rt-v0"


def test_the_demo_plays_the_showcase_by_its_gate_and_forces_k_only_without_one(tmp_path):
    """`DemoGame.choose`, which the web demo and the headless one both start from: no game named
    is the showcase (`demo_game`), whose gate picks the budgets (no `k` in the session); a game
    with no gate plays the forced k."""
    from rtplan.harness.checkpoint import checkpoint_root, gate_path, planner_path
    from rtplan.live import DemoGame

    for game in ("snake-rt-v0", "tetris-rt-v0"):
        planner_path(tmp_path, game).parent.mkdir()
        planner_path(tmp_path, game).write_bytes(b"")
    snake = DemoGame.choose(None, tmp_path, k=8)
    assert (snake.game, snake.gated, snake.checkpoint_dir) == ("snake-rt-v0", False, tmp_path)
    assert snake.session == {"game": "snake-rt-v0", "agent": "planner", "k": 8}
    assert "forced k=8" in snake.played_by
    gate_path(tmp_path, "tetris-rt-v0").write_bytes(b"")
    tetris = DemoGame.choose(None, tmp_path, k=8)
    assert (tetris.game, tetris.gated) == ("tetris-rt-v0", True)
    assert tetris.session == {"game": "tetris-rt-v0", "agent": "planner"}  # the gate picks
    assert tetris.played_by == "its gate's budgets"
    assert DemoGame.choose("snake-rt-v0", tmp_path, k=8) == snake  # a named game: as asked
    # What ships (the checkout's checkpoints/, or an installed package's copy): a gated Tetris.
    shipped = DemoGame.choose(None, None, k=2)
    assert (shipped.game, shipped.gated) == ("tetris-rt-v0", True)
    assert shipped.checkpoint_dir == checkpoint_root()


def test_the_demo_planner_compiles_without_fusion_emitters_unless_told_otherwise(monkeypatch):
    from rtplan.live import DEMO_XLA_FLAGS, demo_placement

    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    place = demo_placement()
    assert dict(place.planner.env) == {"XLA_FLAGS": f"--xla_dump_to=/tmp/x {DEMO_XLA_FLAGS}"}
    assert place.env_server.env == ()  # the env server's compiles are its own
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=true")
    assert dict(demo_placement().planner.env) == {"XLA_FLAGS": "--xla_cpu_use_fusion_emitters=true"}
