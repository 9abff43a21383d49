"""What XLA:CPU's flags cost a tiny search: compile seconds, memory regions, run time.

The test suite is compile-bound, so `tests/conftest.py` compiles without LLVM's backend
optimisations and with XLA:CPU's older fusion emitters (`--xla_cpu_use_fusion_emitters=false`).
This measures each flag set side by side, in one fresh process each (pinned to one core, as a
test worker has one), on the tests' tiny Snake planner: two budgets, an `OptionRunner` over a
batch of 4 compiling a group size for each of k=1 and k=2, then a second group size.

    python -m bench.compile_flags        # ~2 minutes on 2 cores

Printed per flag set: the first call (game start, both groups' traces and compiles), the second
(new group sizes: traces and compiles only), 20 compiled calls, and the regions the process maps.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

FLAG_SETS = {
    "XLA default": "",
    "backend -O0": "--xla_backend_optimization_level=0",
    "older fusion emitters": "--xla_cpu_use_fusion_emitters=false",
    "both (the test suite)": (
        "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"
    ),
}

_PROBE = """
import json, sys, time
sys.path.insert(0, "tests")
import jax, numpy as np, dataclasses
jax.config.update("jax_enable_compilation_cache", False)
from rtplan.planner import Planner
from rtplan.planner.batching import OptionRunner
from rtplan.planner.episodes import start
from rtplan.jax_setup import map_count
from support import tiny_config
cfg = dataclasses.replace(tiny_config("snake-rt-v0"), budgets=(1, 2), simulations=(2, 4))
planner = Planner(cfg)
params = planner.init_params(jax.random.PRNGKey(0))
runner = OptionRunner(planner, max_batch=4)
states, keys = start(planner.game, np.arange(4))
def timed(ks, n=1):
    t = time.perf_counter()
    for _ in range(n):
        jax.block_until_ready(runner(params, keys, states, np.array(ks)))
    return time.perf_counter() - t
first, second = timed([1, 2, 2, 1]), timed([1, 2, 2, 2])
run = timed([1, 2, 2, 2], 20)
print(json.dumps(dict(first=first, second=second, run20=run, maps=(map_count() or [0])[0])))
"""


def measure(flags: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    env["XLA_FLAGS"] = flags
    pin = ["taskset", "-c", "0"] if sys.platform.startswith("linux") else []
    out = subprocess.run(
        [*pin, sys.executable, "-c", _PROBE],
        env=env,
        cwd=Path(__file__).resolve().parents[1],  # the probe imports tests/support.py
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compile_flags", description=__doc__)
    parser.parse_args(argv)
    rows = {name: measure(flags) for name, flags in FLAG_SETS.items()}
    base = rows["XLA default"]
    print(f"{'flags':24s} {'first s':>8s} {'second s':>9s} {'x default':>9s} "
          f"{'20 calls s':>10s} {'regions':>8s}")  # fmt: skip
    for name, r in rows.items():
        print(
            f"{name:24s} {r['first']:8.2f} {r['second']:9.2f} "
            f"{r['second'] / base['second']:9.2f} {r['run20']:10.3f} {r['maps']:8d}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
