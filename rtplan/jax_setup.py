"""JAX process set-up: the compile cache, XLA:CPU's device count, the map limit, several hosts."""

from __future__ import annotations

import contextlib
import os
import sys

# Imports no JAX at import time: each function must run before jax is first imported (or, for
# `init_distributed`, before it is first used) to take effect.

__all__ = [
    "COMPILE_CACHE_BYTES",
    "COMPILE_CACHE_ENV",
    "MAP_COUNT_NEEDED",
    "MAP_HEADROOM",
    "MAP_LIMIT_ENV",
    "MapCountExhausted",
    "check_map_count",
    "guard_map_count",
    "map_count",
    "init_distributed",
    "set_device_count",
    "use_compile_cache",
]

#: JAX's persistent compilation cache: a compiled option, search or step is written here once
#: and loaded by the next process (a resumed training, an evaluation, the services) instead of
#: compiled again, which on a 2-core CPU takes minutes. RTPLAN_COMPILE_CACHE=off disables it;
#: a JAX_COMPILATION_CACHE_DIR already set wins. A size limit makes JAX lock the folder (the
#: `filelock` package), so that processes sharing it never read a half-written entry.
COMPILE_CACHE_ENV = "RTPLAN_COMPILE_CACHE"
COMPILE_CACHE_BYTES = 4 << 30

#: XLA:CPU maps ~3 memory regions per compiled kernel; a gate run's ~60 option searches (4
#: budgets x its group sizes) and their evaluation come close to Linux's default 65,530.
MAP_COUNT_NEEDED = 262_144


def use_compile_cache() -> None:
    """Points JAX (this process and the services it starts) at the persistent compile cache,
    through the environment (`JAX_COMPILATION_CACHE_DIR`), so call it before jax is imported."""
    where = os.environ.get(COMPILE_CACHE_ENV, "")
    if where.lower() in ("off", "0", "no") or "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return
    if not where:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        where = os.path.join(base, "rtplan", "jax")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = where
    os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(COMPILE_CACHE_BYTES))


#: Memory regions that must stay free for a compile or a compile-cache load to start. XLA:CPU
#: maps 3 regions per kernel of a loaded executable (code, constants, data) and does not check
#: that mmap succeeded: at the limit the load dies of SIGSEGV, not an error. A tiny planner's
#: option is ~40 kernels, a shipped one a few hundred.
MAP_HEADROOM = 6_000
#: A bound on the regions one load adds (a shipped planner's search: a few hundred kernels): the
#: guard reads /proc/self/maps (~1 ms per 1,000 regions) only as often as loads could use the
#: headroom it last saw.
_MAPS_PER_LOAD = 2_000


#: Caps the limit `map_count` reports below the kernel's: the test suite sets Linux's default
#: (65530), so that a machine whose limit was raised fails where a new machine would crash.
MAP_LIMIT_ENV = "RTPLAN_MAP_LIMIT"

_unchecked = 0  # loads the guard may let pass before it reads the count again


class MapCountExhausted(MemoryError):
    """This process is about to exceed vm.max_map_count, where XLA:CPU would crash."""


def map_count(
    maps: str = "/proc/self/maps", limit_path: str = "/proc/sys/vm/max_map_count"
) -> tuple[int, int] | None:
    """(memory regions this process maps, the kernel's per-process limit, capped by
    `RTPLAN_MAP_LIMIT`), or None where the kernel does not say (not Linux)."""
    try:
        with open(maps, "rb") as f:
            used = f.read().count(b"\n")
        with open(limit_path) as f:
            limit = int(f.read())
        cap = os.environ.get(MAP_LIMIT_ENV)
        return used, min(limit, int(cap)) if cap else limit
    except (OSError, ValueError):
        return None


def _refuse_a_load_past_the_limit(event: str, **_: object) -> None:
    global _unchecked
    if event != "/jax/compilation_cache/compile_requests_use_cache":
        return
    if _unchecked > 0:
        _unchecked -= 1
        return
    counts = map_count()
    if counts is None:
        return
    used, limit = counts
    _unchecked = max(limit - used - MAP_HEADROOM, 0) // _MAPS_PER_LOAD
    if limit - used < MAP_HEADROOM:
        raise MapCountExhausted(
            f"this process maps {used} memory regions of its limit vm.max_map_count={limit}, "
            f"and XLA:CPU (3 per compiled kernel) crashes when it runs out: release compiled "
            "programs (drop their planners, jax.clear_caches()) or raise the limit: "
            "sudo sysctl -w vm.max_map_count=1048576"
        )


def guard_map_count() -> None:
    """Makes a compile or compile-cache load that would run this process out of memory regions
    raise `MapCountExhausted` instead of crashing inside XLA (idempotent). JAX announces each
    compile that uses the persistent cache (`use_compile_cache`, on in every rtplan process), so
    the guard rides on that event. Imports jax: call it after `set_device_count`."""
    from jax import monitoring

    # Once only (registering twice would check twice), and again after a
    # `monitoring.clear_event_listeners()` elsewhere took it away.
    with contextlib.suppress(AssertionError, ValueError):
        monitoring.unregister_event_listener(_refuse_a_load_past_the_limit)
    monitoring.register_event_listener(_refuse_a_load_past_the_limit)


def check_map_count(path: str = "/proc/sys/vm/max_map_count") -> None:
    """Warns on stderr when the kernel's per-process memory-map limit is too low for long JAX
    runs, and guards every later compile (`guard_map_count`). Imports jax: call it after
    `set_device_count`."""
    guard_map_count()
    try:
        with open(path) as f:
            limit = int(f.read())
    except (OSError, ValueError):
        return
    if limit < MAP_COUNT_NEEDED:
        print(
            f"rtplan: warning: vm.max_map_count is {limit}; XLA:CPU maps ~3 regions per "
            "compiled kernel, and the searches of a gate run or evaluation can exceed it "
            "(rtplan then stops with MapCountExhausted). Raise it: "
            "sudo sysctl -w vm.max_map_count=1048576",
            file=sys.stderr,
        )


def set_device_count(devices: int | None) -> None:
    """Asks XLA for `devices` host (CPU) devices (None: one per core); a no-op once jax is
    imported, since XLA reads its flags then."""
    if "jax" in sys.modules:
        return
    n = devices if devices is not None else os.cpu_count() or 1
    flags = [
        f
        for f in os.environ.get("XLA_FLAGS", "").split()
        if not f.startswith("--xla_force_host_platform_device_count")
    ]
    os.environ["XLA_FLAGS"] = " ".join([*flags, f"--xla_force_host_platform_device_count={n}"])


def init_distributed(coordinator: str, num_processes: int, process_id: int) -> None:
    """Joins this process to a `num_processes`-process JAX job (`jax.distributed.initialize`):
    `jax.devices()` then lists every process's devices, and a mesh over them runs one program
    whose collectives cross processes. Call it before any JAX computation.

    Args:
        coordinator: "HOST:PORT" of process 0, reachable from every process (process 0 listens).
        num_processes: processes in the job (one per host on a GPU cluster).
        process_id: this process's rank, 0 to num_processes - 1 (0 writes the run's files).
    """
    if not 0 <= process_id < num_processes:
        raise ValueError(f"process_id={process_id} is not in [0, num_processes={num_processes})")
    import jax

    # XLA:CPU has no cross-process collectives by default; gloo (over TCP) provides them. GPUs
    # use NCCL whatever this says.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=coordinator, num_processes=num_processes, process_id=process_id
    )
