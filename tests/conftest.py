"""Shared fixtures: the env server (optionally with a real Planner service) on free ports."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

# One persistent JAX compilation cache for the run: both xdist workers and every server
# process they start load what another already compiled (set before any test imports jax;
# the size limit makes JAX lock the folder, see rtplan/cli.py).
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR", str(Path(__file__).resolve().parents[1] / ".pytest_cache" / "jax")
)
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(4 << 30))
# The suite is compile-bound (tiny shapes, few steps): without LLVM's backend optimisations XLA:CPU
# compiles ~40% faster and the small programs run about as fast. Inherited by every subprocess
# (servers, CLI runs); what is tested (the programs' semantics) does not depend on it.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
    ).strip()


@pytest.fixture(scope="module")
def serve(tmp_path_factory) -> Iterator[Callable[..., SimpleNamespace]]:
    """A factory of env servers that stop when the module's tests are done.

    `serve(game_ids, *, planner=False, middleware=None, **settings)` writes tiny checkpoints of
    `game_ids`, starts the real Planner service on them if `planner`, and serves the env server
    (gRPC and HTTP on port 0) with `settings` overriding the `Settings` fields (a given
    `checkpoint_dir` is served as it is, no checkpoints written). It returns a
    namespace: `client` (the `TestClient`), `address` and `port` (the gRPC Env API), `root` (the
    checkpoint folder) and `planner` (the `BackgroundService`, or None).
    """
    # Imported here: the tests that need no server (games, planner) need not import it.
    from fastapi.testclient import TestClient

    from server import Settings, create_app
    from support import start_planner, write_checkpoints

    with contextlib.ExitStack() as stack:

        def start(
            game_ids: tuple[str, ...] = (), *, planner: bool = False, middleware=None, **settings
        ) -> SimpleNamespace:
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
