"""Where each service runs: its cores, GPUs, variables and flags (`place_services`)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class Place:
    """Where one service runs: its cores (empty: any), added variables and added flags."""

    cpus: tuple[int, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    args: tuple[str, ...] = ()

    def describe(self) -> dict:
        return {"cpus": list(self.cpus), "env": dict(self.env), "args": list(self.args)}


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where the planner service and the env server run (`services(placement=...)`)."""

    planner: Place = Place()
    env_server: Place = Place()

    def describe(self) -> dict:
        return {"planner": self.planner.describe(), "env_server": self.env_server.describe()}


def visible_gpus() -> list[str]:
    """The NVIDIA GPUs a service could use, by id: CUDA_VISIBLE_DEVICES when set, else those
    `nvidia-smi -L` lists; none without a CUDA build of JAX to use them. Asks no JAX (which
    would take GPU memory in this process)."""
    import importlib.util

    if not any(importlib.util.find_spec(p) for p in ("jax_cuda12_plugin", "jax_cuda13_plugin")):
        return []
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [g.strip() for g in given.split(",") if g.strip() and g.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return [str(i) for i, line in enumerate(out.stdout.splitlines()) if line.startswith("GPU ")]


def place_services(cpus: Sequence[int], gpus: Sequence[str]) -> Placement:
    """The paper's split of the two services (reference notes section 9), on this machine.

    Cores: with two or more, the env server gets the first and the planner service the rest,
    so a search never takes the ticker's core. GPUs: with two, the env server sees the first
    and the planner the second (the compose file's gpu profile); with one, the planner has it
    and the env server runs on the CPU (two processes' JAX on one GPU would each reserve most
    of its memory); with none, both run on the CPU.
    """
    cpus = sorted(cpus)
    env_cpus, plan_cpus = ((cpus[0],), tuple(cpus[1:])) if len(cpus) >= 2 else ((), ())
    cuda = ("--device", "cuda:0")
    if len(gpus) >= 2:
        env = (("CUDA_VISIBLE_DEVICES", gpus[0]),)
        plan, args = (("CUDA_VISIBLE_DEVICES", gpus[1]),), cuda
    elif len(gpus) == 1:
        env = (("JAX_PLATFORMS", "cpu"),)
        plan, args = (("CUDA_VISIBLE_DEVICES", gpus[0]),), cuda
    else:
        env, plan, args = (), (), ()
    return Placement(
        planner=Place(cpus=plan_cpus, env=plan, args=args),
        env_server=Place(cpus=env_cpus, env=env),
    )
