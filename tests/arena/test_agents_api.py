"""The arena's REST API over a real uvicorn: registration, regeneration, revocation, the list,
and each error as its one error model, declared in the OpenAPI document."""

from __future__ import annotations

import httpx
import pytest

from rtplan.arena._errors import KINDS
from rtplan.arena.database import schema_head


@pytest.fixture
def client(arena):
    with httpx.Client(base_url=arena[0], timeout=30) as c:
        yield c


def _register(client, name, version, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.post("/v1/agents", json={"name": name, "version": version}, headers=headers)


def _error(response, status: int, kind: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "detail"} and body["error"] == kind, body
    assert isinstance(body["detail"], str) and body["detail"]
    return body["detail"]


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_register_regenerate_revoke(client):
    made = _register(client, "ann", "1")
    assert made.status_code == 201, made.text
    issued = made.json()
    assert (issued["name"], issued["version"]) == ("ann", "1")
    token = issued["token"]
    path = "/v1/agents/ann/versions/1/token"
    renewed = client.post(path, headers=_bearer(token))
    assert renewed.status_code == 200, renewed.text
    new = renewed.json()["token"]
    assert new != token
    detail = _error(client.post(path, headers=_bearer(token)), 403, "wrong_token")
    assert "regenerated" in detail  # the old token stopped working at once
    second = _register(client, "ann", "2", token=new)  # a new version, with a live token
    assert second.status_code == 201, second.text
    revoked = client.delete(path, headers=_bearer(new))
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    detail = _error(client.post(path, headers=_bearer(new)), 403, "revoked_token")
    assert "register a new version" in detail
    _error(client.delete(path, headers=_bearer(new)), 403, "revoked_token")
    _error(_register(client, "ann", "3", token=new), 403, "revoked_token")
    listed = client.get("/v1/agents/ann").json()
    assert [(v["version"], v["revoked"]) for v in listed["versions"]] == [("1", True), ("2", False)]


def test_each_error_is_the_one_error_model(client):
    token = _register(client, "bea", "1").json()["token"]
    _error(_register(client, "bea", "1", token=token), 409, "duplicate_version")
    _error(_register(client, "bea", "1"), 409, "duplicate_version")
    assert "live token" in _error(_register(client, "bea", "2"), 401, "token_required")
    other = _register(client, "cid", "1").json()["token"]
    _error(_register(client, "bea", "2", token=other), 403, "wrong_token")  # cid's token
    path = "/v1/agents/bea/versions/1/token"
    _error(client.post(path), 401, "token_required")
    _error(client.post(path, headers={"Authorization": f"Basic {token}"}), 401, "token_required")
    _error(client.post(path, headers=_bearer(other)), 403, "wrong_token")
    _error(client.post(path, headers=_bearer("rta_not_a_token")), 403, "wrong_token")
    _error(
        client.post("/v1/agents/nobody/versions/1/token", headers=_bearer(token)),
        404,
        "unknown_agent",
    )
    _error(
        client.delete("/v1/agents/bea/versions/9/token", headers=_bearer(token)),
        404,
        "unknown_version",
    )
    _error(client.get("/v1/agents/nobody"), 404, "unknown_agent")
    for body in (
        {"name": "-x", "version": "1"},
        {"name": "x", "version": 1},
        {"name": "x" * 65, "version": "1"},
        {"name": "x\n", "version": "1"},
        {"name": "x", "version": "1", "extra": True},
        {"name": "x"},
    ):
        detail = _error(client.post("/v1/agents", json=body), 422, "invalid_request")
        assert "\n" not in detail
    _error(client.get("/v1/agents", params={"limit": 0}), 422, "invalid_request")
    _error(client.get("/v1/agents", params={"offset": 2**31}), 422, "invalid_request")
    assert client.get("/v1/agents", params={"offset": 2**31 - 1}).json()["agents"] == []
    malformed = client.post(
        "/v1/agents", content=b"\xff", headers={"Content-Type": "application/json"}
    )
    _error(malformed, 400, "malformed_body")
    _error(client.get("/v1/nothing"), 404, "not_found")
    _error(client.put("/v1/agents"), 405, "method_not_allowed")


def test_the_list_never_holds_a_token(client):
    token = _register(client, "dee", "1").json()["token"]
    page = client.get("/v1/agents", params={"limit": 500})
    assert page.status_code == 200
    assert "dee" in [a["name"] for a in page.json()["agents"]]
    secret = token.split("_", 2)[2]
    text = page.text + client.get("/v1/agents/dee").text
    assert token not in text and secret not in text and "token_id" not in text
    assert client.get("/healthz").json()["schema_revision"] == schema_head()


def test_the_openapi_document_declares_each_route_s_errors(client):
    doc = client.get("/openapi.json").json()
    error_ref = "#/components/schemas/ErrorBody"
    assert set(doc["components"]["schemas"]["ErrorBody"]["required"]) == {"error", "detail"}
    expected = {
        ("/v1/agents", "post"): {"duplicate_version", "token_required", "wrong_token"},
        ("/v1/agents/{name}", "get"): {"unknown_agent"},
        ("/v1/agents/{name}/versions/{version}/token", "post"): {"unknown_version"},
        ("/v1/agents/{name}/versions/{version}/token", "delete"): {"revoked_token"},
    }
    for (path, method), kinds in expected.items():
        responses = doc["paths"][path][method]["responses"]
        for kind in {*kinds, "invalid_request", "storage_unavailable"}:
            status = str(KINDS[kind][0])
            assert kind in responses[status]["description"], (path, method, kind)
            schema = responses[status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": error_ref}, (path, method, status)
    assert "HTTPValidationError" not in doc["components"]["schemas"]


def test_a_database_gone_is_a_503_in_the_error_model(postgres_server):
    """The arena's PostgreSQL database dropped under it: each request is `storage_unavailable`
    (503) in one line, its password starred."""
    import psycopg

    from rtplan.arena import ArenaSettings, Repository, create_app
    from support import uvicorn_app

    name = "arena_gone"
    server = postgres_server.replace("rtplan@", "rtplan:pw@")
    with psycopg.connect(f"{postgres_server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    repository = Repository.open(f"{server}/{name}")
    app = create_app(ArenaSettings(database=f"{server}/{name}"), repository=repository)
    with uvicorn_app(app) as base, httpx.Client(base_url=base, timeout=30) as c:
        assert _register(c, "gil", "1").status_code == 201
        with psycopg.connect(f"{postgres_server}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        detail = _error(c.get("/v1/agents"), 503, "storage_unavailable")
        assert "pw" not in detail and "***" in detail and "\n" not in detail
        _error(_register(c, "gil", "2"), 503, "storage_unavailable")
    repository.close()
