"""`python -m planner_service`: runs the Planner service until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import time
from collections.abc import Sequence

from pydantic import ValidationError

from rtplan.harness.config import add_settings_flags, settings_overrides
from rtplan.planner_service.engine import DeviceError, EngineError
from rtplan.planner_service.settings import PlannerServiceSettings
from rtplan.processes import bind_error


def build_parser() -> argparse.ArgumentParser:
    """Flags of the service; each overrides its RTPLAN_PLANNER_* environment variable."""
    p = argparse.ArgumentParser(
        prog="rtplan planner-service",
        description="gRPC Planner service: gated MCTS options per budget k over the planners. "
        "Flags override the RTPLAN_PLANNER_* environment variables.",
    )
    add_settings_flags(p, PlannerServiceSettings)
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the service; returns the process exit status."""
    args = build_parser().parse_args(argv)
    # The level in each line: `rtplan demo` shows a person its services' warnings and errors,
    # not their INFO lines (its own progress lines say what those do).
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    try:
        settings = PlannerServiceSettings(**settings_overrides(PlannerServiceSettings, args))
    except ValidationError as e:
        print(f"planner service: bad settings:\n{e}", file=sys.stderr)
        return 2
    taken = bind_error(settings.port, settings.host)
    if taken is not None:  # before its checkpoints load: one line, not a gRPC traceback
        print(
            f"planner service: cannot bind {settings.host}:{settings.port} ({taken}); pass "
            "--port N (0: any free) or set RTPLAN_PLANNER_PORT",
            file=sys.stderr,
        )
        return 2
    try:
        return asyncio.run(_run(settings))
    except (EngineError, DeviceError, OSError, ValueError) as e:
        print(f"planner service: {e}", file=sys.stderr)
        return 1


async def _run(settings: PlannerServiceSettings) -> int:
    from rtplan.planner_service.server import load_engine, serve

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    engine = load_engine(settings)
    _, total = engine.progress
    gated = ", ".join(engine.gate_ids) or "none"
    logging.getLogger("planner_service").info(
        "compiling %d options and gates of %s on %s (gates: %s)",
        total,
        ", ".join(engine.game_ids),
        engine.device,
        gated,
    )

    def bound(port: int) -> None:  # `rtplan.processes.services` reads the port from this line
        print(f"planner service bound to {settings.host}:{port} (compiling)", flush=True)

    progress = _Progress(engine)
    serving = asyncio.ensure_future(
        serve(
            settings,
            engine=engine,
            bound=bound,
            on_ready=progress.ready,
            on_start=progress.start,
            on_gate_ready=progress.gate_ready,
        )
    )
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait((serving, stopping), return_when=asyncio.FIRST_COMPLETED)
    if not serving.done():  # stopped while compiling
        engine.close()
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        return 0
    stopping.cancel()
    server, port = serving.result()
    print(
        f"planner service listening on {settings.host}:{port} (device {engine.device})", flush=True
    )
    await stop.wait()
    await server.stop(settings.grace_s)
    return 0


#: What a game's progress line says once its gated requests plan (before "ready").
GATE_READY = "gate ready"

#: Seconds an executable takes to compile on a cold compile cache before this service has
#: timed one: the first game's estimate (a shipped planner's option on a 2-core CPU).
COLD_S_PER_EXECUTABLE = 20.0


class _Progress:
    """The lines `compile()` prints per game: what compiles with an estimate, then its time.
    `rtplan.processes.services` waits for a game's "planner service: GAME ready" line, or for
    a game played gated its "planner service: GAME gate ready" line (`GATE_READY`)."""

    def __init__(self, engine) -> None:
        self._engine = engine
        self._started = 0.0
        self._spent = 0.0  # seconds the games compiled so far took
        self._done = 0  # ... and their executables

    def start(self, game_id: str, executables: int) -> None:
        loaded = self._engine.loaded(game_id)
        pace = self._spent / self._done if self._done else COLD_S_PER_EXECUTABLE
        how = f"about {executables * pace:.0f} s" + ("" if self._done else " on a cold cache")
        gate = ", gated" if loaded.gate is not None else ""
        print(
            f"planner service: {game_id} compiling (budgets "
            f"{', '.join(map(str, loaded.budgets))}{gate}; {executables} executables; {how})",
            flush=True,
        )
        self._started = time.monotonic()

    def gate_ready(self, game_id: str) -> None:
        took = time.monotonic() - self._started
        if self._engine.serves_gated_only(game_id):
            then = "it serves gated requests only (--gated-only)"
        else:
            then = "it plays gated; its forced budgets compile next"
        print(f"planner service: {game_id} {GATE_READY} in {took:.0f} s ({then})", flush=True)

    def ready(self, game_id: str) -> None:
        took = time.monotonic() - self._started
        self._spent += took
        self._done += self._engine.executables(game_id)
        served = self._engine.game_ids
        n = served.index(game_id) + 1
        print(
            f"planner service: {game_id} ready in {took:.0f} s ({n}/{len(served)} games)",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
