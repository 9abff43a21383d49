"""A malformed request's one-sentence refusal: the field, what it must be, and what came."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from fastapi.routing import APIRoute
from pydantic import BaseModel

#: What a value of pydantic's error types must be, where the field has no description.
_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
}
_LIMITS = {
    "greater_than": "> {gt}",
    "greater_than_equal": ">= {ge}",
    "less_than": "< {lt}",
    "less_than_equal": "<= {le}",
    "string_too_long": "a string of at most {max_length} characters",
}
#: What a JSON value is, for "got ...".
_JSON_KINDS = ((dict, "an object"), (list, "an array"), (str, "a string"), (bool, "a boolean"))


def explain(errors: Sequence[dict[str, Any]], route: Any, content_type: str) -> str:
    """One sentence for a request FastAPI could not validate: the first wrong field (or the
    body), what it must be (the field's `description`, else the constraint that failed) and the
    value that came; the other wrong fields are named after it.

    Args:
        errors: `RequestValidationError.errors()`.
        route: the matched route (`request.scope["route"]`), whose body model and query
            parameters describe their fields; None where there is none.
        content_type: the request's Content-Type header ("" without one).
    """
    fields: dict[tuple[str, str], list[dict[str, Any]]] = {}
    whole_body: list[dict[str, Any]] = []
    for err in errors:
        loc = tuple(err.get("loc", ()))
        if len(loc) >= 2 and isinstance(loc[1], str):
            fields.setdefault((str(loc[0]), loc[1]), []).append(err)
        else:
            whole_body.append(err)
    if whole_body:
        return _body(whole_body[0], _model(route), content_type)
    if not fields:
        return "the request is malformed"
    (where, name), errs = next(iter(fields.items()))
    sentence = _field(where, name, errs, route)
    others = [n for _, n in list(fields)[1:]]
    if others:
        sentence += f" (also wrong: {', '.join(others)})"
    return sentence


def _model(route: Any) -> type[BaseModel] | None:
    if not isinstance(route, APIRoute) or route.body_field is None:
        return None
    model = route.body_field.field_info.annotation
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _fields(model: type[BaseModel] | None) -> str:
    if model is None:
        return ""
    names = [f"{n} (required)" if f.is_required() else n for n, f in model.model_fields.items()]
    return f" with the fields {', '.join(names)}"


def _body(err: dict[str, Any], model: type[BaseModel] | None, content_type: str) -> str:
    kind = err.get("type")
    if kind == "json_invalid":
        at = err["loc"][1] if len(err["loc"]) > 1 else 0
        why = (err.get("ctx") or {}).get("error", "JSON decode error")
        return f"the body is not valid JSON ({why} at character {at}): send a JSON object" + (
            _fields(model)
        )
    if kind == "missing":
        return "the body is empty: send a JSON object" + _fields(model)
    value = err.get("input")
    if isinstance(value, bytes | bytearray):  # not read as JSON: the Content-Type says why
        got = f"Content-Type {content_type!r}" if content_type else "no Content-Type"
        return f"the body must be a JSON object sent as Content-Type application/json, got {got}"
    return f"the body must be a JSON object{_fields(model)}, got {_kind(value)}"


def _field(where: str, name: str, errs: list[dict[str, Any]], route: Any) -> str:
    label = name if where == "body" else f"{where} parameter {name}"
    described, known = _described(where, name, route)
    first = errs[0]
    if first.get("type") == "extra_forbidden":
        return f"unknown field {name!r}: the fields are {', '.join(known)}"
    if first.get("type") == "missing":
        return f"{label} is required" + (f": {described}" if described else "")
    # A union's members each fail on the whole value (loc ends in the member's name): the
    # shortest location holds the value that came.
    sentence = f"{label} must be {described or _expected(first)}"
    if where == "header":  # never echoed: a header may carry a token
        return sentence
    value = min(errs, key=lambda e: len(e.get("loc", ()))).get("input")
    return f"{sentence}, got {_show(value, where)}"


def _described(where: str, name: str, route: Any) -> tuple[str, list[str]]:
    """The field's description and the names of its siblings."""
    if where == "body":
        model = _model(route)
        if model is None:
            return "", []
        field = model.model_fields.get(name)
        return (field.description or "") if field else "", list(model.model_fields)
    params = getattr(getattr(route, "dependant", None), f"{where}_params", None) or []
    for param in params:
        if param.alias == name:
            return param.field_info.description or "", [p.alias for p in params]
    return "", [p.alias for p in params]


def _expected(err: dict[str, Any]) -> str:
    kind, ctx = err.get("type", ""), err.get("ctx") or {}
    if kind == "literal_error":
        return f"one of {ctx.get('expected')}"
    if kind in _LIMITS:
        return _LIMITS[kind].format(**ctx)
    return _EXPECTED.get(kind, str(err.get("msg", "valid")).removeprefix("Input should be "))


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    for cls, name in _JSON_KINDS:
        if isinstance(value, cls):
            return name
    return "a number"


def _show(value: Any, where: str) -> str:
    if where != "body":  # a query string or path: text as it came
        text = str(value)
    else:
        try:
            text = json.dumps(value)
        except (TypeError, ValueError):
            text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
