"""docker-compose.yml and the Dockerfile: two profiles (gpu, cpu) of the env server, the planner
service and the arena, ready only when healthy, in an image that runs as a non-root user.

The default suite needs no Docker engine (`make compose-check`, deploy/compose_check.sh, runs
the cpu profile in real containers), so the compose file is checked by what it means: each
profile's commands parse with the real command-line parsers into valid settings, the env server
reaches the planner by its network alias and port and the arena the env server, the health
checks run `rtplan health` against the ports the services bind, only the gpu profile reserves
GPUs, the images install an extra that exists, and the env server, the arena and the deploy
profiles read their keys from one secret whose file no commit holds. Where `docker-compose` (or
`docker compose`) is installed, it validates the file against its schema too, offline. Last,
the cpu profile's command lines and health checks run as plain processes: the planner fails its
check while compiling and passes once SERVING, then the env server starts with a key file,
passes its own check, reaches the planner, and creates a session only for a key; then the
arena passes its check and hands out a ranked episode, created on the env server with the file's
key, to be joined at the public address its command names.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from rtplan.arena.__main__ import _parser as arena_parser
from rtplan.arena.__main__ import _refusal as arena_refusal
from rtplan.arena.envs import EnvServers
from rtplan.arena.settings import ArenaSettings
from rtplan.cli import build_parser as rtplan_parser
from rtplan.commands.health import TIMEOUT_S
from rtplan.planner_service.__main__ import build_parser as planner_parser
from rtplan.planner_service.settings import PlannerServiceSettings
from rtplan.processes import Child, HTTPStatusError, http_json, stop_all
from rtplan.processes._services import _ENV_BOUND, _PLANNER_BOUND
from rtplan.server.__main__ import _parser as server_parser
from rtplan.server.settings import Settings
from support import (
    compose_file,
    compose_profile,
    compose_seconds,
    compose_services,
    gpu_ids,
    service_settings,
)

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ("gpu", "cpu")
#: The arena's line once it serves (`rtplan arena serve`).
_ARENA_BOUND = re.compile(r"rtplan arena: http on \S+:(\d+)")


def _name(service: dict) -> str:
    (name,) = [n for n, s in compose_file()["services"].items() if s == service]
    return name


def test_the_profiles_share_one_definition_of_commands_checks_ports_and_volumes():
    """Both profiles are the shared x-planner / x-env-server / x-arena definitions (YAML
    anchors): what a profile sets beyond them is only its image, device, GPU reservation and
    dependency."""
    compose = compose_file()
    assert set(compose["services"]) == {
        "planner-gpu",
        "env-server-gpu",
        "arena-gpu",
        "planner-cpu",
        "env-server-cpu",
        "arena-cpu",
        "deploy-gpu",
        "deploy-cpu",
    }
    shared = {
        "planner-service": compose["x-planner"],
        "env-server": compose["x-env-server"],
        "arena": compose["x-arena"],
    }
    own = {"build", "image", "profiles", "environment", "deploy", "depends_on"}
    for profile in PROFILES:
        for service in compose_services(profile).values():
            base = shared[service["command"][1]]
            for key, value in base.items():
                if key != "environment":
                    assert service[key] == value, (profile, key)
            assert set(service) - set(base) <= own, (profile, set(service) - set(base))


@pytest.mark.parametrize("profile", PROFILES)
def test_the_deploy_profile_runs_rtplan_deploy_against_its_kinds_services(profile, monkeypatch):
    """`<kind>-deploy` adds one service: `rtplan deploy --remote` against that kind's env server
    and planner (by their network aliases and ports), started once the env server is healthy,
    writing into the results volume; its command parses with the real parser. (The remote
    experiment itself is played against real services in tests/rtplan/test_deploy_command.py.)"""
    compose = compose_file()
    (name,) = [n for n, s in compose["services"].items() if f"{profile}-deploy" in s["profiles"]]
    service = compose["services"][name]
    assert service["profiles"] == [f"{profile}-deploy"]
    assert service["command"] == compose["x-deploy"]["command"]
    assert service["image"] == f"rtplan:{profile}"
    planner, env = compose_profile(profile)
    assert service["depends_on"] == {_name(env): {"condition": "service_healthy"}}
    args = rtplan_parser().parse_args(service["command"][1:])
    assert args.command == "deploy" and args.fps == [8, 9, 10, 11, 12]
    e = service_settings(Settings, server_parser, env, monkeypatch)
    p = service_settings(PlannerServiceSettings, planner_parser, planner, monkeypatch)
    remote = urllib.parse.urlsplit(args.remote)
    assert remote.hostname in env["networks"]["default"]["aliases"] and remote.port == e.http_port
    host, _, port = args.planner.rpartition(":")
    assert host in planner["networks"]["default"]["aliases"] and int(port) == p.port
    mounts = {m.split(":")[1]: m.split(":")[0] for m in service["volumes"]}
    assert mounts["/app/results"] == "results" and args.out.startswith("/app/results/")


@pytest.mark.parametrize("profile", PROFILES)
def test_each_profile_parses_into_valid_settings_and_wires_the_env_server_to_its_planner(
    profile, monkeypatch
):
    planner, env = compose_profile(profile)
    p = service_settings(PlannerServiceSettings, planner_parser, planner, monkeypatch)
    assert p.device == {"gpu": "cuda:0", "cpu": "cpu"}[profile]  # cuda:0: the one GPU it sees
    e = service_settings(Settings, server_parser, env, monkeypatch)
    host, _, port = e.planner_address.rpartition(":")
    assert int(port) == p.port and host in planner["networks"]["default"]["aliases"]
    assert p.host == e.host == "0.0.0.0"  # reachable from the other container
    published = {tuple(map(int, _filled(x, {}).split(":"))) for x in env["ports"]}
    assert published == {(e.http_port, e.http_port), (e.grpc_port, e.grpc_port)}
    assert "ports" not in planner  # only the env server talks to it
    assert env["depends_on"] == {_name(planner): {"condition": "service_healthy"}}
    # Replays and results are named volumes, mounted where the env server writes and reads them.
    mounts = {m.split(":")[1]: m.split(":")[0] for m in env["volumes"]}
    assert mounts[str(e.record_dir)] == "replays" and mounts[str(e.results_dir)] == "results"
    assert {"replays", "results"} <= set(compose_file()["volumes"])


def _filled(value: str, variables: dict[str, str]) -> str:
    """A compose string with its `${NAME:-default}`s filled in as compose fills them: the
    variable where it is set and not empty, else the default."""
    return re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: variables.get(m[1]) or m[2], value)


def _arena_settings(arena: dict, monkeypatch, variables: dict[str, str] | None = None):
    """The arena's settings from its command line, its `${...}`s filled as compose fills them."""
    filled = {**arena, "command": [_filled(a, variables or {}) for a in arena["command"]]}
    return service_settings(ArenaSettings, arena_parser, filled, monkeypatch)


@pytest.mark.parametrize("profile", PROFILES)
def test_the_arena_plays_on_its_env_server_and_sends_agents_to_its_published_env_api(
    profile, monkeypatch
):
    """The arena's command parses with its own parser into valid settings: it binds 0.0.0.0 on
    the port it publishes, keeps its SQLite database in the named volume arena, starts once the
    env server is healthy, creates sessions at the env server's alias and HTTP port, and tells
    agents to join at the Env API as this machine publishes it (`localhost` and the port of
    RTPLAN_HOST_GRPC_PORT; RTPLAN_HOST_NAME for agents on other machines). It runs the
    profile's image and reserves no GPU."""
    planner, env = compose_profile(profile)
    arena = compose_services(profile)["arena"]
    e = service_settings(Settings, server_parser, env, monkeypatch)
    a = _arena_settings(arena, monkeypatch)
    assert a.host == "0.0.0.0" and not a.open
    (published,) = arena["ports"]
    found = re.fullmatch(r"\$\{RTPLAN_HOST_ARENA_PORT:-(\d+)\}:(\d+)", published)
    assert found and int(found[1]) == int(found[2]) == a.port
    assert "arena" in arena["networks"]["default"]["aliases"]
    assert arena["depends_on"] == {_name(env): {"condition": "service_healthy"}}
    assert arena["image"] == env["image"] == planner["image"]
    assert gpu_ids(arena) == [] and "deploy" not in arena
    # SQLite in the named volume, mounted at the database's folder.
    assert a.database.startswith("sqlite:////")
    folder = str(Path(a.database.removeprefix("sqlite:///")).parent)
    mounts = {m.split(":")[1]: m.split(":")[0] for m in arena["volumes"]}
    assert mounts == {folder: "arena"} and "arena" in compose_file()["volumes"]
    # One env server: its alias and HTTP port for the arena, the host's Env API for agents.
    (server,) = EnvServers(a.env.split(",")).servers
    url = urllib.parse.urlsplit(server.url)
    assert url.hostname in env["networks"]["default"]["aliases"] and url.port == e.http_port
    assert server.public_grpc == f"localhost:{e.grpc_port}"
    assert f"${{RTPLAN_HOST_GRPC_PORT:-{e.grpc_port}}}:{e.grpc_port}" in env["ports"]
    moved = {"RTPLAN_HOST_NAME": "lab-7.example.org", "RTPLAN_HOST_GRPC_PORT": "15052"}
    (server,) = EnvServers(_arena_settings(arena, monkeypatch, moved).env.split(",")).servers
    assert server.public_grpc == "lab-7.example.org:15052"


#: The variables a person sets to move the services' host ports, and the base image.
HOST_PORTS = {"RTPLAN_HOST_HTTP_PORT": "http_port", "RTPLAN_HOST_GRPC_PORT": "grpc_port"}
BASE_IMAGE = "RTPLAN_BASE_IMAGE"
#: The variable that names the host's file of API keys (the secret rtplan_api_keys), and that
#: secret's name in the file.
KEY_FILE = "RTPLAN_HOST_API_KEY_FILE"
SECRET = "rtplan_api_keys"
#: A key file's stand-in for the compose runs that only read the file (`config`).
SOME_KEYS = str(ROOT / "README.md")


@pytest.mark.parametrize("profile", PROFILES)
def test_the_host_ports_and_the_base_image_move_with_their_variables(profile, monkeypatch):
    """Each published port's host side is `${RTPLAN_HOST_..._PORT:-its port}` (8000 and 50052
    taken: another demo, another stack), its container side the port the service binds; each
    image builds on `${RTPLAN_BASE_IMAGE:-python:3.11-slim}` (where that cannot be pulled,
    deploy/local_base.sh's stand-in). Where compose is installed, it fills them in too."""
    planner, env = compose_profile(profile)
    e = service_settings(Settings, server_parser, env, monkeypatch)
    ports = {}
    for entry in env["ports"]:
        found = re.fullmatch(r"\$\{(RTPLAN_HOST_\w+_PORT):-(\d+)\}:(\d+)", entry)
        assert found, f"{entry}: the host port is not a variable"
        variable, default, inside = found[1], int(found[2]), int(found[3])
        assert default == inside == getattr(e, HOST_PORTS[variable]), entry
        ports[variable] = inside
    assert set(ports) == set(HOST_PORTS)
    moved = {"RTPLAN_HOST_HTTP_PORT": "18000", "RTPLAN_HOST_GRPC_PORT": "15052"}
    assert {_filled(x, moved) for x in env["ports"]} == {"18000:8000", "15052:50052"}
    arena = compose_services(profile)["arena"]
    moved["RTPLAN_HOST_ARENA_PORT"] = "18100"
    assert [_filled(x, moved) for x in arena["ports"]] == ["18100:8100"]
    for service in (planner, env, arena):
        assert service["build"]["args"]["BASE_IMAGE"] == f"${{{BASE_IMAGE}:-python:3.11-slim}}"
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=python:3.11-slim" in dockerfile
    for tool in _compose_tools():
        argv = [*tool, "-f", str(ROOT / "docker-compose.yml"), "--profile", profile, "config"]
        for variables, want_ports, want_base, want_env in (
            (
                {},
                {(8000, 8000), (50052, 50052)},
                "python:3.11-slim",
                "--env=http://env-server:8000=localhost:50052=http://localhost:8000",
            ),
            (
                {**moved, BASE_IMAGE: "rtplan-base:bookworm"},
                {(18000, 8000), (15052, 50052)},
                "rtplan-base:bookworm",
                "--env=http://env-server:8000=localhost:15052=http://localhost:18000",
            ),
        ):
            unset = {*moved, BASE_IMAGE, "RTPLAN_HOST_NAME"}
            clean = {k: v for k, v in os.environ.items() if k not in unset}
            done = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=60,
                env={**clean, KEY_FILE: SOME_KEYS, **variables},
            )
            assert done.returncode == 0, done.stderr
            services = yaml.safe_load(done.stdout)["services"]
            got = services[_name(env)]["ports"]
            assert {(int(p["published"]), int(p["target"])) for p in got} == want_ports, got
            (got,) = services[_name(arena)]["ports"]
            assert int(got["published"]) == int(variables.get("RTPLAN_HOST_ARENA_PORT", 8100))
            assert want_env in services[_name(arena)]["command"]
            for service in (planner, env, arena):
                assert services[_name(service)]["build"]["args"]["BASE_IMAGE"] == want_base


@pytest.mark.parametrize("profile", PROFILES)
def test_health_checks_run_rtplan_health_against_the_ports_the_services_bind(profile, monkeypatch):
    planner, env = compose_profile(profile)
    arena = compose_services(profile)["arena"]
    p = service_settings(PlannerServiceSettings, planner_parser, planner, monkeypatch)
    e = service_settings(Settings, server_parser, env, monkeypatch)
    a = _arena_settings(arena, monkeypatch)
    for service, which, want in (
        (planner, "planner", f"127.0.0.1:{p.port}"),
        (env, "env", f"http://127.0.0.1:{e.http_port}"),
        (arena, "arena", f"http://127.0.0.1:{a.port}"),
    ):
        check = service["healthcheck"]
        assert check["test"][:2] == ["CMD", "rtplan"]
        args = rtplan_parser().parse_args(check["test"][2:])
        assert args.command == "health"
        assert getattr(args, which) == want
        # Docker kills a check that outlives its timeout: the command's own comes first.
        assert compose_seconds(check["timeout"]) > args.timeout == TIMEOUT_S
        assert compose_seconds(check["interval"]) >= 1 and check["retries"] >= 1
    # Compiling every game's options takes minutes on a CPU: failed checks meanwhile don't count.
    assert compose_seconds(planner["healthcheck"]["start_period"]) >= 30 * 60


def test_only_the_gpu_profile_reserves_gpus_one_each():
    planner, env = compose_profile("gpu")
    assert gpu_ids(env) == ["0"] and gpu_ids(planner) == ["1"]
    for service in compose_profile("cpu"):
        assert gpu_ids(service) == [] and "deploy" not in service


def test_the_images_install_an_extra_that_exists():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    want = {"gpu": "gpu", "cpu": ""}  # "": no extra, JAX as pinned (CPU)
    images = {}
    for profile in PROFILES:
        for service in compose_services(profile).values():
            assert service["build"]["context"] == "."
            extra = service["build"]["args"]["EXTRAS"]
            assert extra == want[profile] and (extra == "" or extra in extras)
            images.setdefault(service["image"], set()).add(extra)
    # Two builds never share a tag (one would overwrite the other).
    assert len(images) == 2 and all(len(e) == 1 for e in images.values())
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "ARG EXTRAS" in dockerfile and "${EXTRAS:+[$EXTRAS]}" in dockerfile


def _stages(dockerfile: str) -> tuple[str, str]:
    build, image = re.split(r"^FROM ", dockerfile, flags=re.M)[1:]
    return build, image


def test_the_image_installs_the_wheel_and_nothing_else_of_the_tree():
    """Stage 1 builds the wheel (which carries the pages and checkpoints,
    tests/packaging/test_wheel.py); the image is stage 2, which copies in that wheel only."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    build, image = _stages(dockerfile)
    # Both stages start from the BASE_IMAGE build argument, python:3.11-slim unless it is given
    # (deploy/local_base.sh's local stand-in where no image can be pulled).
    assert re.search(r"^ARG BASE_IMAGE=python:3\.11-slim$", dockerfile, flags=re.M)
    assert build.startswith("${BASE_IMAGE} AS wheel") and "pip wheel" in build
    assert image.startswith("${BASE_IMAGE}\n")
    copies = [line.split() for line in image.splitlines() if line.startswith("COPY")]
    assert copies == [["COPY", "--from=wheel", "/wheel", "/tmp/wheel"]]
    assert "pip install" in image and "/tmp/wheel/rtplan-" in image


def test_the_image_runs_as_a_non_root_user_who_owns_what_it_writes():
    _, image = _stages((ROOT / "Dockerfile").read_text())
    # Stage 2 after its FROM line, continuation lines joined: (instruction, argument) pairs.
    lines = [line.strip() for line in image.replace("\\\n", " ").splitlines()[1:]]
    instructions = [line.split(maxsplit=1) for line in lines if line and not line.startswith("#")]
    users = [arg for op, arg in instructions if op == "USER"]
    assert users and users[-1] not in ("root", "0", "0:0")
    user = users[-1]
    ops = [op for op, _ in instructions]
    assert ops.index("USER") < ops.index("CMD")
    (workdir,) = [arg for op, arg in instructions if op == "WORKDIR"]
    runs = " ".join(arg for op, arg in instructions if op == "RUN")
    assert re.search(rf"useradd\b.*\b{user}\b", runs)
    chowned = re.search(rf"chown -R {user}:{user} ([^&]+)", runs).group(1).split()
    # Named volumes start as copies of the image's folder (owner included): each mount point
    # exists in the image and belongs to the user, or the services could not write there.
    targets = {
        m.split(":")[1]
        for profile in PROFILES
        for service in compose_services(profile).values()
        for m in service.get("volumes", ())
    }
    made = set(re.search(r"mkdir -p ([^&]+)", runs).group(1).split())
    assert targets <= made and workdir in chowned
    assert all(any(t == c or t.startswith(c + "/") for c in chowned) for t in targets)


def _compose_tools() -> list[list[str]]:
    tools = []
    if shutil.which("docker-compose"):  # v1 (Debian's docker-compose): validates offline
        tools.append(["docker-compose"])
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        tools.append([docker, "compose"])
    return tools


def test_docker_compose_validates_the_file_offline():
    tools = _compose_tools()
    if not tools:
        pytest.skip("neither docker-compose nor the docker compose plugin is installed")
    env = {**os.environ, KEY_FILE: SOME_KEYS}
    for tool in tools:
        argv = [
            *tool,
            "-f",
            str(ROOT / "docker-compose.yml"),
            "--profile",
            "gpu",
            "--profile",
            "cpu",
        ]
        done = subprocess.run(
            [*argv, "config", "-q"], capture_output=True, text=True, timeout=60, env=env
        )
        assert done.returncode == 0, f"{' '.join(tool)} config: {done.stderr}"
        # ... and the checker does check: a key the schema does not know is refused.
        bad = compose_file()
        bad["services"]["planner-cpu"]["healthcheck"]["start_perod"] = "1m"
        done = subprocess.run(
            [*tool, "-f", "-", "--project-directory", str(ROOT), "config", "-q"],
            input=yaml.safe_dump(bad),
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert done.returncode != 0 and "start_perod" in done.stderr, done.stderr


def _secret_file(service: dict) -> str:
    """Where `service` mounts the secret rtplan_api_keys (its only secret)."""
    (secret,) = service["secrets"]
    assert secret["source"] == SECRET, secret
    return secret["target"]


@pytest.mark.parametrize("profile", PROFILES)
def test_the_env_server_arena_and_deploy_read_their_keys_from_one_secret(profile, monkeypatch):
    """The env server binds 0.0.0.0 and so needs a key: its `--api-key-file` is where the secret
    rtplan_api_keys is mounted (it has no --open, and without the key the same command is
    refused), and the deploy profile presents a key of the same file; so does the arena to the
    env server (`--env-key-file`), whose admin keys are that file's too (it binds 0.0.0.0: its
    command without them is refused). The secret's file is `${RTPLAN_HOST_API_KEY_FILE:?...}`,
    required and named by no commit."""
    from rtplan.processes import ApiKeys, exposure_refusal

    planner, env = compose_profile(profile)
    e = service_settings(Settings, server_parser, env, monkeypatch)
    assert e.host == "0.0.0.0" and not e.open and e.agent_token is None
    target = _secret_file(env)
    assert str(e.api_key_file) == target and target.startswith("/run/secrets/")
    assert "secrets" not in planner  # it creates no session
    without = [a for a in env["command"] if not a.startswith("--api-key-file")]
    bare = service_settings(Settings, server_parser, {**env, "command": without}, monkeypatch)
    refused = exposure_refusal(
        "env server",
        bare.host,
        ApiKeys(),
        open_on_purpose=bare.open,
        guarded="create sessions",
        token_variable="RTPLAN_SERVER_AGENT_TOKEN",
    )
    assert refused and "--api-key-file" in refused and "--open" in refused
    deploy = compose_file()["services"][f"deploy-{profile}"]
    args = rtplan_parser().parse_args(deploy["command"][1:])
    assert args.api_key_file == _secret_file(deploy) == target
    arena = compose_services(profile)["arena"]
    a = _arena_settings(arena, monkeypatch)
    assert str(a.api_key_file) == str(a.env_key_file) == _secret_file(arena) == target
    assert a.host == "0.0.0.0" and not a.open and a.admin_token is None
    without = [a for a in arena["command"] if not a.startswith(("--api-key-file", "--env-key"))]
    bare = _arena_settings({**arena, "command": without}, monkeypatch)
    refused = arena_refusal(bare)
    assert refused and "refusing to serve 0.0.0.0" in refused and "--open" in refused
    secret = compose_file()["secrets"][SECRET]
    assert set(secret) == {"file"}
    found = re.fullmatch(r"\$\{(\w+):\?([^}]+)\}", secret["file"])
    assert found and found[1] == KEY_FILE and KEY_FILE in found[2], secret
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert not [t for t in tracked if "api_key" in Path(t).name], "a key file is committed"


def test_compose_refuses_to_run_without_the_key_file_variable():
    """Where compose is installed: the file names no default, so any command without
    RTPLAN_HOST_API_KEY_FILE fails at once, naming it; with it, the secret is that file."""
    tools = _compose_tools()
    if not tools:
        pytest.skip("neither docker-compose nor the docker compose plugin is installed")
    clean = {k: v for k, v in os.environ.items() if k != KEY_FILE}
    for tool in tools:
        argv = [*tool, "-f", str(ROOT / "docker-compose.yml"), "--profile", "cpu", "config"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=clean)
        assert done.returncode != 0 and KEY_FILE in done.stderr, done.stderr
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=60, env={**clean, KEY_FILE: SOME_KEYS}
        )
        assert done.returncode == 0, done.stderr
        assert yaml.safe_load(done.stdout)["secrets"][SECRET]["file"] == SOME_KEYS


# The cpu profile as plain processes ---------------------------------------------------------


def _local(argv: list[str], **flags: object) -> list[str]:
    """A compose command line as a process here: `rtplan` as this Python's `-m rtplan`, and the
    `--flag=value`s named in `flags` (underscores for dashes) set to these values or added."""
    assert argv[0] == "rtplan"
    values = {f"--{k.replace('_', '-')}": str(v) for k, v in flags.items()}
    out = []
    for arg in argv[1:]:
        flag = arg.split("=", 1)[0]
        out.append(f"{flag}={values.pop(flag)}" if flag in values else arg)
    return [sys.executable, "-m", "rtplan", *out, *(f"{k}={v}" for k, v in values.items())]


def _check(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(_local(argv), capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def _until_healthy(
    test: list[str], timeout: float, child: Child, deadline_s: float
) -> list[subprocess.CompletedProcess]:
    """Runs a health check until it passes (every 0.5 s here; the compose interval is longer);
    returns every run."""
    runs = []
    end = time.monotonic() + deadline_s
    while True:
        runs.append(_check(test, timeout))
        if runs[-1].returncode == 0:
            return runs
        tail = "\n".join(child.lines[-15:])
        assert child.running, f"{child.name} exited:\n{tail}"
        assert time.monotonic() < end, f"{runs[-1].stderr}\n{child.name}:\n{tail}"
        time.sleep(0.5)


def test_the_cpu_profiles_command_lines_and_health_checks_run_as_processes(tmp_path, monkeypatch):
    """The cpu profile's services started directly (free ports, tiny checkpoints, the volumes as
    folders here): the planner's check fails while it compiles and passes once SERVING, the env
    server starts then (depends_on: service_healthy), passes its own check and plans with it;
    then the arena passes its check and creates a ranked episode on the env server with the
    secret's first key, to be joined at the Env API's public address its command names."""
    from support import write_planner

    planner, env = compose_profile("cpu")
    ckpt = write_planner(tmp_path / "ckpt", "snake-rt-v0", budgets=(2,), simulations=(2,))
    check_s = compose_seconds(planner["healthcheck"]["timeout"])
    children: list[Child] = []
    try:
        p = service_settings(
            PlannerServiceSettings, planner_parser, planner, monkeypatch
        )  # its env too
        plan = Child("planner", _local(planner["command"], port=0, checkpoint_dir=ckpt), echo=False)
        children.append(plan)
        port = int(_PLANNER_BOUND.search(plan.wait_for("planner service bound to", 120)).group(1))
        test = [a.replace(f":{p.port}", f":{port}") for a in planner["healthcheck"]["test"][1:]]
        runs = _until_healthy(test, check_s, plan, deadline_s=120)
        assert runs[0].returncode == 1 and "is NOT_SERVING (compiling: " in runs[0].stderr
        assert "is SERVING (2 executables compiled) on cpu" in runs[-1].stdout

        # The env server's folders: the container's mount points, as folders here; the
        # secret, a file of two keys.
        folders = {k: str(tmp_path / Path(v).name) for k, v in env["environment"].items()}
        e = service_settings(Settings, server_parser, {**env, "environment": folders}, monkeypatch)
        keys = tmp_path / "api_keys"
        keys.write_text(f"# the compose secret\n{'k' * 32}\n{'j' * 32}\n")
        argv = _local(
            env["command"],
            http_port=0,
            grpc_port=0,
            planner_address=f"127.0.0.1:{port}",
            checkpoint_dir=ckpt,
            api_key_file=keys,
        )
        server = Child("env-server", argv, echo=False)
        children.append(server)
        bound = _ENV_BOUND.search(server.wait_for("rtplan env server:", 120))
        http, grpc = int(bound[1]), int(bound[2])
        test = [a.replace(f":{e.http_port}", f":{http}") for a in env["healthcheck"]["test"][1:]]
        runs = _until_healthy(test, compose_seconds(env["healthcheck"]["timeout"]), server, 60)
        assert "/healthz is ok" in runs[-1].stdout

        with urllib.request.urlopen(f"http://127.0.0.1:{http}/v1/games", timeout=30) as resp:
            games = {g["id"]: g for g in json.loads(resp.read())["games"]}
        snake = games["snake-rt-v0"]["planner"]
        assert snake["available"] and snake["budgets"] == [2], snake

        # Creating a session: no key 401, a wrong one 403, the file's second key 201.
        body = {"game": "snake-rt-v0", "agent": "planner", "k": 2, "max_frames": 3}
        for key, status in ((None, 401), ("x" * 32, 403), ("j" * 32, 201)):
            try:
                http_json("POST", f"http://127.0.0.1:{http}/v1/sessions", body, key, timeout=120)
                got = 201
            except HTTPStatusError as err:
                got = err.status
            assert got == status, (key, got)

        # The arena, its env server's URL and public Env API moved to this test's ports.
        arena = compose_services("cpu")["arena"]
        a = _arena_settings(arena, monkeypatch)
        (server,) = EnvServers(a.env.split(",")).servers
        public_host = server.public_grpc.rpartition(":")[0]
        assert server.public_url == f"http://{public_host}:{e.http_port}"
        argv = _local(
            arena["command"],
            port=0,
            database=f"sqlite:///{tmp_path / 'arena' / 'arena.db'}",
            env=f"http://127.0.0.1:{http}={public_host}:{grpc}=http://{public_host}:{http}",
            api_key_file=keys,
            env_key_file=keys,
        )
        (tmp_path / "arena").mkdir()
        hall = Child("arena", argv, echo=False)
        children.append(hall)
        port = int(_ARENA_BOUND.search(hall.wait_for("rtplan arena: http on", 120))[1])
        test = [x.replace(f":{a.port}", f":{port}") for x in arena["healthcheck"]["test"][1:]]
        runs = _until_healthy(test, compose_seconds(arena["healthcheck"]["timeout"]), hall, 60)
        assert "/healthz is ok" in runs[-1].stdout
        base = f"http://127.0.0.1:{port}"
        token = http_json("POST", f"{base}/v1/agents", {"name": "compose", "version": "1"})
        run = http_json(
            "POST", f"{base}/v1/runs", {"game": "snake-rt-v0", "tier": "fast"}, token["token"]
        )
        episode = http_json(
            "POST", f"{base}/v1/runs/{run['id']}/episodes", None, token["token"], timeout=120
        )
        assert episode["session_id"] and episode["env"]["grpc"] == f"{public_host}:{grpc}"
    finally:
        stop_all(children[::-1])
