"""The command line: one error wrapper (one line, an exit code), flags from settings, one root."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from rtplan.cli import main
from rtplan.commands import USAGE, CommandError, run_command
from rtplan.harness.checkpoint import checkpoint_root
from rtplan.harness.config import add_settings_flags, settings_overrides
from rtplan.planner_service.settings import PlannerServiceSettings
from rtplan.server.settings import Settings
from support import free_port

ROOT = Path(__file__).resolve().parents[2]


def _error_lines(err: str, command: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(f"rtplan {command}: error: ")]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train-planner", "--game", "nope-v0"], "unknown game 'nope-v0'"),
        (["calibrate", "--game", "nope-v0"], "unknown game 'nope-v0'"),
        (
            ["gtp", "--planner", "no/such/planner.msgpack"],
            "no planner checkpoint for speed-go-v0 at no/such/planner.msgpack: train one",
        ),
        (["gtp", "--game", "snake-rt-v0"], "--game must be speed-go-v0"),
        (["eval", "--game", "snake-rt-v0", "--episodes", "1"], "--episodes must be >= 2"),
        (["ship-gate", "--run", "no/such/run"], "no/such/run"),
    ],
)
def test_known_errors_are_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == USAGE
    err = capsys.readouterr().err
    (line,) = _error_lines(err, argv[0])
    assert message in line, err
    assert "Traceback" not in err


def test_a_bad_checkpoint_file_is_one_line_in_a_real_process(tmp_path):
    bad = tmp_path / "planner.msgpack"
    bad.write_bytes(b"not a checkpoint")
    cmd = [sys.executable, "-m", "rtplan", "calibrate", "--game", "snake-rt-v0"]
    cmd += ["--checkpoint", str(bad), "--out", str(tmp_path / "out")]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == USAGE, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    (line,) = _error_lines(result.stderr, "calibrate")
    assert str(bad) in line


def test_the_wrapper_keeps_the_traceback_of_a_bug_and_on_request(monkeypatch):
    def bug(args):
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        run_command("x", bug, argparse.Namespace())

    def refused(args):
        raise ValueError("bad value")

    assert run_command("x", refused, argparse.Namespace()) == USAGE
    monkeypatch.setenv("RTPLAN_TRACEBACK", "1")
    with pytest.raises(ValueError, match="bad value"):
        run_command("x", refused, argparse.Namespace())


def test_a_command_error_carries_its_exit_code(capsys):
    def failed(args):
        raise CommandError("it ran and failed", code=1)

    assert run_command("eval", failed, argparse.Namespace()) == 1
    assert capsys.readouterr().err == "rtplan eval: error: it ran and failed\n"


def test_services_parse_their_own_flags_built_from_their_settings(capsys):
    with pytest.raises(SystemExit):
        main(["env-server", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name, field in Settings.model_fields.items():
        if name == "agent_token":  # a secret is no flag
            assert "--agent-token" not in text
            continue
        flag = "--" + name.replace("_", "-")
        assert flag in text and " ".join(field.description.split()) in text, name
        assert f"RTPLAN_SERVER_{name.upper()}" in text
    with pytest.raises(SystemExit):
        main(["planner-service", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default 2; env RTPLAN_PLANNER_MAX_CONCURRENT)" in text
    assert f"(default {checkpoint_root()};" in text


class _Toy(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TOY_", frozen=True)

    port: int = Field(50051, description="a port")
    rate: float = Field(9.0, description="a rate")
    folder: Path = Field(Path("here"), description="a folder")
    address: str | None = Field(None, description="an address")
    games: tuple[str, ...] = Field(("a",), description="games")
    fast: bool = Field(False, description="go fast")


def test_settings_flags_take_help_defaults_and_types_from_the_settings(monkeypatch):
    parser = argparse.ArgumentParser()
    assert add_settings_flags(parser, _Toy) == list(_Toy.model_fields)
    helps = {a.dest: a.help for a in parser._actions}
    assert helps["port"] == "a port (default 50051; env TOY_PORT)"
    assert helps["address"] == "an address (default unset; env TOY_ADDRESS)"
    assert helps["games"] == "games (default a; env TOY_GAMES)"
    args = parser.parse_args(["--port", "7", "--folder", "x", "--games", "b", "c", "--fast"])
    given = settings_overrides(_Toy, args)
    assert given == {"port": 7, "folder": Path("x"), "games": ("b", "c"), "fast": True}
    monkeypatch.setenv("TOY_RATE", "4.5")  # a flag left out leaves the environment its say
    toy = _Toy(**given)
    assert (toy.port, toy.rate, toy.folder, toy.games, toy.fast) == (
        7,
        4.5,
        Path("x"),
        ("b", "c"),
        True,
    )

    class _Undocumented(BaseSettings):
        port: int = 1

    with pytest.raises(TypeError, match="no description"):
        add_settings_flags(argparse.ArgumentParser(), _Undocumented)


def test_planner_service_games_take_a_list_or_commas():
    from rtplan.planner_service.__main__ import build_parser

    for argv in (["--games", "a,b"], ["--games", "a", "b"]):
        args = build_parser().parse_args(argv)
        assert PlannerServiceSettings(**settings_overrides(PlannerServiceSettings, args)).games == (
            "a",
            "b",
        )
    assert PlannerServiceSettings(games="a, b").games == ("a", "b")


def test_one_checkpoint_root_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for var in ("RTPLAN_SERVER_CHECKPOINT_DIR", "RTPLAN_PLANNER_CHECKPOINT_DIR"):
        monkeypatch.delenv(var, raising=False)
    assert checkpoint_root() == ROOT / "checkpoints"
    assert checkpoint_root(tmp_path) == tmp_path
    assert (
        Settings().checkpoint_dir == PlannerServiceSettings().checkpoint_dir == ROOT / "checkpoints"
    )
    assert (checkpoint_root() / "snake-rt-v0" / "planner.msgpack").is_file()
    assert os.getcwd() == str(tmp_path)


def test_a_shipped_folder_is_the_checkouts_else_the_installed_packages(monkeypatch):
    """The rule both resolvers share (`harness.assets.shipped_dir`): the folder beside the
    packages when it exists (a checkout), else the package data a wheel carries."""
    from rtplan import harness
    from rtplan.server._routes_pages import find_web_dir

    assert checkpoint_root() == ROOT / "checkpoints" and find_web_dir() == ROOT / "web"
    monkeypatch.setattr(harness.assets, "CHECKOUT", ROOT / "no-checkout-here")
    # What an installed wheel finds (setup.py copies the folders there; a checkout has none).
    assert checkpoint_root() == ROOT / "rtplan" / "harness" / "_assets" / "checkpoints"
    assert find_web_dir() is None  # no index.html in server/_assets/web of a checkout
    assert checkpoint_root(ROOT / "x") == ROOT / "x"  # the override first, always


def test_every_service_takes_the_checkpoint_and_web_overrides(tmp_path):
    from rtplan.planner_service.__main__ import build_parser as planner_parser
    from rtplan.server.__main__ import _parser as server_parser

    given = ["--checkpoint-dir", str(tmp_path / "ckpt"), "--web-dir", str(tmp_path / "web")]
    server = Settings(**settings_overrides(Settings, server_parser().parse_args(given)))
    assert (server.checkpoint_dir, server.web_dir) == (tmp_path / "ckpt", tmp_path / "web")
    args = planner_parser().parse_args(given[:2])
    planner = PlannerServiceSettings(**settings_overrides(PlannerServiceSettings, args))
    assert planner.checkpoint_dir == tmp_path / "ckpt"


@pytest.mark.parametrize("headless", [True, False])
def test_the_demo_hands_its_overrides_to_the_demo_it_runs(headless, monkeypatch):
    import rtplan.live

    seen = {}
    runner = "run_demo" if headless else "run_web_demo"
    monkeypatch.setattr(rtplan.live, runner, lambda game, **kw: seen.update(kw, game=game) or 0)
    argv = ["demo", "--checkpoint-dir", "c", "--web-dir", "w", "--record-dir", "r"]
    argv += ["--headless"] if headless else ["--port", "0"]  # 8000 may be taken on a test box
    assert main(argv) == 0
    assert (seen["checkpoint_dir"], seen["web_dir"], seen["record_dir"]) == ("c", "w", "r")
    # No game named: the same showcase with or without --headless (`DemoGame.choose`), its k
    # the one for a game with no gate.
    assert (seen["game"], seen["k"]) == (None, 2)
    # The access log is off unless asked for; headless, the lobby takes any free port unless
    # --port names one (and the web demo takes the one named).
    assert (seen["access_log"], seen["port"]) == (False, 0)
    port = free_port()
    assert main([*argv, "--access-log", "--port", str(port)]) == 0
    assert (seen["access_log"], seen["port"]) == (True, port)
    if not headless:
        assert seen["planner_games"] is None  # every game with a checkpoint
        assert main([*argv, "--planner-games", "tetris-rt-v0,snake-rt-v0"]) == 0
        assert seen["planner_games"] == ["tetris-rt-v0", "snake-rt-v0"]


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--every", "5"], "--every is for --headless only"),
        (["--no-example-agent"], "--no-example-agent is for --headless only"),
        (["--headless", "--planner-games", "all"], "--planner-games is for the web demo"),
    ],
)
def test_the_demo_refuses_a_flag_its_mode_would_ignore(argv, flag, capsys, monkeypatch):
    import rtplan.live

    ran = []
    for runner in ("run_demo", "run_web_demo"):
        monkeypatch.setattr(rtplan.live, runner, lambda *a, **kw: ran.append(kw) or 0)
    assert main(["demo", "--port", "0", *argv]) == USAGE
    (line,) = _error_lines(capsys.readouterr().err, "demo")
    assert flag in line and not ran


@pytest.mark.parametrize("headless", [False, True])
def test_the_demo_refuses_a_port_in_use_in_one_line_before_starting_anything(headless, tmp_path):
    """A real socket holds the port: the demo exits 2 at once with one line that names the port
    and the flag that moves it (it used to start the planner service, then die after ~12 s
    with the env server's traceback and a native abort). Headless, --port is honoured too."""
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        cmd = [sys.executable, "-m", "rtplan", "demo", "--port", str(port)]
        cmd += ["--headless"] if headless else []
        start = time.monotonic()
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == USAGE, result.stderr
    assert result.stderr.splitlines() == [
        f"rtplan demo: error: port {port} cannot be bound (Address already in use); "
        "pass --port N to use another (0: any free)"
    ], result.stderr
    assert result.stdout == ""  # nothing started: not even the "starting ..." line
    assert time.monotonic() - start < 60


def test_the_services_started_for_a_demo_get_its_overrides(monkeypatch, tmp_path):
    """`rtplan.processes.services` passes the folders to the env server and the planner
    service (the processes faked: what they would print is what they are asked for)."""
    from rtplan import processes
    from rtplan.processes import _services

    argvs, nices = {}, {}
    said = {
        "planner service bound to": "planner service bound to 127.0.0.1:1 (compiling)",
        "rtplan env server:": "rtplan env server: http on 127.0.0.1:2 (REST), "
        "gRPC Env API on 127.0.0.1:3 (replays in /data/rtplan/replays)",
    }

    class FakeChild:
        def __init__(self, name, argv, *, echo=True, cpus=None, env=None, nice=0):
            argvs[name] = list(argv)
            nices[name] = nice

        def wait_for(self, text, timeout, stopping=None):
            return said.get(text, text)

        running = False

        def terminate(self):
            pass

        def kill(self):
            pass

    monkeypatch.setattr(_services, "Child", FakeChild)
    ckpt, web = tmp_path / "ckpt", tmp_path / "web"
    with processes.services("snake-rt-v0", checkpoint_dir=ckpt, web_dir=web) as addr:
        assert addr["http"] == "http://127.0.0.1:2"
        assert (addr["grpc"], addr["replays"]) == ("127.0.0.1:3", "/data/rtplan/replays")
    env, planner = argvs["env-server"], argvs["planner"]
    assert "--access-log" not in env  # off unless asked for
    assert env[env.index("--checkpoint-dir") + 1] == str(ckpt)
    assert env[env.index("--web-dir") + 1] == str(web)
    assert planner[planner.index("--checkpoint-dir") + 1] == str(ckpt)
    assert planner[planner.index("--games") + 1] == "snake-rt-v0"
    # The planner service may serve more games than the env server compiles at start-up.
    served = ["snake-rt-v0", "speed-go-v0"]
    with processes.services("snake-rt-v0", planner_games=served, checkpoint_dir=ckpt):
        pass
    env, planner = argvs["env-server"], argvs["planner"]
    assert planner[planner.index("--games") + 1] == "snake-rt-v0,speed-go-v0"
    assert env[env.index("--preload") + 1 : env.index("--planner-address")] == ["snake-rt-v0"]
    with processes.services("snake-rt-v0", access_log=True):
        pass
    assert "--access-log" in argvs["env-server"]
    # The demo's: the games after its own are another planner service's, at the nice value it
    # names, and the env server routes each game to the service that serves it ...
    argvs.clear()
    with processes.services("snake-rt-v0", planner_games=served, background_nice=19) as addr:
        pass
    planner, others, env = argvs["planner"], argvs["planner-others"], argvs["env-server"]
    # Its port is picked beforehand: nothing waits for a service at nice 19 to start.
    port = int(others[others.index("--port") + 1])
    assert port > 0 and addr["planner"] == f"127.0.0.1:1;127.0.0.1:{port}"
    assert planner[planner.index("--games") + 1] == "snake-rt-v0"
    assert others[others.index("--games") + 1] == "speed-go-v0"
    assert (nices["planner"], nices["planner-others"]) == (0, 19)
    assert env[env.index("--planner-address") + 1] == addr["planner"]
    assert "--background-nice" not in planner + others and "--gated-only" not in planner
    # Played gated: the showcase's service serves it gated only, its forced budgets are the
    # other service's, after its own games.
    argvs.clear()
    with processes.services("snake-rt-v0", planner_games=served, background_nice=19, gated=True):
        pass
    planner, others = argvs["planner"], argvs["planner-others"]
    assert "--gated-only" in planner and "--gated-only" not in others
    assert others[others.index("--games") + 1] == "speed-go-v0,snake-rt-v0"
    # ... and with no other game, there is no other service.
    argvs.clear()
    with processes.services("snake-rt-v0", background_nice=19):
        pass
    assert "planner-others" not in argvs and "--background-nice" not in argvs["planner"]


def test_replay_gif_writes_the_frames_asked_for_at_the_boards_size(tmp_path, capsys):
    """`rtplan replay-gif`: every 3rd frame of the 11, at most 3, each the board and the strip."""
    import jax
    from PIL import Image, ImageSequence

    from rtplan.games import make
    from rtplan.games.render import render
    from rtplan.server.replay import ReplayFile
    from rtplan.server.replay_gif import STRIP_CHART, STRIP_TEXT, board_size
    from support import REPLAY_V1

    out = tmp_path / "x.gif"
    argv = ["replay-gif", str(REPLAY_V1), "--out", str(out), "--every", "3", "--max-frames", "3"]
    assert main(argv) == 0
    assert f"wrote {out}: 3 frames" in capsys.readouterr().out
    rf = ReplayFile.read(REPLAY_V1)
    game = make(rf.game_id)
    width, height = board_size(render(game, game.init(jax.random.PRNGKey(0))))
    gif = Image.open(out)
    assert gif.size == (max(width, 160), height + STRIP_TEXT + STRIP_CHART)
    assert sum(1 for _ in ImageSequence.Iterator(gif)) == 3
    assert main(["replay-gif", str(REPLAY_V1), "--out", str(out)]) == 0
    assert sum(1 for _ in ImageSequence.Iterator(Image.open(out))) == len(rf.frames) + 1
    assert main(["replay-gif", str(tmp_path / "nope.jsonl")]) == USAGE


def _help(argv: list[str], capsys) -> str:
    """The help `main(argv)` prints (argparse's own exits, the kind's returns 0)."""
    try:
        assert main(argv) == 0
    except SystemExit as e:
        assert e.code == 0
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    ("game", "hidden", "kind_only", "other_kind"),
    [
        ("snake-rt-v0", "--gate-hidden GATE_HIDDEN Hidden units of each gate head. (default: 256)",
         "--meta-steps", "--plies"),
        ("speed-hex-v0", "--gate-hidden GATE_HIDDEN GRU state size. (default: 128)",
         "--plies", "--meta-steps"),
    ],
)  # fmt: skip
def test_train_gate_help_is_the_games_kinds(game, hidden, kind_only, other_kind, capsys):
    """`train-gate --game G --help` lists G's kind's flags with its meanings and defaults, the
    game given before or after `--help`."""
    for argv in (["train-gate", "--game", game, "--help"], ["train-gate", "-h", "--game", game]):
        text = _help(argv, capsys)
        assert hidden in text and kind_only in text and other_kind not in text
    defaults = {"snake-rt-v0": (1000, 32), "speed-hex-v0": (200, 16)}[game]
    assert f"whole run. (default: {defaults[0]})" in text
    assert f"(default: {defaults[1]})" in text.rsplit("--num-envs NUM_ENVS", 1)[1][:200]
    # The clock gate trains in one process: no flags of a multi-process job in its help.
    assert ("--coordinator" in text) is (game == "snake-rt-v0")


def test_train_gate_help_without_a_game_names_each_kinds_default(capsys):
    text = _help(["train-gate", "--help"], capsys)
    assert "committed games: Hidden units of each gate head (default: 256); clock games: GRU " \
        "state size (default: 128)" in text  # fmt: skip
    assert "(default: committed games 1000, clock games 200)" in text
    assert "--meta-steps" in text and "--plies" in text
