"""The compile-cache filler: a planner service's later games compiled at nice 19 in a child."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

import jax

from rtplan.planner_service.engine import Engine
from rtplan.planner_service.settings import PlannerServiceSettings
from rtplan.processes import Child, exit_with_parent

log = logging.getLogger("planner_service")

#: What the filler prints once a game's executables are in the compile cache.
FILLED = "compile cache filled:"


def cache_dir() -> str | None:
    """The persistent compile cache this process writes to (None: none)."""
    return jax.config.jax_compilation_cache_dir or os.environ.get("JAX_COMPILATION_CACHE_DIR")


class CacheFiller:
    """A child process, at nice `nice`, that compiles `game_ids` (the service's settings
    otherwise) into the persistent compile cache, one after another, and exits. Its compiles
    (XLA's thread pools included) all run at that priority, which a thread of the service
    itself could not give them: XLA compiles on process-wide pools started with the process.
    The service then loads each game from the cache (`wait`), a fraction of a compile.
    """

    def __init__(
        self, settings: PlannerServiceSettings, game_ids: Sequence[str], *, nice: int = 19
    ) -> None:
        child = settings.model_copy(update={"games": tuple(game_ids), "port": 0})
        argv = [sys.executable, "-c", _BOOT.format(nice=nice), child.model_dump_json()]
        self.child = Child("cache-filler", argv, echo=False)

    def wait(self, game_id: str) -> bool:
        """Blocks until the child has compiled `game_id`; False when it ended without (the
        service then compiles the game itself)."""
        try:
            self.child.wait_for(f"{FILLED} {game_id}", timeout=3600)
        except RuntimeError as e:
            log.warning("the compile-cache filler did not compile %s: %s", game_id, e)
            return False
        return True

    def stop(self) -> None:
        self.child.stop(timeout=2.0)


#: The child's program: its priority lowered first, before any import starts a thread (JAX's
#: and gRPC's start theirs at import), so that every thread it ever runs inherits it.
_BOOT = (
    "import os, sys; os.nice(max(0, {nice} - os.nice(0))); "
    "from rtplan.planner_service._cache_fill import main; sys.exit(main(sys.argv[1:]))"
)


def main(argv: Sequence[str]) -> int:
    """The child (`_BOOT`): compiles the games of the settings `argv[0]` (JSON)."""
    exit_with_parent()
    settings = PlannerServiceSettings.model_validate_json(argv[0])
    engine = Engine.from_settings(settings)
    engine.compile(on_ready=lambda game_id: print(f"{FILLED} {game_id}", flush=True))
    return 0
