"""The env server's routers: every route answers, the pages' module graph is served under /web/,
and a server without pages says where it looked."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from PIL import Image, ImageSequence
from pydantic import ValidationError

from rtplan.server import Settings, create_app
from rtplan.server.replay_gif import STRIP_CHART, STRIP_TEXT, board_size
from support import gated_replay

WEB = Path(__file__).resolve().parents[2] / "web"


def test_every_route_answers_through_its_router(tmp_path):
    settings = Settings(
        http_port=0,
        grpc_port=0,
        web_dir=WEB,
        record_dir=tmp_path,
        results_dir=tmp_path,
        checkpoint_dir=tmp_path,
    )
    with TestClient(create_app(settings)) as client:  # the lifespan: manager, gRPC on port 0
        ok = ["/healthz", "/v1/games", "/v1/sessions", "/v1/replays", "/v1/results"]
        ok += ["/", "/watch", "/results", "/web/api.js"]
        for path in ok:
            assert client.get(path).status_code == 200, path
        # A route's own refusal, not the router's "Not Found" / "Method Not Allowed".
        refused = [
            ("POST", "/v1/sessions", 422, "invalid_request"),
            ("GET", "/v1/sessions/nope", 404, "not_found"),
            ("DELETE", "/v1/sessions/nope", 404, "not_found"),
            ("GET", "/v1/replays/nope.jsonl", 404, "not_found"),
            ("GET", "/v1/replays/nope.jsonl/boards", 404, "not_found"),
            ("GET", "/v1/replays/nope.jsonl/boards?count=65", 422, "invalid_request"),
            ("GET", "/v1/replays/nope.jsonl/gif", 404, "not_found"),
            ("GET", "/v1/replays/notes.txt/gif", 404, "not_found"),
            ("GET", "/v1/replays/nope.jsonl/gif?max_frames=601", 422, "invalid_request"),
            ("GET", "/v1/results/files/x.png", 404, "not_found"),
            ("GET", "/v1/results/files/snake-rt-v0/notes.txt", 404, "not_found"),
        ]
        for method, path, status, kind in refused:
            r = client.request(method, path, json={} if method == "POST" else None)
            assert (r.status_code, r.json()["error"]) == (status, kind), (method, path, r.text)
        with client.websocket_connect("/v1/sessions/nope/ws") as ws:
            closed = ws.receive()
        assert closed["type"] == "websocket.close" and closed["code"] == 4404


def test_the_lobby_links_the_arena_the_settings_name(tmp_path):
    """`--arena-url` (RTPLAN_SERVER_ARENA_URL) reaches the lobby through /healthz (web/lobby.js
    shows the link); unset, there is none."""
    folders = dict(web_dir=WEB, record_dir=tmp_path, results_dir=tmp_path, checkpoint_dir=tmp_path)
    assert Settings(arena_url="").arena_url is None
    with pytest.raises(ValidationError, match="http:// or https://"):
        Settings(arena_url="javascript:alert(1)")
    for given, shown in (
        (" http://arena.example:8100/ ", "http://arena.example:8100"),
        (None, None),
    ):
        settings = Settings(http_port=0, grpc_port=0, arena_url=given, **folders)
        assert settings.arena_url == shown
        with TestClient(create_app(settings)) as client:
            assert client.get("/healthz").json()["arena_url"] == shown


def _imports(text: str) -> list[str]:
    """The relative modules a script imports statically."""
    return re.findall(r'^import [^;]*? from "(\.{1,2}/[^"]+)";', text, flags=re.M)


def test_every_module_a_page_loads_is_served():
    client = TestClient(create_app(Settings(http_port=0, grpc_port=0, web_dir=WEB)))
    todo = []
    for page in ("/", "/watch", "/results"):
        html = client.get(page).text
        todo += re.findall(r'<script type="module" src="(/web/[^"]+)"', html)
    assert len(todo) == 3
    todo += [f"/web/games/{p.name}" for p in (WEB / "games").glob("*.js")]  # loaded by name
    seen = set()
    while todo:
        url = todo.pop()
        if url in seen:
            continue
        seen.add(url)
        r = client.get(url)
        assert r.status_code == 200, url
        assert "javascript" in r.headers["content-type"], url
        base = url.rsplit("/", 1)[0]
        for rel in _imports(r.text):
            parts = base.split("/")
            for piece in rel.split("/"):
                if piece == "..":
                    parts.pop()
                elif piece != ".":
                    parts.append(piece)
            todo.append("/".join(parts))
    # The shared API module and the watch page's parts are all reached from the pages.
    for name in ("api", "model", "play", "panels", "replay", "draw", "lobby", "results"):
        assert f"/web/{name}.js" in seen, name


def test_a_server_without_pages_says_where_it_looked(tmp_path):
    client = TestClient(create_app(Settings(http_port=0, grpc_port=0, web_dir=tmp_path)))
    r = client.get("/")
    assert r.status_code == 404
    assert r.json() == {
        "error": "not_found",
        "detail": f"no browser pages here: no index.html in {tmp_path} "
        "(--web-dir or RTPLAN_SERVER_WEB_DIR names the pages' folder)",
    }
    for path in ("/watch", "/results", "/web/watch.js"):
        r = client.get(path)
        assert (r.status_code, r.json()) == (404, {"error": "http_error", "detail": "Not Found"})
    assert client.get("/v1/results").status_code == 200  # the API still answers


def test_a_configured_web_dir_wins_over_the_shipped_pages(tmp_path):
    (tmp_path / "index.html").write_text("<title>my lobby</title>")
    client = TestClient(create_app(Settings(http_port=0, grpc_port=0, web_dir=tmp_path)))
    assert client.get("/").text == "<title>my lobby</title>"
    assert client.get("/web/index.html").text == "<title>my lobby</title>"


def test_a_replay_is_labelled_as_its_session_and_downloads_as_a_gif(tmp_path):
    """A gated session's replay: its listing and its hello's session carry the fields the pages
    label an agent by (web/api.js `agentLabel`), equal; its GIF has a frame per frame message,
    each the rendered board over the k/value strip."""
    gated_replay(tmp_path / "replays")
    settings = Settings(http_port=0, grpc_port=0, web_dir=WEB, record_dir=tmp_path / "replays")
    with TestClient(create_app(settings)) as client:
        (listed,) = client.get("/v1/replays").json()["replays"]
        index = client.get("/v1/replays/gated.jsonl").json()
        who = ("agent", "ks", "gated", "opponent", "opponent_k")
        assert {k: listed[k] for k in who} == {k: index["hello"]["session"][k] for k in who}
        assert (listed["agent"], listed["gated"]) == ("planner", True)

        r = client.get("/v1/replays/gated.jsonl/gif")
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "image/gif"
        assert 'filename="gated.gif"' in r.headers["content-disposition"]
        gif = Image.open(io.BytesIO(r.content))
        board = client.get("/v1/replays/gated.jsonl/boards?start=0&count=1").json()["boards"][0]
        width, height = board_size(board)
        assert gif.size == (max(width, 160), height + STRIP_TEXT + STRIP_CHART)
        assert sum(1 for _ in ImageSequence.Iterator(gif)) == len(index["frames"]) == 11
        thinned = client.get("/v1/replays/gated.jsonl/gif?max_frames=4").content
        assert sum(1 for _ in ImageSequence.Iterator(Image.open(io.BytesIO(thinned)))) == 4
