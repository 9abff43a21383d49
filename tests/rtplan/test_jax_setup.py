"""JAX process set-up: where compiled programs are cached, and the memory-map guard."""

from __future__ import annotations

import dataclasses
import gc
import os
import subprocess
import sys
import weakref

import jax
import jax.numpy as jnp
import pytest

import rtplan.jax_setup as jax_setup
from support import ROOT, planner_fns, release_compiled_programs, tiny_config


def monitoring_listeners() -> list:
    from jax._src import monitoring  # the public module has no way to list them

    return list(monitoring._event_listeners)


PRINT_CACHE = (
    "import os; from rtplan.jax_setup import use_compile_cache; use_compile_cache(); "
    "print(os.environ['JAX_COMPILATION_CACHE_DIR'])"
)


def test_the_suite_and_every_process_it_starts_cache_inside_the_clone(tmp_path):
    """Nothing compiled outside the clone is read: not a user's cache, not the shell's."""
    assert os.environ["JAX_COMPILATION_CACHE_DIR"] == str(ROOT / ".pytest_cache" / "jax")
    env = dict(os.environ, HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    out = subprocess.run([sys.executable, "-c", PRINT_CACHE], env=env, capture_output=True)
    assert out.stdout.decode().strip() == str(ROOT / ".pytest_cache" / "jax"), out.stderr


def test_a_process_of_its_own_caches_under_xdg_cache_home_or_where_told(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    run = lambda **e: subprocess.run(  # noqa: E731
        [sys.executable, "-c", PRINT_CACHE], env={**env, **e}, capture_output=True, text=True
    ).stdout.strip()
    assert run() == str(tmp_path / "xdg" / "rtplan" / "jax")
    assert run(RTPLAN_COMPILE_CACHE=str(tmp_path / "mine")) == str(tmp_path / "mine")


def test_a_load_that_would_pass_the_map_limit_raises_instead_of_crashing(monkeypatch):
    """XLA:CPU dies of SIGSEGV when mmap fails while it loads a program; the guard (on in this
    suite and in every rtplan command that compiles much) refuses the load first."""
    jax_setup.guard_map_count()
    jax_setup.guard_map_count()  # idempotent: one listener
    assert monitoring_listeners().count(jax_setup._refuse_a_load_past_the_limit) == 1
    monkeypatch.setattr(jax_setup, "_unchecked", 0)
    limit = 65_530
    monkeypatch.setattr(jax_setup, "map_count", lambda: (limit - 100, limit))
    with pytest.raises(jax_setup.MapCountExhausted, match="vm.max_map_count=65530"):
        jax.jit(lambda x: x * 3 + 1)(jnp.ones(3))
    # With room, the guard lets loads pass and reads the count again only when they could
    # have used the headroom it saw.
    monkeypatch.setattr(jax_setup, "map_count", lambda: (10_000, limit))
    assert float(jax.jit(lambda x: x * 5 + 1)(jnp.ones(3))[0]) == 6.0
    assert 0 < jax_setup._unchecked <= (limit - 10_000 - jax_setup.MAP_HEADROOM) // 2_000


def test_releasing_compiled_programs_frees_what_the_process_wide_caches_held():
    """What the suite does between modules once a worker maps many regions (conftest)."""
    cfg = dataclasses.replace(tiny_config("snake-rt-v0"), budgets=(1,), simulations=(2,))
    held = weakref.ref(planner_fns(cfg)[0])
    gc.collect()
    assert held() is not None  # the lru_cache of `support.planner_fns` holds it
    release_compiled_programs()
    assert held() is None


def test_the_run_keeps_to_linuxs_default_map_limit_where_the_machine_allows_more(
    monkeypatch, tmp_path
):
    raised = tmp_path / "max_map_count"
    raised.write_text("1048576\n")
    assert jax_setup.map_count(limit_path=str(raised))[1] == 65_530  # conftest's cap
    monkeypatch.delenv(jax_setup.MAP_LIMIT_ENV)
    assert jax_setup.map_count(limit_path=str(raised))[1] == 1_048_576
