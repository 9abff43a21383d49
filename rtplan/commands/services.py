"""Service commands: `planner-service` and `env-server`, each run by its package's `main`."""

from __future__ import annotations

import argparse
import importlib

#: Subcommand -> (the module whose `main(argv)` runs it, help). Their own parsers, built from
#: their settings (`harness.config.add_settings_flags`), handle the flags: `rtplan NAME --help`.
SERVICES = {
    "planner-service": (
        "rtplan.planner_service.__main__",
        "run the gRPC Planner service (gated MCTS as a service)",
    ),
    "env-server": (
        "rtplan.server.__main__",
        "run the environment server (REST, websockets, gRPC Env API)",
    ),
}


def register(sub: argparse._SubParsersAction) -> None:
    """Adds the services to the `rtplan` subcommands; each forwards its arguments (`forward`)."""
    for name, (module, help_text) in SERVICES.items():
        svc = sub.add_parser(name, help=help_text, add_help=False)
        svc.add_argument("args", nargs=argparse.REMAINDER)
        # Importing a service loads JAX and its web or gRPC stack: only once it is run.
        svc.set_defaults(handler=_forward(module), forward=True)


def _forward(module: str):
    def run(args: argparse.Namespace) -> int:
        return importlib.import_module(module).main(args.args)

    return run
