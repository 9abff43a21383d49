"""Lazy package exports (PEP 562): a package's public names load on first use."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level `__getattr__` and `__dir__` of a package whose public names load on
    first use, so that importing one light submodule does not import the heavy ones (JAX).

    Args:
        package: the package's `__name__` (being imported, so already in `sys.modules`).
        exports: each public name -> the module that defines it.

    Returns:
        `(__getattr__, __dir__)`: a name loads from its module once, then stays in the package.
    """
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        namespace[name] = value  # later lookups skip this hook
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
