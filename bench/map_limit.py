"""Stress: one process loads compiled programs until it nears the kernel's vm.max_map_count.

XLA:CPU maps 3 memory regions per kernel of every loaded executable and does not check that the
mapping succeeded, so a process that keeps enough executables alive dies of SIGSEGV inside a
compile or a compile-cache load (how a long pytest-xdist worker died in
`compilation_cache.get_executable_and_time`, issue 40). `rtplan.jax_setup.guard_map_count`
turns that into `MapCountExhausted`, raised before the load starts.

    python -m bench.map_limit              # guarded: prints the regions used, exits 0
    python -m bench.map_limit --no-guard   # the old behaviour: the process dies (SIGABRT/SIGSEGV)

Each load is a fresh `jax.jit` of the same program (an in-memory miss, a persistent-cache hit),
kept alive, as the caches of a long-lived worker keep theirs. Takes ~1 minute on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.map_limit", description=__doc__)
    parser.add_argument("--no-guard", action="store_true", help="load past the limit")
    parser.add_argument("--max-loads", type=int, default=5_000, help="stop after this many")
    args = parser.parse_args(argv)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="rtplan-map-limit-")
    os.environ["JAX_COMPILATION_CACHE_MAX_SIZE"] = str(1 << 30)
    import jax
    import jax.numpy as jnp

    from rtplan.jax_setup import MapCountExhausted, guard_map_count, map_count

    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    if not args.no_guard:
        guard_map_count()

    def program(x):
        for j in range(40):  # ~100 kernels at XLA's default fusion
            x = jnp.sin(x) * j + jnp.cumsum(x)
            x = jax.lax.sort(x) + x[::-1]
        return x

    if map_count() is None:
        print("map_limit: this kernel reports no memory-map count (not Linux); nothing to do")
        return 0
    x, kept, start = jnp.ones(64), [], time.perf_counter()
    try:
        for i in range(args.max_loads):
            fn = jax.jit(lambda x: program(x))  # a new function: JAX's in-memory caches miss
            fn(x).block_until_ready()
            kept.append(fn)
            if i % 50 == 0:
                used, limit = map_count()
                print(f"{i:5d} loads: {used:6d} of {limit} regions", flush=True)
    except MapCountExhausted as e:
        used, limit = map_count()
        took = time.perf_counter() - start
        print(f"refused load {len(kept) + 1} after {took:.0f} s ({used} of {limit} regions): {e}")
        return 0
    print(f"{len(kept)} loads fit under the limit (raise --max-loads to reach it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
