"""`python -m planner_service`: runs the Planner service until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from rtplan.harness.config import add_settings_flags, settings_overrides
from rtplan.planner_service.engine import DeviceError, EngineError
from rtplan.planner_service.settings import PlannerServiceSettings


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
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(message)s")
    try:
        settings = PlannerServiceSettings(**settings_overrides(PlannerServiceSettings, args))
    except ValidationError as e:
        print(f"planner service: bad settings:\n{e}", file=sys.stderr)
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

    served = engine.game_ids

    def ready(game_id: str) -> None:  # `rtplan.processes.services` waits for its first game's
        n = served.index(game_id) + 1
        print(f"planner service: {game_id} ready ({n}/{len(served)} games)", flush=True)

    serving = asyncio.ensure_future(serve(settings, engine=engine, bound=bound, on_ready=ready))
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


if __name__ == "__main__":
    sys.exit(main())
