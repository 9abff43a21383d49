"""docker-compose.yml: the env server on GPU 0, the planner service on GPU 1, wired together.

No Docker engine runs here (nor in CI), so the compose file is checked by what it means: each
service's command parses with the real command-line parsers into valid settings, the env server
reaches the planner by its service name and port, each container reserves its own GPU, and the
image it builds installs an extra that exists.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from planner_service.__main__ import build_parser as planner_parser
from planner_service.settings import PlannerServiceSettings
from server.__main__ import _parser as server_parser
from server.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _gpu_ids(service: dict) -> list[str]:
    devices = service["deploy"]["resources"]["reservations"]["devices"]
    return [i for d in devices if "gpu" in d["capabilities"] for i in d["device_ids"]]


def test_compose_runs_env_server_on_gpu0_and_planner_on_gpu1():
    services = _compose()["services"]
    assert set(services) == {"planner", "env-server"}
    planner, env = services["planner"], services["env-server"]
    assert _gpu_ids(env) == ["0"] and _gpu_ids(planner) == ["1"]

    assert planner["command"][:2] == ["rtplan", "planner-service"]
    p = planner_parser().parse_args(planner["command"][2:])
    p_settings = PlannerServiceSettings(host=p.host, port=p.port, device=p.device)
    assert p_settings.device == "cuda:0"  # the one GPU the container sees

    assert env["command"][:2] == ["rtplan", "env-server"]
    e = server_parser().parse_args(env["command"][2:])
    e_settings = Settings(
        host=e.host,
        http_port=e.http_port,
        grpc_port=e.grpc_port,
        planner_address=e.planner_address,
    )
    assert e_settings.planner_address == f"planner:{p_settings.port}"
    assert p_settings.host == e_settings.host == "0.0.0.0"  # reachable from the other container
    published = {int(x.split(":")[1]) for x in env["ports"]}
    assert published == {e_settings.http_port, e_settings.grpc_port}
    assert env["depends_on"] == ["planner"]


def test_compose_image_installs_an_extra_that_exists():
    compose = _compose()
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for service in compose["services"].values():
        assert service["build"]["context"] == "."
        assert service["build"]["args"]["EXTRAS"] in extras
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "ARG EXTRAS" in dockerfile and "${EXTRAS:+[$EXTRAS]}" in dockerfile


def test_the_image_installs_the_wheel_and_nothing_else_of_the_tree():
    """Stage 1 builds the wheel (which carries the pages and checkpoints, tests/test_wheel.py);
    the image is stage 2, which copies in that wheel only."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    build, image = re.split(r"^FROM ", dockerfile, flags=re.M)[1:]
    assert build.startswith("python:3.11-slim AS wheel") and "pip wheel" in build
    copies = [line.split() for line in image.splitlines() if line.startswith("COPY")]
    assert copies == [["COPY", "--from=wheel", "/wheel", "/tmp/wheel"]]
    assert "pip install" in image and "/tmp/wheel/rtplan-" in image
