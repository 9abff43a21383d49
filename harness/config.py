"""Typed run configs: fields with help text, command-line flags and JSON from the same fields."""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Collection, Mapping
from typing import Any

# Imports nothing heavy: a CLI builds its parser from a config before JAX may load (the device
# count of XLA:CPU is fixed when jax is first imported).

_FLAG_TYPES = (int, float, str, bool)


def knob(default: Any = dataclasses.MISSING, help: str = "") -> Any:  # noqa: A002
    """A dataclass field with its help text in the metadata (`--help`, docs, provenance).

    Args:
        default: the field's default; left out, the field is required.
        help: one or two sentences: what the knob does, and what None means if it may be None.
    """
    return dataclasses.field(default=default, metadata={"help": help})


def help_of(field: dataclasses.Field) -> str:
    """The help text `knob` stored on a field ("" when none)."""
    return field.metadata.get("help", "")


def _flag_type(cls: type, field: dataclasses.Field) -> tuple[type, bool]:
    """(scalar type, is a list) of a field's flag: its annotation, or `X` of `X | None`; a
    `tuple[X, ...]` is a list of X (one flag, several values)."""
    hint = typing.get_type_hints(cls)[field.name]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = args[0] if len(args) == 1 else hint
    many = typing.get_origin(hint) is tuple
    if many:  # only tuple[X, ...]: a fixed-length tuple is no flag type
        args = typing.get_args(hint)
        hint = args[0] if len(args) == 2 and args[1] is Ellipsis else hint
    if hint not in _FLAG_TYPES or (many and hint is bool):
        raise TypeError(
            f"{cls.__name__}.{field.name}: {typing.get_type_hints(cls)[field.name]} is not a "
            "flag type (int, float, str, bool, tuple[int | float | str, ...] or one of them | "
            "None); exclude it"
        )
    return hint, many


def flag_fields(
    cls: type, *, only: Collection[str] | None = None, exclude: Collection[str] = ()
) -> list[dataclasses.Field]:
    """The fields of `cls` that `add_flags` turns into flags, in declaration order."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = (set(only or ()) | set(exclude)) - names
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    return [
        f
        for f in dataclasses.fields(cls)
        if (only is None or f.name in only) and f.name not in exclude
    ]


def add_flags(
    parser: argparse.ArgumentParser,
    cls: type,
    *,
    only: Collection[str] | None = None,
    exclude: Collection[str] = (),
    texts: Mapping[str, str] | None = None,
) -> None:
    """Adds one `--snake-case` flag per field of the dataclass `cls`, help from `knob`.

    Every flag defaults to None (not given), so `overrides` tells given flags from defaults and
    a resumed run keeps its saved values. Bools get `--x` / `--no-x`; a `tuple[X, ...]` field
    takes one or more values. The help names the field's default.

    Args:
        parser: the (sub)parser, or an argument group of one, to extend.
        cls: a dataclass whose fields are int, float, str, bool, a tuple of int, float or str
            (`tuple[X, ...]`), or one of those `| None`.
        only: the fields to expose (default: all).
        exclude: fields left out (e.g. set by other flags, or of a non-flag type).
        texts: help texts replacing fields' own, by field name; they name the default
            themselves (e.g. one flag of two configs, with a default in each).

    Raises:
        TypeError: a chosen field's type is not a flag type.
    """
    for field in flag_fields(cls, only=only, exclude=exclude):
        kind, many = _flag_type(cls, field)
        text = help_of(field)
        if texts and field.name in texts:
            text = texts[field.name]
        elif field.default is not dataclasses.MISSING and field.default is not None:
            shown = " ".join(map(str, field.default)) if many else field.default
            text = f"{text} (default: {shown})".strip()
        flag = "--" + field.name.replace("_", "-")
        common = dict(dest=field.name, default=None, help=text.replace("%", "%%"))
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, **common)
        elif many:
            parser.add_argument(flag, type=kind, nargs="+", **common)
        else:
            parser.add_argument(flag, type=kind, **common)


def overrides(cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """The fields of `cls` whose flags were given on the command line (`add_flags`), a list of
    values as a tuple (a frozen config stays hashable)."""
    names = (f.name for f in dataclasses.fields(cls))
    given = {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}
    return {n: tuple(v) if isinstance(v, list) else v for n, v in given.items()}


def from_args(cls: type, args: argparse.Namespace, **fixed: Any) -> Any:
    """`cls(**fixed, **given flags)`: flags left out keep the field defaults."""
    return cls(**{**overrides(cls, args), **fixed})


def to_dict(cfg: Any) -> dict[str, Any]:
    """JSON-able form of a config dataclass (run metadata)."""
    return dataclasses.asdict(cfg)


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list | tuple) else value


def from_dict(cls: type, data: dict[str, Any]) -> Any:
    """Inverse of `to_dict` for frozen configs: JSON lists become tuples; unknown keys raise."""
    return cls(**{k: _tuples(v) for k, v in data.items()})


def _settings_flag_type(annotation: Any) -> tuple[type, bool]:
    """(scalar type, is a list) of a pydantic settings field's flag: `X | None` is `X`,
    `tuple[X, ...]` a list of X; a `Path` travels as itself."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = args[0] if len(args) == 1 else annotation
    if typing.get_origin(annotation) is tuple:
        (item, *_) = typing.get_args(annotation)
        return item, True
    return annotation, False


def add_settings_flags(
    parser: argparse.ArgumentParser,
    settings_cls: type,
    *,
    exclude: Collection[str] = (),
) -> list[str]:
    """Adds one `--snake-case` flag per field of a pydantic settings class: its help is the
    field's description, the default it names and its environment variable come from the class.

    Duck-typed on `model_fields` and `model_config["env_prefix"]` (no pydantic import here).
    Every flag defaults to None, so `settings_overrides` passes only the given ones and the
    environment still fills the rest. Bools get `--x` / `--no-x`; a `tuple[X, ...]` field takes
    several values.

    Args:
        parser: the parser to extend.
        settings_cls: a `pydantic_settings.BaseSettings` subclass whose fields have descriptions.
        exclude: fields left out (e.g. secrets, which do not belong on a command line).

    Returns:
        The names of the fields that became flags.

    Raises:
        TypeError: a field has no description or no flag type.
    """
    prefix = settings_cls.model_config.get("env_prefix", "")
    names = []
    for name, field in settings_cls.model_fields.items():
        if name in exclude:
            continue
        if not field.description:
            raise TypeError(f"{settings_cls.__name__}.{name} has no description (its --help)")
        kind, many = _settings_flag_type(field.annotation)
        factory = field.default_factory
        default = factory() if factory is not None else field.default
        if default is None:
            shown = "unset"
        elif many:
            shown = " ".join(map(str, default)) or "none"
        else:
            shown = default
        text = f"{field.description} (default {shown}; env {prefix}{name.upper()})"
        flag = "--" + name.replace("_", "-")
        common = dict(dest=name, default=None, help=text.replace("%", "%%"))
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, **common)
        elif many:
            parser.add_argument(flag, type=kind, nargs="*", metavar=name.upper(), **common)
        elif kind in (int, float, str) or isinstance(kind, type) and kind.__name__ == "Path":
            parser.add_argument(flag, type=kind, **common)
        else:
            raise TypeError(f"{settings_cls.__name__}.{name}: {kind} is not a flag type")
        names.append(name)
    return names


def settings_overrides(settings_cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """The settings fields whose flags were given (`add_settings_flags`), lists as tuples."""
    return {
        name: tuple(value) if isinstance(value, list) else value
        for name in settings_cls.model_fields
        if (value := getattr(args, name, None)) is not None
    }
