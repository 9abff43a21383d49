"""Shared fixtures: the env server (optionally with a real Planner service) on free ports."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from rtplan.jax_setup import COMPILE_CACHE_BYTES  # imports no JAX

ROOT = Path(__file__).resolve().parents[1]
# One persistent JAX compilation cache for the run, inside the clone: both xdist workers and every
# server process they start load what another already compiled, and nothing compiled outside
# the clone (a user's ~/.cache/rtplan, a JAX_COMPILATION_CACHE_DIR of the shell) is read, so a
# run here times what a new machine's first run takes. Set before any test imports jax; the size
# limit makes JAX lock the folder (rtplan/jax_setup.py).
os.environ["JAX_COMPILATION_CACHE_DIR"] = str(ROOT / ".pytest_cache" / "jax")
os.environ["JAX_COMPILATION_CACHE_MAX_SIZE"] = str(COMPILE_CACHE_BYTES)
os.environ.pop("RTPLAN_COMPILE_CACHE", None)
# Every process of the run refuses to load programs past Linux's default map limit, even where
# this machine's was raised: what would crash on a new machine fails here too (jax_setup).
os.environ["RTPLAN_MAP_LIMIT"] = "65530"
# The suite is compile-bound (tiny shapes, few steps). Without LLVM's backend optimisations XLA:CPU
# compiles ~40% faster, and with its older fusion emitters a tiny search compiles in about half
# the time again (13.2 -> 7.9 s, one core) and maps half the memory regions (5,041 -> 2,552); the
# small programs run about as fast either way. Inherited by every subprocess (servers, CLI runs);
# what is tested (the programs' semantics) does not depend on how XLA emits them.
for flag in ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false"):
    if flag.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()


#: A worker releases the programs it compiled once it maps this many memory regions at the end
#: of a test module. The most one module added in a cold run was ~20,500 (test_clock_gate), and
#: the run keeps to 65,530 less the guard's 6,000: this leaves ~9,000 to spare.
RELEASE_AT_MAPS = 30_000


def pytest_report_header(config) -> list[str]:
    """What a run starts from, in CI's log: the compile cache and the map limit."""
    from rtplan.jax_setup import map_count

    cache = Path(os.environ["JAX_COMPILATION_CACHE_DIR"])
    entries = len(list(cache.glob("*-cache"))) if cache.is_dir() else 0
    try:
        kernel = Path("/proc/sys/vm/max_map_count").read_text().strip()
    except OSError:
        kernel = "unknown"
    counts = map_count()
    return [
        f"jax compile cache: {cache} ({entries} entries at the start)",
        f"vm.max_map_count: {kernel} (the run keeps to {counts[1] if counts else '-'})",
    ]


def pytest_sessionstart(session) -> None:
    from rtplan.jax_setup import guard_map_count

    # A module that alone outgrows the map limit fails with MapCountExhausted, not a SIGSEGV.
    guard_map_count()


@pytest.fixture(scope="module", autouse=True)
def _release_compiled_programs() -> Iterator[None]:
    """After a module, frees the XLA executables its tests left in process-wide caches, once
    the worker maps `RELEASE_AT_MAPS` regions. An xdist worker lives through hundreds of tests,
    and the `functools` caches of the packages and the test modules (each bounded on its own)
    kept every planner and option alive together: at 3 regions per compiled kernel a worker
    reached vm.max_map_count (65,530) and XLA:CPU died of SIGSEGV loading the next program
    (issue 40; `python -m bench.map_limit`). Released programs load again from the persistent
    cache when a later module needs them."""
    yield
    from rtplan.jax_setup import map_count
    from support import release_compiled_programs  # imports JAX: not before the settings above

    counts = map_count()
    if counts is None or counts[0] < RELEASE_AT_MAPS:
        return
    release_compiled_programs(everything=False)
    # JAX's own caches too (module-level jitted functions) only when those held the most:
    # programs that compile in under a second are not in the persistent cache, and every
    # later module would compile them again.
    if map_count()[0] >= RELEASE_AT_MAPS // 2:
        release_compiled_programs()


@pytest.fixture(scope="module")
def serve(tmp_path_factory) -> Iterator[Callable[..., SimpleNamespace]]:
    """A factory of env servers that stop when the module's tests are done.

    `serve(game_ids, *, planner=False, services=(), middleware=None, **settings)` writes tiny
    checkpoints of `game_ids`, starts the real Planner service on them if `planner`, and serves
    the env server (gRPC and HTTP on port 0) with `settings` overriding the `Settings` fields (a
    given `checkpoint_dir` is served as it is, no checkpoints written). `services`: planner
    services the test started itself (`BackgroundService`s), routed to in that order and
    stopped with the module. It returns a
    namespace: `client` (the `TestClient`), `address` and `port` (the gRPC Env API), `root` (the
    checkpoint folder) and `planner` (the `BackgroundService`, or None).
    """
    # Imported here: the tests that need no server (games, planner) need not import it.
    from fastapi.testclient import TestClient

    from rtplan.server import Settings, create_app
    from support import start_planner, write_checkpoints

    with contextlib.ExitStack() as stack:

        def start(
            game_ids: tuple[str, ...] = (),
            *,
            planner: bool = False,
            services=(),
            middleware=None,
            **settings,
        ) -> SimpleNamespace:
            for service in services:
                stack.callback(service.stop)
            if services:
                settings.setdefault("planner_address", ";".join(s.address for s in services))
            root = settings.pop("checkpoint_dir", None)
            if root is None:
                root = write_checkpoints(tmp_path_factory.mktemp("ckpt"), game_ids)
            srv = SimpleNamespace(root=root, planner=None)
            if planner:
                srv.planner = start_planner(root)
                # Stops the planner the namespace holds at the end (a test may restart it).
                stack.callback(lambda: srv.planner.stop())
                settings.setdefault("planner_address", srv.planner.address)
            settings.setdefault("record_dir", tmp_path_factory.mktemp("replays"))
            app = create_app(Settings(http_port=0, grpc_port=0, checkpoint_dir=root, **settings))
            if middleware is not None:
                app.add_middleware(middleware)
            srv.client = stack.enter_context(TestClient(app))  # runs the lifespan: ports bound
            srv.port = app.state.grpc_port
            srv.address = f"127.0.0.1:{srv.port}"
            return srv

        yield start
