"""JAX process set-up: the compile cache, XLA:CPU's device count, the map limit, several hosts."""

from __future__ import annotations

import os
import sys

# Imports no JAX at import time: each function must run before jax is first imported (or, for
# `init_distributed`, before it is first used) to take effect.

__all__ = [
    "COMPILE_CACHE_BYTES",
    "COMPILE_CACHE_ENV",
    "MAP_COUNT_NEEDED",
    "check_map_count",
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


def check_map_count(path: str = "/proc/sys/vm/max_map_count") -> None:
    """Warns on stderr when the kernel's per-process memory-map limit is too low for long JAX
    runs (XLA:CPU then fails with 'Cannot allocate memory')."""
    try:
        with open(path) as f:
            limit = int(f.read())
    except (OSError, ValueError):
        return
    if limit < MAP_COUNT_NEEDED:
        print(
            f"rtplan: warning: vm.max_map_count is {limit}; XLA:CPU maps ~3 regions per "
            "compiled kernel, and the searches of a gate run or evaluation can exceed it "
            "(LLVM then fails with 'Cannot allocate memory'). Raise it: "
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
