"""A day of a public demo's load, compressed into an hour against one env server.

Usage: python -m bench.soak [--minutes 60] [--sample-s 30] [--seed 0]
       [--csv bench/results/soak.csv] [--figure docs/img/soak.png] [--log-dir DIR]

Starts one keyed env server (`--api-key-file`, a fresh key; the shipped checkpoints; a record
folder of its own that keeps `--replay-keep` replays) and drives it with the mix a public demo
meets, each in its own threads:

- `sessions`: recorded reflex sessions of the real-time games (Pac-Man, Tetris, Snake at
  9 FPS, 100-400 frames); a third are abandoned (deleted a few seconds in). A finished one's
  replay is fetched at once: a finished game whose replay cannot be read is a lost replay.
- `agents`: gRPC agents on REST-created sessions, each one of four behaviours: playing on time,
  stalling (seconds without an answer, then on), disconnecting mid-game without leaving, and
  sending garbage (wrong frames, actions out of range, a wrong token, bytes that are no
  message at all on a stream of their own).
- `viewers`: websocket viewers joining a live session for 2-20 s, some reading slowly, some
  sending a malformed message (the server closes that socket with a code) before leaving.
- `browser`: the lobby's calls (sessions, games, health, results), replay pages (index and
  boards) and GIFs rendered from the record folder.

Every `--sample-s` it samples the env server process (resident memory, open descriptors,
threads), the record folder (bytes, files) and the counters so far: sessions, ticks, late
ticks (over the server's 5 ms) and the largest tick lag of the ended sessions, finished
replays read and lost, errors (5xx answers, gRPC statuses the Env API does not list for what
was sent, exceptions). At the end it greps the server's and its own logs for the key and every
session token it was handed, prints a table and the verdicts (flat memory and descriptors,
bounded disk, no replay lost, no tick later than `TICK_BOUND_MS`, no error, no secret in a
log) and writes the samples (CSV, one row per sample with the run's id) and a figure.

The verdicts and the figure are `bench._soak_report`'s; the rest stays in one module, as the
load's workers share one state (`Soak`: its counters, secrets and errors) and one loop.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import secrets
import statistics
import tempfile
import threading
import time
import traceback
from collections import Counter
from pathlib import Path

import grpc
import httpx
import numpy as np
import psutil
from websockets.sync.client import connect as ws_connect

from bench import _soak_report as report
from bench._common import RESULTS, ROOT, append_rows, git_commit, utc_now
from rtplan.client import EnvClient, EnvError
from rtplan.processes import Place, Placement, services
from rtplan.v1 import env_pb2

GAMES = ("pacman-rt-v0", "tetris-rt-v0", "snake-rt-v0")
FPS = 9.0
#: The documented bound (docs/services.md, "A day of load"): no tick of any session is later
#: than one frame period at the demo's 9 FPS; later than that, a frame would have shown late
#: by a whole frame.
TICK_BOUND_MS = 1000.0 / FPS
#: Live sessions the server takes (its batched ticks compile every size up to this at
#: start-up, as a deployment would: a size compiling mid-game is a known source of late ticks).
MAX_SESSIONS = 12
#: The load runs at this nice value (Linux: a thread's own), the env server at 0: on one
#: machine the load stands in for clients on other machines, and must not starve the server.
LOAD_NICE = 10
FIELDS = (
    "run", "date", "commit", "t_s", "rss_mb", "fds", "threads", "cpu_pct", "record_mb",
    "record_files", "live", "created", "ended", "abandoned", "refused", "ticks", "late_ticks",
    "max_tick_lag_ms", "replays_read", "replays_lost", "viewers", "malformed_closed",
    "agents", "gifs", "errors",
)  # fmt: skip
#: The columns counted by the load (`Soak.count`).
COUNTERS = FIELDS[FIELDS.index("created") :]
COUNTERS = tuple(k for k in COUNTERS if k != "max_tick_lag_ms")


class Soak:
    """The load's shared state: counters, the secrets handed out, the errors seen."""

    def __init__(self, base: str, grpc_address: str, key: str, seed: int) -> None:
        self.base = base
        self.grpc = grpc_address
        self.key = key
        self.seed = seed
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.count: Counter[str] = Counter()
        self.max_lag_ms = 0.0
        self.tokens: set[str] = set()
        self.errors: list[str] = []
        #: The sessions with the largest tick lags: (lag ms, ended at, id, game, agent, late,
        #: ticks).
        self.worst: list[tuple] = []

    # ---- shared helpers ----

    def add(self, **counts: int) -> None:
        with self.lock:
            self.count.update(counts)

    def error(self, what: str) -> None:
        with self.lock:
            self.count["errors"] += 1
            if len(self.errors) < 50:
                self.errors.append(f"{time.strftime('%H:%M:%S')} {what}")

    def http(self, client: httpx.Client, method: str, path: str, **kw) -> httpx.Response:
        """One REST call; a 5xx answer is an error of the soak (4xx are the load's own)."""
        r = client.request(method, self.base + path, **kw)
        if r.status_code >= 500:
            self.error(f"{method} {path}: {r.status_code} {r.text[:200]}")
        return r

    def create(self, client: httpx.Client, body: dict) -> dict | None:
        auth = {"Authorization": f"Bearer {self.key}"}
        r = self.http(client, "POST", "/v1/sessions", json=body, headers=auth)
        if r.status_code == 429:  # the server is full: a public demo's refusal
            self.add(refused=1)
            return None
        if r.status_code != 201:
            self.error(f"create {body}: {r.status_code} {r.text[:200]}")
            return None
        created = r.json()
        with self.lock:
            self.tokens.add(created["token"])
        self.add(created=1)
        return created

    def _count_end(self, info: dict, *, abandoned: bool) -> None:
        stats = info["stats"]
        with self.lock:
            self.count.update(
                ended=1,
                abandoned=int(abandoned),
                ticks=stats["ticks"],
                late_ticks=stats["late_ticks"],
            )
            self.max_lag_ms = max(self.max_lag_ms, stats["max_tick_lag_ms"])
            cfg = info.get("config", {})
            self.worst.append(
                (stats["max_tick_lag_ms"], time.strftime("%H:%M:%S"), info["id"],
                 cfg.get("game_id"), cfg.get("agent"), stats["late_ticks"], stats["ticks"])
            )  # fmt: skip
            self.worst = sorted(self.worst, reverse=True)[:8]

    def ended(self, client: httpx.Client, sid: str) -> dict | None:
        """Waits for session `sid` to end and counts its ticks."""
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            r = self.http(client, "GET", f"/v1/sessions/{sid}")
            if r.status_code != 200:
                self.error(f"session {sid}: {r.status_code} {r.text[:200]}")
                return None
            info = r.json()
            if info["status"] not in ("waiting", "running"):
                self._count_end(info, abandoned=False)
                return info
            time.sleep(0.5)
        self.error(f"session {sid} still live after 600 s")
        return None

    def abandon(self, client: httpx.Client, created: dict) -> None:
        """Deletes a live session (a deleted session is forgotten: its ticks are counted from
        its last details first)."""
        r = self.http(client, "GET", f"/v1/sessions/{created['id']}")
        auth = {"Authorization": f"Bearer {created['token']}"}
        gone = self.http(client, "DELETE", f"/v1/sessions/{created['id']}", headers=auth)
        if r.status_code != 200 or gone.status_code != 200:
            self.error(f"abandon {created['id']}: {r.status_code}, {gone.status_code}")
            return
        self._count_end(r.json(), abandoned=True)

    def loop(self, name: str, step) -> None:
        """Runs `step(rng, client)` until the soak stops; an exception is an error, not an end."""
        rng = random.Random(f"{self.seed}-{name}")
        with httpx.Client(timeout=120) as client:
            while not self.stop.is_set():
                try:
                    step(rng, client)
                except Exception as e:  # noqa: BLE001 - counted and reported, the load goes on
                    self.error(f"{name}: {type(e).__name__}: {e}")
                    traceback.print_exc()
                    self.stop.wait(1.0)

    # ---- the load ----

    def sessions(self, rng: random.Random, client: httpx.Client) -> None:
        body = {
            "game": rng.choice(GAMES),
            "agent": "reflex",
            "fps": FPS,
            "seed": rng.randrange(2**31),
            "max_frames": rng.randrange(100, 400),
            "record": True,
        }
        created = self.create(client, body)
        if created is None:
            self.stop.wait(rng.uniform(2, 5))
            return
        if rng.random() < 1 / 3:
            self.stop.wait(rng.uniform(1, 8))
            self.abandon(client, created)
            return
        info = self.ended(client, created["id"])
        if info is not None and info["status"] == "finished":
            name = Path(info["replay"]).name if info.get("replay") else None
            r = self.http(client, "GET", f"/v1/replays/{name}") if name else None
            if r is not None and r.status_code == 200 and len(r.json()["frames"]) > 0:
                self.add(replays_read=1)
            else:
                self.add(replays_lost=1)
                self.error(f"lost replay of {created['id']}: {info.get('replay')}")
        self.stop.wait(rng.uniform(0, 3))

    def agents(self, rng: random.Random, client: httpx.Client) -> None:
        kind = rng.choice(("on_time", "stall", "disconnect", "garbage"))
        body = {"game": rng.choice(GAMES), "agent": "grpc", "fps": FPS, "max_frames": 200}
        created = self.create(client, body)
        if created is None:
            self.stop.wait(rng.uniform(2, 5))
            return
        self.add(agents=1)
        env = EnvClient(self.grpc)
        try:
            if kind == "garbage":
                self._garbage(rng, env, created)
            ep = env.play(session_id=created["id"], token=created["token"], timeout=300)
            stall_at = rng.randrange(20, 120) if kind == "stall" else -1
            leave_at = rng.randrange(20, 150) if kind == "disconnect" else -1
            for frame in ep:
                if self.stop.is_set() or frame.frame == leave_at:
                    break  # the channel closes below without a Leave
                if frame.frame == stall_at:
                    time.sleep(rng.uniform(2, 8))  # frames pass unanswered meanwhile
                legal = np.flatnonzero(frame.legal_action_mask)
                if kind == "garbage" and rng.random() < 0.2:
                    ep.act(frame.frame + rng.choice((-5, 7)), int(legal[0]))  # a wrong frame
                    ep.act(frame.frame, len(frame.legal_action_mask) + 3)  # out of range
                else:
                    ep.act(frame.frame, int(rng.choice(legal)))
            if leave_at < 0:
                ep.close()
        except EnvError as e:
            self.error(f"agent {kind} on {created['id']}: {e}")
        finally:
            env.close()  # a disconnecting agent's stream ends here, with no Leave sent
        if kind == "disconnect":  # the session plays on with its fallback, then is deleted
            self.stop.wait(rng.uniform(1, 4))
            self.abandon(client, created)
        else:
            self.ended(client, created["id"])

    def _garbage(self, rng: random.Random, env: EnvClient, created: dict) -> None:
        """A join with a wrong token, and a stream of bytes that parse as no message."""
        try:
            env.play(session_id=created["id"], token="not-" + secrets.token_hex(4), timeout=10)
            self.error("a wrong token joined")
        except EnvError:
            pass  # refused, as it must be
        channel = grpc.insecure_channel(self.grpc)
        raw = channel.stream_stream(
            "/rtplan.v1.Env/Play",
            request_serializer=lambda b: b,
            response_deserializer=env_pb2.ServerMessage.FromString,
        )
        junk = [rng.randbytes(rng.randrange(1, 64)) for _ in range(3)]
        try:
            for _ in raw(iter(junk), timeout=10):
                pass
        except grpc.RpcError as e:
            # The Env API answers bytes that are no AgentMessage with INTERNAL (gRPC's own
            # deserialization failure) or INVALID_ARGUMENT; anything else is an error.
            if e.code() not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT):
                self.error(f"garbage stream: {e.code().name}: {e.details()}")
        finally:
            channel.close()

    def viewers(self, rng: random.Random, client: httpx.Client) -> None:
        r = self.http(client, "GET", "/v1/sessions", params={"status": "running", "limit": 50})
        live = r.json()["sessions"] if r.status_code == 200 else []
        if not live:
            self.stop.wait(1.0)
            return
        sid = rng.choice(live)["id"]
        stay = rng.uniform(2, 20)
        slow = rng.random() < 0.3
        malformed = rng.random() < 0.15
        self.add(viewers=1)
        with ws_connect(f"{self.base.replace('http', 'ws', 1)}/v1/sessions/{sid}/ws") as ws:
            end = time.monotonic() + stay
            if malformed:
                ws.send("{not json" if rng.random() < 0.5 else "x" * 200_000)
            while time.monotonic() < end and not self.stop.is_set():
                try:
                    ws.recv(timeout=1.0)
                except TimeoutError:
                    continue
                except Exception as e:  # noqa: BLE001 - the socket's end: a code says why
                    code = getattr(getattr(e, "rcvd", None), "code", None)
                    if malformed and code in (1003, 1007, 1009):  # the server's codes for it
                        self.add(malformed_closed=1)
                    elif code not in (1000, 1001, None, 4404):
                        self.error(f"viewer of {sid}: closed {code}: {e}")
                    break
                if slow:
                    time.sleep(0.5)
        self.stop.wait(rng.uniform(0, 2))

    def browser(self, rng: random.Random, client: httpx.Client) -> None:
        for path in ("/", "/v1/sessions", "/v1/games", "/healthz", "/v1/results"):
            self.http(client, "GET", path)
        r = self.http(client, "GET", "/v1/replays", params={"limit": 50})
        names = [x["name"] for x in r.json()["replays"]] if r.status_code == 200 else []
        if names:
            name = rng.choice(names)
            # A replay pruned since the listing answers 404: a public demo's normal race.
            self.http(client, "GET", f"/v1/replays/{name}")
            self.http(client, "GET", f"/v1/replays/{name}/boards", params={"count": 16})
            if rng.random() < 0.5:
                g = self.http(client, "GET", f"/v1/replays/{name}/gif", params={"max_frames": 60})
                if g.status_code == 200:
                    self.add(gifs=1)
        self.stop.wait(rng.uniform(3, 8))


def _warm(soak: Soak) -> None:
    """Waits until every game has compiled (its batched ticks up to `MAX_SESSIONS` rows): a
    session's creation waits for its game's load, and one short session of each is played out;
    then the lobby's listings are read once (the server reads them at start-up).
    Neither these sessions nor their secrets are counted: the soak measures a warm server."""
    with httpx.Client(timeout=900) as client:
        auth = {"Authorization": f"Bearer {soak.key}"}
        for game in GAMES:
            body = {"game": game, "agent": "reflex", "fps": FPS, "max_frames": 5}
            r = client.post(soak.base + "/v1/sessions", json=body, headers=auth)
            r.raise_for_status()
            soak.tokens.add(r.json()["token"])  # grepped for all the same
            while client.get(f"{soak.base}/v1/sessions/{r.json()['id']}").json()["status"] in (
                "waiting",
                "running",
            ):
                time.sleep(0.2)
        for path in ("/v1/games", "/v1/results"):  # read at start-up, after the compiles
            client.get(soak.base + path).raise_for_status()


def _sample(soak: Soak, proc: psutil.Process, record_dir: Path, t0: float) -> dict:
    sizes = []
    for p in record_dir.iterdir():
        with contextlib.suppress(FileNotFoundError):  # pruned by the server meanwhile
            if p.is_file():
                sizes.append(p.stat().st_size)
    with soak.lock:
        c = dict(soak.count)
        lag = soak.max_lag_ms
    try:
        live = httpx.get(soak.base + "/healthz", timeout=30).json()["live_sessions"]
    except (httpx.HTTPError, ValueError):
        live = -1
    return {
        "t_s": round(time.monotonic() - t0, 1),
        "rss_mb": round(proc.memory_info().rss / 2**20, 1),
        "fds": proc.num_fds(),
        "threads": proc.num_threads(),
        "cpu_pct": round(proc.cpu_percent(None), 1),
        "record_mb": round(sum(sizes) / 2**20, 2),
        "record_files": len(sizes),
        "live": live,
        "max_tick_lag_ms": round(lag, 2),
        **{k: c.get(k, 0) for k in COUNTERS},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--sample-s", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--replay-keep", type=int, default=100)
    ap.add_argument("--csv", type=Path, default=RESULTS / "soak.csv")
    ap.add_argument("--figure", type=Path, default=ROOT / "docs" / "img" / "soak.png")
    ap.add_argument("--log-dir", type=Path, default=None, help="default: a temporary folder")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="rtplan-soak-"))
    log_dir = args.log_dir or work
    log_dir.mkdir(parents=True, exist_ok=True)
    record_dir = work / "replays"
    record_dir.mkdir()
    key = "soak-" + secrets.token_urlsafe(24)
    key_file = work / "keys"
    key_file.write_text(f"# the soak's key\n{key}\n")
    server_log = (log_dir / "env-server.log").open("w")
    flags = (
        "--api-key-file", str(key_file), "--replay-keep", str(args.replay_keep),
        "--max-sessions", str(MAX_SESSIONS), "--batch-warm-rows", str(MAX_SESSIONS),
        "--log-level", "info",
    )  # fmt: skip
    run = f"soak-{utc_now()}"
    placement = Placement(env_server=Place(args=flags))
    with services(
        GAMES,
        planner=False,
        record_dir=record_dir,
        access_log=True,
        placement=placement,
        echo=lambda name, line: (server_log.write(line + "\n"), server_log.flush()),
    ) as addr:
        proc = next(
            p
            for p in psutil.Process().children(recursive=True)
            if "env-server" in " ".join(p.cmdline())
        )
        soak = Soak(addr["http"], addr["grpc"], key, args.seed)
        _warm(soak)
        workers = {"sessions": 3, "agents": 2, "viewers": 3, "browser": 1}
        threads = [
            threading.Thread(
                target=soak.loop, args=(f"{kind}{i}", getattr(soak, kind)), daemon=True
            )
            for kind, n in workers.items()
            for i in range(n)
        ]
        os.nice(LOAD_NICE)  # this thread's priority, which the load's threads inherit
        t0 = time.monotonic()
        proc.cpu_percent(None)
        for th in threads:
            th.start()
        rows = []
        end = t0 + args.minutes * 60
        while True:
            row = {"run": run, "date": utc_now(), "commit": git_commit(short=True)}
            row |= _sample(soak, proc, record_dir, t0)
            rows.append(row)
            print(" ".join(f"{k}={row[k]}" for k in FIELDS[3:]), flush=True)
            if time.monotonic() >= end:
                break
            time.sleep(min(args.sample_s, max(0.0, end - time.monotonic())))
        soak.stop.set()
        for th in threads:
            th.join(timeout=120)
        rows.append(
            {"run": run, "date": utc_now(), "commit": git_commit(short=True)}
            | _sample(soak, proc, record_dir, t0)
        )
    server_log.close()
    secrets_given = {key, *soak.tokens}
    leaks = []
    for log in sorted(log_dir.glob("*.log")):
        text = log.read_text(errors="replace")
        found = sum(1 for s in secrets_given if s in text)
        if found:
            leaks.append(f"{log.name}: {found} secret(s)")
    append_rows(args.csv, rows, FIELDS)
    verdicts = report.verdicts(rows, soak.max_lag_ms, TICK_BOUND_MS, args.replay_keep, leaks)
    last = rows[-1]
    print(f"\n{run}: {args.minutes:g} min, commit {git_commit(short=True)}")
    rss = [r["rss_mb"] for r in rows]
    print(
        f"  sessions created {last['created']}, ended {last['ended']} "
        f"(abandoned {last['abandoned']}), refused when full {last['refused']}; "
        f"agents {last['agents']}, viewers {last['viewers']} "
        f"(malformed closed {last['malformed_closed']}), GIFs {last['gifs']}"
    )
    print(
        f"  ticks {last['ticks']}, late {last['late_ticks']} "
        f"({last['late_ticks'] / max(last['ticks'], 1):.3%}), max lag {soak.max_lag_ms:.1f} ms; "
        f"memory {rss[0]}..{max(rss)} MB (median {statistics.median(rss)}), "
        f"descriptors {min(r['fds'] for r in rows)}..{max(r['fds'] for r in rows)}"
    )
    ok = True
    for what, (held, figure) in verdicts.items():
        ok &= held
        print(f"  [{'ok' if held else 'FAIL'}] {what}: {figure}")
    for worst in soak.worst:
        line = "  largest lag: {:.1f} ms, ended {}, session {} ({}, {}), {} of {} late"
        print(line.format(*worst))
    for err in soak.errors[:20]:
        print(f"  error: {err}")
    report.figure(rows, args.figure, f"{run} ({git_commit(short=True)}): {args.minutes:g} min")
    (log_dir / "soak-summary.json").write_text(
        json.dumps({k: [bool(v[0]), v[1]] for k, v in verdicts.items()}, indent=1)
    )
    print(f"  logs: {log_dir}; samples: {args.csv}; figure: {args.figure}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
