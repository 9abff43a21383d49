"""Every public name resolves: each module's and package's `__all__` and each lazy export."""

from __future__ import annotations

import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The packages the wheel ships (pyproject's `packages.find`) and the benchmarks.
TOP = (
    "arena",
    "bench",
    "games",
    "gate",
    "harness",
    "planner",
    "planner_service",
    "rtplan",
    "server",
)


def _modules() -> list[str]:
    """Every module and package under `TOP`, but scripts (`__main__`, the `env.py` Alembic
    runs) and generated stubs."""
    found = []
    for top in TOP:
        for path in sorted((ROOT / top).rglob("*.py")):
            if path.name in ("__main__.py", "env.py") or path.name.endswith(
                ("_pb2.py", "_pb2_grpc.py")
            ):
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def test_every_name_in_every_all_resolves():
    missing = []
    for name in _modules():
        module = importlib.import_module(name)
        public = list(getattr(module, "__all__", ()))
        if len(public) != len(set(public)):
            missing.append(f"{name}.__all__ repeats a name")
        missing += [f"{name}.{attr}" for attr in public if not hasattr(module, attr)]
    assert not missing, f"public names that do not resolve: {missing}"


def test_every_lazy_export_is_public_and_lives_where_its_table_says():
    lazy = [importlib.import_module(n) for n in _modules()]
    lazy = [m for m in lazy if "_EXPORTS" in vars(m)]
    assert {m.__name__ for m in lazy} >= {"gate", "planner"}
    for module in lazy:
        package, exports = module.__name__, module._EXPORTS
        assert set(exports) <= set(module.__all__), f"{package}: lazy names missing from __all__"
        for name, where in exports.items():
            home = importlib.import_module(where)
            assert name in vars(home), f"{package}.{name} is mapped to {where}, which lacks it"
            assert getattr(module, name) is vars(home)[name]
