"""arena/envs.py: `--env`'s URLs, each with the Env API's address for agents where it differs
from the URL's host (compose's and Kubernetes' names resolve only inside their network)."""

from __future__ import annotations

import asyncio

import pytest
from fastapi import FastAPI

from rtplan.arena.envs import EnvServers, parse_urls
from rtplan.arena.settings import ArenaSettings
from support import uvicorn_app


def test_an_env_url_may_name_its_env_api_for_agents_after_an_equals_sign():
    assert parse_urls("env-server:8000/, http://b:8001=localhost:50052") == [
        "http://env-server:8000",
        "http://b:8001=localhost:50052",
    ]
    assert parse_urls(["https://c:8443 = [::1]:15052"]) == ["https://c:8443=[::1]:15052"]
    servers = EnvServers(parse_urls("http://a:8000,http://b:8001=lab-7.example.org:50052"))
    assert [(s.url, s.public_grpc) for s in servers.servers] == [
        ("http://a:8000", None),
        ("http://b:8001", "lab-7.example.org:50052"),
    ]
    assert servers.by_url("http://b:8001") is servers.servers[1]  # episodes keep the plain URL
    # Then, in either order, the URL browsers reach it at: the pages' links use it.
    both = "http://env-server:8000=http://localhost:8000/=localhost:50052"
    assert parse_urls(both) == ["http://env-server:8000=localhost:50052=http://localhost:8000"]
    (server,) = EnvServers(parse_urls(both)).servers
    assert (server.public_grpc, server.public_url) == ("localhost:50052", "http://localhost:8000")
    shown = EnvServers(parse_urls("http://a:8000,http://b:8001=http://lab-7:8001"))
    assert [shown.shown(u) for u in ("http://a:8000", "http://b:8001", "http://gone:1")] == [
        "http://a:8000",
        "http://lab-7:8001",
        "http://gone:1",  # an env server no longer listed: its recorded URL
    ]
    with pytest.raises(ValueError, match="two public URLs"):
        parse_urls("http://a:8000=http://b:1=http://c:2")
    with pytest.raises(ValueError, match="not an env server's URL"):
        parse_urls("http://a:8000=ftp://b:1")
    for bad in ("http://a:8000=", "http://a:8000=localhost", "http://a:8000=h:0", "http://a=h:x"):
        with pytest.raises(ValueError, match="not an Env API address for agents"):
            parse_urls(bad)
    # The settings keep it (`--env`, RTPLAN_ARENA_ENV), and refuse a bad one at start.
    settings = ArenaSettings(database="a.db", env="http://env-server:8000=localhost:50052")
    assert settings.env == "http://env-server:8000=localhost:50052"
    with pytest.raises(ValueError, match="HOST:PORT"):
        ArenaSettings(database="a.db", env="http://env-server:8000=localhost")


def test_agents_are_sent_to_the_public_address_and_the_arena_to_the_url():
    """The session is created at the URL; the answer's `grpc` is the public address where one
    is given, else the URL's host with the port the env server answered."""
    calls = []
    app = FastAPI()

    @app.post("/v1/sessions", status_code=201)
    def create() -> dict:
        calls.append("POST")
        return {"id": "s1", "token": "t", "grpc_port": 50052, "session": {}}

    with uvicorn_app(app) as base:
        for env, want in (
            (base, "127.0.0.1:50052"),
            (f"{base}=localhost:15052", "localhost:15052"),
        ):
            server, answer = asyncio.run(EnvServers([env]).create({"game": "x"}))
            assert server.url == base and server.grpc == want and answer["id"] == "s1"
    assert calls == ["POST", "POST"]
