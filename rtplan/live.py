"""The live demo: planner service + env server + a game played by the planner agent, watched."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rtplan.harness.checkpoint import checkpoint_root, gate_path, planner_file, planner_path
from rtplan.processes import (
    HTTPStatusError,
    Place,
    Placement,
    Stopping,
    bind_error,
    http_json,
    service_cwd,
    services,
    stop_on_signals,
)


def watch(
    ws_url: str, *, every: int = 1, max_frames: int = 0, stopping: Stopping | None = None
) -> dict | None:
    """Prints the frames of a session's websocket stream; returns the last frame message.
    `stopping`: checked at each message (`Stopping.check`)."""
    from websockets.sync.client import connect

    last = None
    with connect(ws_url, max_size=2**22) as ws:
        for raw in ws:
            if stopping is not None:
                stopping.check()
            msg = json.loads(raw)
            if msg.get("type") != "frame":
                continue
            last = msg
            prev = msg.get("previous") or {}
            if msg["frame"] % every == 0 or msg["done"]:
                stats = msg.get("stats", {})
                print(
                    f"frame {msg['frame']:5d}  action {prev.get('action', '-'):>2}  "
                    f"{prev.get('provenance', '-'):>8} via {prev.get('answer_source', '-'):>7}"
                    f"  k={prev.get('k') or '-'}  search {prev.get('latency_ms') or 0:6.1f} ms"
                    f"  return {msg['episode_return']:7.1f}  misses {stats.get('planner_misses')}"
                    f"  late ticks {stats.get('late_ticks')}",
                    flush=True,
                )
            if msg["done"] or (max_frames and msg["frame"] >= max_frames):
                break
    return last


@dataclass(frozen=True)
class DemoGame:
    """What a demo plays and how its planner agent picks its budgets: the gate's where `game`
    ships one, else the forced `k`. The web demo and the headless one both start from `choose`,
    so `rtplan demo` plays the same game the same way with or without `--headless`."""

    game: str
    #: The checkpoints' root that holds `game`'s planner (and its gate, where `gated`).
    checkpoint_dir: Path
    gated: bool
    #: The forced budget of a game without a gate (unused where `gated`).
    k: int

    @classmethod
    def choose(cls, game: str | None, checkpoint_dir: Path | None, *, k: int) -> DemoGame:
        """`game` (None: `demo_game`, the showcase) from `checkpoint_root(checkpoint_dir)`.

        Raises:
            CheckpointError: that root has no planner of the game.
        """
        game = game or demo_game(checkpoint_root(checkpoint_dir))
        ckpt = _planner_root(checkpoint_dir, game)
        return cls(game, ckpt, gate_path(ckpt, game).is_file(), k)

    @property
    def session(self) -> dict:
        """The fields of its POST /v1/sessions: the planner agent, with `k` only when forced
        (left out, the gate picks)."""
        return {"game": self.game, "agent": "planner", **({} if self.gated else {"k": self.k})}

    @property
    def played_by(self) -> str:
        """How its budgets are picked, for the terminal."""
        if self.gated:
            return "its gate's budgets"
        return f"forced k={self.k} (no gate for {self.game} yet)"


def run_demo(
    game: str | None = None,
    *,
    k: int = 2,
    fps: float = 9.0,
    frames: int = 300,
    seed: int = 0,
    every: int = 10,
    example_agent: bool = True,
    port: int = 0,
    access_log: bool = False,
    checkpoint_dir: Path | None = None,
    record_dir: Path | None = None,
    web_dir: Path | None = None,
) -> int:
    """Runs the live demo headless, printing frames; returns an exit code. `game` and `k`: as
    the web demo's (`DemoGame.choose`: the showcase game, by its gate). `example_agent`: the
    example agent (`python -m rtplan.examples.random_agent`, `EXAMPLE_AGENT`) plays a session of
    its own beside it. `port`: the env server's HTTP port, which serves the lobby too (0: any
    free); `access_log`: it logs a line per HTTP request.

    Raises:
        CheckpointError: `checkpoint_dir` (default `checkpoint_root()`) has no planner of `game`.
    """
    demo = DemoGame.choose(game, checkpoint_dir, k=k)
    print(
        f"starting the planner service and the env server for {demo.game} (compiling takes a while)"
    )
    with stop_on_signals() as stopping:
        try:
            with services(
                demo.game,
                gated=demo.gated,
                http_port=port,
                access_log=access_log,
                checkpoint_dir=demo.checkpoint_dir,
                record_dir=record_dir,
                web_dir=web_dir,
                stopping=stopping,
            ) as addr:
                _headless_session(addr, demo, fps, frames, seed, every, example_agent, stopping)
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP: the services have stopped
            print("\nrtplan demo: stopped", flush=True)
    return 0


def _headless_session(
    addr: dict,
    demo: DemoGame,
    fps: float,
    frames: int,
    seed: int,
    every: int,
    example_agent: bool,
    stopping: Stopping,
) -> None:
    """`run_demo`'s session: started, watched to its end (or `frames`), summarised."""
    created = http_json(
        "POST",
        f"{addr['http']}/v1/sessions",
        {**demo.session, "fps": fps, "seed": seed, "record": True},
    )
    sid = created["id"]
    game = demo.game
    print(
        f"\nlive session {sid}: {game} played by the planner agent with {demo.played_by} "
        f"at {fps:g} FPS"
    )
    print(f"browse it:  {addr['http']}/ (the lobby)")
    print(f"watch it:   websocket {addr['ws']}{created['viewer_path']}")
    print(f"inspect it: curl {addr['http']}/v1/sessions/{sid}")
    print(f"replays in: {addr['replays']}  (--record-dir or RTPLAN_SERVER_RECORD_DIR moves them)")
    # Flushed: whoever reads a piped demo (a log, a test) sees the session as it starts.
    print(
        f"your agent: {_python()} -m {EXAMPLE_AGENT} --address {addr['grpc']} --game {game}\n",
        flush=True,
    )
    agent = None
    try:
        if example_agent:
            # Held signals: a stop now waits until `agent` names the process the clean-up kills.
            with stopping.held():
                agent = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        EXAMPLE_AGENT,
                        "--address",
                        addr["grpc"],
                        "--game",
                        game,
                        "--fps",
                        str(fps),
                        "--max-frames",
                        str(min(frames or 100, 100)),
                    ],
                    cwd=service_cwd(),
                )
        viewer = f"{addr['ws']}{created['viewer_path']}"
        watch(viewer, every=every, max_frames=frames, stopping=stopping)
        details = http_json("GET", f"{addr['http']}/v1/sessions/{sid}")
        with contextlib.suppress(RuntimeError):
            http_json("DELETE", f"{addr['http']}/v1/sessions/{sid}", token=created["token"])
        until = time.monotonic() + 120
        while agent is not None and agent.poll() is None and time.monotonic() < until:
            stopping.sleep(0.2)
    finally:
        if agent is not None and agent.poll() is None:  # interrupted, or still playing
            agent.kill()
            agent.wait()
    stats = details.get("stats", {})
    print(f"\nsession {sid}: frame {details['frame']}, return {details['episode_return']:.1f}")
    print("stats: " + json.dumps(stats, sort_keys=True))
    if details.get("replay"):
        print(f"replay file: {details['replay']}")
    sys.stdout.flush()


#: The example agent the headless demo runs beside its session (`python -m`; it ships in the
#: package, so the command it prints works in a checkout and in an installed package alike).
EXAMPLE_AGENT = "rtplan.examples.random_agent"


def _python() -> str:
    """How to name this interpreter in a command to copy: `python` where that is the one on
    PATH (the same bin folder, e.g. an activated venv), else its full path."""
    found = shutil.which("python")
    here = Path(sys.executable)
    return "python" if found is not None and Path(found).parent == here.parent else str(here)


def _planner_root(checkpoint_dir: Path | None, game: str) -> Path:
    """The checkpoints' root (`checkpoint_root(checkpoint_dir)`), checked to hold `game`'s
    planner; CheckpointError names where it looked and the override flag otherwise."""
    ckpt = checkpoint_root(checkpoint_dir)
    planner_file(game, root=ckpt, flag="--checkpoint-dir")
    return ckpt


#: The web demo's lobby port when none is given (the env server's default).
DEMO_HTTP_PORT = 8000
#: The demo's arena port: the arena's own default, so `rtplan arena register` and an agent's
#: `--ranked` reach it with no flag (any free port when it is taken).
DEMO_ARENA_PORT = 8100
#: The reference the demo's arena plays for its game, in the background: the policy-only
#: player (the network's argmax: no search, so it takes no CPU from the showcase's planner).
#: `rtplan arena references` plays the planner's budgets and the gate.
DEMO_REFERENCES = ("policy-only",)


def demo_game(checkpoint_dir: Path) -> str:
    """The game the web demo plays by default: the best-ranked demo game that ships a gate in
    `checkpoint_dir` (so `make demo` shows gated MCTS), by the game records (`rtplan.demo`)."""
    from rtplan.demo import demo_game as choose

    return choose(lambda g: gate_path(checkpoint_dir, g).is_file())


def run_web_demo(
    game: str | None = None,
    *,
    k: int = 2,
    fps: float = 9.0,
    frames: int = 0,
    seed: int = 0,
    port: int = DEMO_HTTP_PORT,
    access_log: bool = False,
    verbose: bool = False,
    planner_games: list[str] | None = None,
    checkpoint_dir: Path | None = None,
    record_dir: Path | None = None,
    web_dir: Path | None = None,
) -> int:
    """The live web demo: the planner service and the env server, a game played by the planner
    agent (the gate's budgets where the game has a gate, else the forced `k`) and recorded,
    started again when it ends; serves the lobby until Ctrl-C. `game` None: `demo_game`.
    `planner_games`: what the planner service serves besides `game` (None or ["all"]: every game
    with a checkpoint). `access_log`: the env server logs a line per HTTP request (off: each
    open page polls about 4 times a second). `verbose`: every line of its services as it comes
    (else a traceback is its exception's line, and uvicorn's start-up and the planner
    services' ports are left out: `_DemoEcho`). It prints the lobby's address as soon as the env
    server answers, then one line as each game starts compiling (its budgets, an estimate) and
    one once it is ready.
    The demo's game has a planner service of its own and starts once it plans (gated: once
    its gate and the options it plays are compiled, before its forced budgets); the others are
    served by a second planner service at nice `BACKGROUND_NICE` (so neither their compiles nor
    their loads ever take the showcase's CPU or its service's GIL), and the lobby offers each
    as it becomes ready. Returns an exit code.

    Raises:
        CheckpointError: `checkpoint_dir` (default `checkpoint_root()`) has no planner of `game`
            or of one of `planner_games`.
    """
    from rtplan import games

    demo = DemoGame.choose(game, checkpoint_dir, k=k)
    game, ckpt = demo.game, demo.checkpoint_dir
    if planner_games in (None, ["all"]):
        wanted = [game, *games.registered_games()]
    else:
        wanted = [game, *planner_games]
    served = [g for g in dict.fromkeys(wanted) if planner_path(ckpt, g).exists()]
    for g in planner_games or ():  # CheckpointError names the first one missing
        if g not in served and g != "all":
            planner_file(g, root=ckpt, flag="--checkpoint-dir, or leave it out of --planner-games")
    body = {**demo.session, "fps": fps, "record": True, "max_frames": frames}
    body["featured"] = True  # /tv shows it, and follows each next game
    _say(
        f"starting the planner service for {', '.join(served)} and the env server for {game} "
        "(compiling takes a while; the compile cache makes the next start faster)"
    )
    start = time.monotonic()

    def lobby(addr: dict) -> None:
        # As soon as the env server answers: the lobby offers each game as it becomes ready.
        _say(f"rtplan demo: lobby at {addr['http']}/  (Ctrl-C stops)")
        _say(f"rtplan demo: watch at {addr['http']}/tv  (follows each game)")
        _say(
            f"rtplan demo: arena at {addr['arena']}/arena  (rtplan arena register NAME "
            "--version 1; then an agent's --ranked: docs/arena.md)"
        )
        _say(
            f"rtplan demo: the planner agent plays {game} once its planner is ready "
            f"(the other games compile behind it, in a planner service of their own at the "
            "lowest priority)"
        )

    with stop_on_signals() as stopping:
        try:
            with services(
                game,
                access_log=access_log,
                planner_games=served,
                echo=_DemoEcho(verbose=verbose),
                on_env=lobby,
                background_nice=BACKGROUND_NICE,
                gated=demo.gated,
                placement=demo_placement(),
                http_port=port,
                arena_port=0 if bind_error(DEMO_ARENA_PORT) else DEMO_ARENA_PORT,
                checkpoint_dir=ckpt,
                record_dir=record_dir,
                web_dir=web_dir,
                stopping=stopping,
            ) as addr:
                _say(f"rtplan demo: started in {time.monotonic() - start:.0f} s")
                _say(
                    f"rtplan demo: replays in {addr['replays']}  (--record-dir or "
                    "RTPLAN_SERVER_RECORD_DIR moves them)"
                )
                _say(f"the planner agent plays {game} at {fps:g} FPS with {demo.played_by}")
                _enter_references(addr["arena"], game)
                _games_until_stopped(addr, body, seed, stopping)
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP: the services have stopped
            _say("\nrtplan demo: stopped")
    return 0


def _enter_references(arena: str, game: str) -> None:
    """Asks the demo's arena to play `DEMO_REFERENCES` on `game`'s standard tier (a ranked
    game only; a reference that has played its run already is left as it is)."""
    from rtplan.arena.ranked import GAMES

    if game not in GAMES:
        return
    body = {"game": game, "tier": "standard", "players": list(DEMO_REFERENCES)}
    try:
        http_json("POST", f"{arena}/v1/references", body)
    except HTTPStatusError as e:
        if "run_finished" not in str(e):
            _say(f"rtplan demo: the arena did not enter its references: {e}")


#: The nice value of the demo's planner service for the games besides the showcase
#: (`services(background_nice=...)`): the lowest, so they never take CPU from its searches.
BACKGROUND_NICE = 19

#: XLA:CPU without its fusion emitters: the showcase's planner (Tetris) compiled in 0.77x the
#: time on a cold cache (71 s against 92 s), its searches as fast (p50 within noise at each k)
#: and their actions the same (Tetris gated at every k from 6 states; Snake's k2 and gate
#: evaluations frame for frame). Only the demo's planner services take it:
#: the flags are part of the compile cache's key, so other commands keep their cached programs.
DEMO_XLA_FLAGS = "--xla_cpu_use_fusion_emitters=false"


def demo_placement() -> Placement:
    """Where the web demo's services run: anywhere, the planner service with `DEMO_XLA_FLAGS`
    added to the XLA_FLAGS it inherits."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    name = DEMO_XLA_FLAGS.split("=")[0]
    if not any(f.split("=")[0] == name for f in flags):  # one set by the user wins
        flags.append(DEMO_XLA_FLAGS)
    return Placement(planner=Place(env=(("XLA_FLAGS", " ".join(flags)),)))


#: The planner services' progress lines (`planner_service.__main__`), which the demo shows as
#: its own: "planner service: GAME compiling (...)", "... GAME gate ready in ..." and
#: "... GAME ready in ...".
_PROGRESS = re.compile(r"^planner service: (\S+ (?:compiling \(|ready in |gate ready in ).*)$")


def _say(text: str) -> None:
    """Prints a line in one write: the services' output pumps print from their own threads, and
    `print` writes the text and its newline apart (two lines could run together)."""
    sys.stdout.write(f"{text}\n")
    sys.stdout.flush()


#: Lines of its services the web demo leaves out (`--verbose` shows them): uvicorn's start-up
#: and shutdown, the planner services' ports, which the demo reads and never needs to show, and
#: the planner services' INFO and DEBUG log lines ("2026-12-07 20:44:33,713 INFO name ...": what
#: they compile, said by the demo's own progress lines; a library's first-run notes).
_QUIET = re.compile(
    r"^(?:INFO: +(?:Started server process|Waiting for application (?:startup|shutdown)\.|"
    r"Application (?:startup|shutdown) complete\.|Shutting down|Finished server process)"
    r"|planner service (?:bound to|listening on) "
    r"|\d{4}-\d\d-\d\d [\d:,.]+ (?:INFO|DEBUG) )"
)
#: Lines inside a Python traceback after its first: its frames (indented), blank lines and the
#: sentences that chain two exceptions; ... and those that may follow an exception's line.
_TRACEBACK_BODY = re.compile(r"^(?:\s|$|During handling of |The above exception )")
_CHAINING = re.compile(r"^(?:$|During handling of |The above exception )")


class _DemoEcho:
    """The web demo's view of its services' lines: the planner's progress as its own lines, a
    traceback as its exception's line only, the `_QUIET` lines left out and the rest as they
    come; with `verbose`, every line as it comes."""

    def __init__(self, *, verbose: bool = False) -> None:
        self.verbose = verbose
        self._traceback: set[str] = set()  # the services in the middle of a traceback
        self._raised: set[str] = set()  # ... and those that just printed an exception's line

    def __call__(self, name: str, line: str) -> None:
        if self.verbose:
            _say(f"[{name}] {line}")
            return
        if line.startswith("Traceback (most recent call last):"):
            self._traceback.add(name)
            return
        if name in self._traceback:
            if _TRACEBACK_BODY.match(line):
                return
            self._traceback.discard(name)  # the exception's own line ends it
            self._raised.add(name)  # ... unless another exception is chained to it
            _say(f"[{name}] {line}  (rtplan demo --verbose shows the traceback)")
            return
        if name in self._raised:
            if _CHAINING.match(line):
                return
            self._raised.discard(name)
        found = _PROGRESS.match(line)
        if found:
            _say(f"rtplan demo: {found.group(1)}")
        elif not _QUIET.match(line):
            _say(f"[{name}] {line}")


def _games_until_stopped(addr: dict, body: dict, seed: int, stopping: Stopping) -> None:
    """`run_web_demo`'s loop: a session of `body` from `seed` on, the next when it ends."""
    while True:
        created = http_json("POST", f"{addr['http']}/v1/sessions", {**body, "seed": seed})
        sid = created["id"]
        _say(f"game {seed}: {addr['http']}/watch?session={sid}")
        while True:
            info = http_json("GET", f"{addr['http']}/v1/sessions/{sid}")
            if info["status"] not in ("waiting", "running"):
                break
            stopping.sleep(0.5)
        _say(
            f"game {seed} {info['status']} ({info['reason']}) at frame {info['frame']}, "
            f"return {info['episode_return']:.1f}; starting the next"
        )
        seed += 1
