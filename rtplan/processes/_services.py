"""`services`: the planner service and the env server as subprocesses, at the ports they print."""

from __future__ import annotations

import contextlib
import os
import random
import re
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from rtplan.processes._children import Child, stop_all
from rtplan.processes._placement import Placement
from rtplan.processes._signals import Stopping

#: What the services print once they have bound their ports (`python -m server`,
#: `python -m planner_service`): the ports are read from these lines, never guessed beforehand.
_ENV_BOUND = re.compile(r"rtplan env server: http on \S+:(\d+) .*gRPC Env API on \S+:(\d+)")
#: ... and where it records its replay files (the settings' `record_dir`, absolute).
_ENV_REPLAYS = re.compile(r" \(replays in (.+)\)$")
_PLANNER_BOUND = re.compile(r"planner service bound to \S+:(\d+)")
#: ... and once a game plans ("planner service: GAME ready in ..."), or its gated requests do
#: ("... GAME gate ready in ...": its gate compiles before its forced budgets).
_READY, _GATE_READY = "ready", "gate ready"


#: Where the kernel draws the ports of `bind(("", 0))` from (Linux's default when unreadable).
_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = map(int, _EPHEMERAL.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def _free_port(rng: random.Random | None = None) -> int:
    """A local TCP port that was free a moment ago (bound, then released), drawn from below the
    kernel's ephemeral range: a service started meanwhile that binds port 0 (the env server,
    the first planner service) is given a port from that range, so it cannot take this one
    before the process it is meant for binds it. Within the range only when nothing below it
    is free."""
    low, _ = _ephemeral_range()
    rng = rng or random.Random()
    for _ in range(64):
        port = rng.randrange(max(1024, low // 2), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bind_error(port: int, host: str = "127.0.0.1") -> str | None:
    """Why `host:port` cannot be bound now (e.g. "Address already in use"), or None where it
    can (port 0 always can): bound and released at once, as the env server binds it (so a
    command that starts services can refuse a taken port before it starts anything)."""
    if port == 0:
        return None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        socket.create_server((host, port), family=family).close()
    except OSError as e:
        return os.strerror(e.errno) if e.errno else str(e)
    return None


def _echo(echo: bool | Callable[[str, str], None], name: str) -> bool | Callable[[str], None]:
    return (lambda line: echo(name, line)) if callable(echo) else echo


@contextlib.contextmanager
def services(
    game_ids: str | Sequence[str],
    *,
    planner: bool = True,
    planner_games: Sequence[str] | None = None,
    echo: bool | Callable[[str, str], None] = True,
    on_env: Callable[[dict], None] | None = None,
    background_nice: int | None = None,
    gated: bool = False,
    http_port: int = 0,
    access_log: bool = False,
    checkpoint_dir: Path | None = None,
    record_dir: Path | None = None,
    web_dir: Path | None = None,
    stopping: Stopping | None = None,
    placement: Placement | None = None,
    arena_port: int | None = None,
) -> Iterator[dict]:
    """Starts the planner service (for `planner_games`, default `game_ids`) and the env server
    (`game_ids` compiled at start-up, the others on first use); yields their addresses once the
    planner service plans every one of `game_ids` (`gated`: plans them gated, their forced
    budgets maybe still compiling). It compiles those first and the rest of `planner_games`
    after, one by one (its ListGames says which are ready).

    Each service binds its own ports (`http_port` 0: any free one; the others always) and
    prints them (`access_log`: the env server logs a line per HTTP request too); the
    addresses yielded are read from those lines, and so is where the env server records its
    replays (`replays`). `checkpoint_dir`, `record_dir` and `web_dir` default to the
    services' own defaults (`harness.checkpoint_root()`, replays/ and the shipped pages). On
    the way out both services are stopped together (`stop_all`), and killed at once once
    `stopping.hurry` is set (`stop_on_signals`).
    `placement`: the cores, devices and flags of each (`place_services`; None: anywhere).
    `arena_port`: also start the arena on this port (0: any free one) over the env server, in
    its default database (`addr["arena"]` its URL; the env server's lobby links to it).
    `echo`: True prints the services' lines as `[name] line`; a function gets (name, line).
    `on_env`: called with the addresses as soon as the env server answers, before the planner
    service is ready. `background_nice`: the rest of `planner_games` is served by a second
    planner service ("planner-others") that runs at this nice value from its start, so that
    nothing but `game_ids` ever runs in the first; the env server sends each game's calls to
    the service that serves it (its `--planner-address A;B`). `addr["planner"]` is that
    address setting. That service's port is picked here (free a moment ago, below the ports the
    kernel hands to the others' port 0) rather than read from its line: nothing waits for a
    process that starts at the lowest priority. With
    `gated` too, the first serves `game_ids` gated only (`--gated-only`: it never compiles
    their forced budgets) and the second serves those, after its own games.
    """
    placement = placement or Placement()
    game_ids = [game_ids] if isinstance(game_ids, str) else list(game_ids)
    py = [sys.executable, "-m", "rtplan"]
    ckpt = [] if checkpoint_dir is None else ["--checkpoint-dir", str(checkpoint_dir)]
    children: list[Child] = []
    try:
        env_argv = [
            *py,
            "env-server",
            "--http-port",
            str(http_port),
            "--grpc-port",
            "0",
            *ckpt,
            *([] if record_dir is None else ["--record-dir", str(record_dir)]),
            *([] if web_dir is None else ["--web-dir", str(web_dir)]),
            *(["--access-log"] if access_log else []),
            "--preload",
            *game_ids,
        ]
        planner_address = None
        if planner:
            first = [g for g in game_ids if planner_games is None or g in planner_games]
            others = [g for g in planner_games or () if g not in first]
            if background_nice is not None and first and others:
                # Played gated, `game_ids`' forced budgets are the second service's, last.
                later = [*others, *first] if gated else others
                split = [("planner", first, 0), ("planner-others", later, background_nice)]
            else:
                split = [("planner", list(dict.fromkeys([*first, *others])), 0)]
            where = placement.planner
            planners, ports = [], []
            for name, served, nice in split:
                # A niced service starts slowly (its imports too run on what CPU is left): its
                # port is picked here (free a moment ago), so nothing waits for it to bind.
                port = _free_port() if nice else 0
                ports.append(port)
                argv = [*py, "planner-service", "--port", str(port), "--games", ",".join(served)]
                argv += [*ckpt, *where.args]
                if gated and len(split) > 1 and not nice:
                    argv.append("--gated-only")
                child = Child(
                    name,
                    argv,
                    echo=_echo(echo, name),
                    cpus=where.cpus,
                    env=dict(where.env),
                    nice=nice,
                )
                children.append(child)
                planners.append(child)
            # The first binds before it compiles: the env server starts (and compiles) meanwhile.
            line = planners[0].wait_for("planner service bound to", timeout=600, stopping=stopping)
            ports[0] = int(_PLANNER_BOUND.search(line).group(1))
            planner_address = ";".join(f"127.0.0.1:{port}" for port in ports)
            env_argv += ["--planner-address", planner_address]
        if arena_port is not None:
            # Picked before the env server starts, so its lobby can link to the arena.
            arena_port = arena_port or _free_port()
            env_argv += ["--arena-url", f"http://127.0.0.1:{arena_port}"]
        where = placement.env_server
        env_argv += list(where.args)
        env = Child(
            "env-server",
            env_argv,
            echo=_echo(echo, "env-server"),
            cpus=where.cpus,
            env=dict(where.env),
        )
        children.append(env)
        bound = env.wait_for("rtplan env server:", 600, stopping)
        http, grpc_port = map(int, _ENV_BOUND.search(bound).groups())
        replays = _ENV_REPLAYS.search(bound)
        addr = {
            "http": f"http://127.0.0.1:{http}",
            "ws": f"ws://127.0.0.1:{http}",
            "grpc": f"127.0.0.1:{grpc_port}",
            "planner": planner_address,
            "replays": None if replays is None else replays.group(1),
        }
        if arena_port is not None:
            # Its port was picked above: the lobby (on_env) can name it before it answers.
            arena_argv = [*py, "arena", "serve", "--port", str(arena_port), "--env", addr["http"]]
            arena = Child(
                "arena", [*arena_argv, "--log-level", "warning"], echo=_echo(echo, "arena")
            )
            children.append(arena)
            addr["arena"] = f"http://127.0.0.1:{arena_port}"
        if on_env is not None:
            on_env(addr)
        if arena_port is not None:
            arena.wait_for("rtplan arena: http on", timeout=120, stopping=stopping)
        ready = _GATE_READY if gated else _READY
        for game_id in first if planner else ():
            said = f"planner service: {game_id} {ready} "
            planners[0].wait_for(said, timeout=900, stopping=stopping)
        yield addr
    finally:
        stop_all(children[::-1], hurry=None if stopping is None else stopping.hurry)
