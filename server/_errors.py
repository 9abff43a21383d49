"""The env server's one error body (`ErrorBody`), its responses, and their OpenAPI declarations."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

#: What each error status means on this server (the OpenAPI responses' descriptions).
_MEANING = {
    400: "a body that is not JSON",
    401: "no credentials: the `Authorization: Bearer <token>` header is missing",
    403: "wrong credentials: the token does not match",
    404: "no such resource",
    409: "the server cannot do it in its current state (e.g. no planner service for it)",
    422: "a malformed or inconsistent request: `detail` names the field and what it must be",
    429: "the server is at its limit of live sessions",
}


class ErrorBody(BaseModel):
    """Every error the REST API answers (4xx): a machine-readable kind and one sentence."""

    error: str = Field(
        description='the kind: the gRPC status name in lower case ("not_found", '
        '"invalid_argument", ...), "invalid_request" for a request that fails its schema, '
        '"http_error" for an unknown path or method'
    )
    detail: str = Field(description="one sentence: what was wrong and what is expected")


def error_response(status: int, kind: str, detail: str, headers=None) -> JSONResponse:
    """The response of an error: `ErrorBody` with `status` (and `headers`, e.g. 405's Allow)."""
    return JSONResponse(
        status_code=status, content={"error": kind, "detail": detail}, headers=headers
    )


_JSON = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI `responses` of an operation that may answer `statuses` with `ErrorBody`
    (a 401 also says it sends `WWW-Authenticate`)."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        # Not `model`: FastAPI would declare it in the route's media type (a GIF's image/gif).
        out[status] = {"description": _MEANING[status], "content": _JSON}
        if status == 401:
            out[status]["headers"] = {
                "WWW-Authenticate": {
                    "description": 'the scheme to use: "Bearer"',
                    "schema": {"type": "string"},
                }
            }
    return out


def declare_errors(schema: dict[str, Any]) -> None:
    """Puts `ErrorBody` in the OpenAPI document `schema` (which `errors` refers to), and
    replaces FastAPI's default 422 (`HTTPValidationError`, whose `detail` is a list) by it: the
    app's validation handler answers `ErrorBody`."""
    default = "#/components/schemas/HTTPValidationError"
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            answer = operation.get("responses", {}).get("422", {})
            if default in str(answer.get("content")):
                operation["responses"]["422"] = errors(422)[422]
    schemas = schema.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    schemas["ErrorBody"] = ErrorBody.model_json_schema()
