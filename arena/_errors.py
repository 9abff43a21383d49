"""The arena's public errors: each kind, its HTTP status, and what its OpenAPI entry says."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

#: kind -> (HTTP status, when it is answered). The REST API answers every error as `ErrorBody`
#: and its OpenAPI document declares, per route, the statuses its kinds take (`responses`).
KINDS: dict[str, tuple[int, str]] = {
    "malformed_body": (400, "the body is not JSON"),
    "invalid_request": (422, "a parameter or the body is not as the schema says"),
    "token_required": (401, "no token given: Authorization: Bearer <token>"),
    "wrong_token": (403, "the token is not the current token of the version (or agent) it is for"),
    "revoked_token": (403, "the version's token was revoked: register a new version"),
    "admin_key_required": (401, "an administration route and no key: Authorization: Bearer <key>"),
    "wrong_admin_key": (403, "neither the admin token nor a key of the arena's API key file"),
    "unknown_agent": (404, "no agent has this name"),
    "unknown_version": (404, "the agent has no such version"),
    "duplicate_version": (409, "the agent already has this version"),
    "reserved_name": (422, "the name is reserved for the arena's reference players"),
    "unknown_game": (422, "the game is not one ranked runs play"),
    "unknown_player": (422, "no such reference player"),
    "unknown_run": (404, "no run has this id"),
    "run_in_progress": (409, "the version is running another run: a token holds one at a time"),
    "run_finished": (409, "the run has played all its episodes (one run per version and tier)"),
    "run_abandoned": (409, "the run was abandoned (one run per version, game and tier)"),
    "episode_in_progress": (409, "the run's episode handed out before has not ended"),
    "env_refused": (502, "the env server refused the episode's session"),
    "env_unavailable": (503, "no env server can play an episode now"),
    "not_found": (404, "no such route"),
    "method_not_allowed": (405, "the route takes another method"),
    "rate_limited": (429, "too many requests: Retry-After says when to try again"),
    "storage_unavailable": (503, "the arena's database cannot be reached"),
}


class ErrorBody(BaseModel):
    """Every error the arena's REST API answers."""

    error: str = Field(description="the error's kind: " + ", ".join(KINDS))
    detail: str = Field(description="one line saying what is wrong and what to do instead")


class ArenaError(Exception):
    """A public error of the arena, answered as `ErrorBody` with its kind's status.

    Args:
        kind: a key of `KINDS`.
        message: one line: what is wrong and, where it helps, what to do instead.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = KINDS[kind][0]
        self.message = message


def responses(*kinds: str) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI `responses` of a route that can answer `kinds` (plus `invalid_request` and
    `rate_limited` and `storage_unavailable`, which every route can): one entry per status,
    naming its kinds."""
    by_status: dict[int, list[str]] = {}
    for kind in (*kinds, "invalid_request", "rate_limited", "storage_unavailable"):
        by_status.setdefault(KINDS[kind][0], []).append(kind)
    return {
        status: {
            "model": ErrorBody,
            "description": "; ".join(f"{k}: {KINDS[k][1]}" for k in listed),
        }
        for status, listed in sorted(by_status.items())
    }
