"""The arena serves its own pages (the leaderboard, an agent's page) from the web folder the env
server serves, without importing the env server; the JSON they read (GET /v1/ranked, GET
/v1/runs?agent=) is in the REST API's document and the pages are not. The pages in a browser:
tests/web/test_web_arena.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from fastapi.testclient import TestClient

from rtplan.arena import ArenaSettings, create_app, ranked
from support import ROOT

WEB = ROOT / "web"


def _client(tmp_path: Path, **settings) -> TestClient:
    return TestClient(create_app(ArenaSettings(database=str(tmp_path / "a.db"), **settings)))


def _imports(text: str) -> list[str]:
    """The relative modules a script imports statically."""
    return re.findall(r'^import [^;]*? from "\./([^"]+)";', text, flags=re.M)


def test_the_arena_serves_its_pages_and_every_module_they_load(tmp_path):
    with _client(tmp_path) as client:
        home = client.get("/", follow_redirects=False)
        assert home.status_code == 307 and home.headers["location"] == "/arena"
        todo = []
        for path, page in (("/arena", "arena.html"), ("/arena/agents/someone", "arena-agent.html")):
            r = client.get(path)
            assert r.status_code == 200 and "text/html" in r.headers["content-type"], path
            assert r.text == (WEB / page).read_text()
            assert '<link rel="stylesheet" href="/web/style.css">' in r.text  # the house look
            todo += re.findall(r'<script type="module" src="/web/([^"]+)"', r.text)
        assert todo == ["arena-board.js", "arena-agent.js"]
        seen = set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            r = client.get(f"/web/{name}")
            assert r.status_code == 200 and "javascript" in r.headers["content-type"], name
            todo += _imports(r.text)
        assert seen == {"arena-board.js", "arena-agent.js", "arena.js", "api.js"}
        assert client.get("/web/style.css").status_code == 200
        # The document describes the JSON the pages read, and not the pages.
        document = client.get("/openapi.json").json()
        assert not [p for p in document["paths"] if not p.startswith(("/v1/", "/healthz"))]
        params = {p["name"] for p in document["paths"]["/v1/runs"]["get"]["parameters"]}
        assert params == {"game", "tier", "agent"}
        assert "/v1/ranked" in document["paths"]


def test_an_arena_without_pages_says_where_it_looked_and_its_api_serves_on(tmp_path):
    with _client(tmp_path, web_dir=tmp_path) as client:
        for path in ("/arena", "/arena/agents/x"):
            r = client.get(path)
            assert (r.status_code, r.json()) == (
                404,
                {
                    "error": "not_found",
                    "detail": f"no arena pages here: no arena.html in {tmp_path} "
                    "(--web-dir or RTPLAN_ARENA_WEB_DIR names the pages' folder)",
                },
            )
        assert client.get("/web/arena.js").status_code == 404
        assert client.get("/v1/ranked").status_code == 200


def test_an_installed_arena_finds_the_pages_without_importing_the_env_server():
    """Installed, the pages are the env server package's data (setup.py); the arena finds that
    folder without loading the env server (`arena-over-the-wire`)."""
    probe = (
        "import sys; from pathlib import Path; from rtplan.harness import assets; "
        "assets.CHECKOUT = Path('/no/checkout'); "
        "import rtplan.arena._routes_pages; "
        "print(assets.web_dir(None)); "
        "from rtplan.arena import create_app; create_app; "
        "assert 'rtplan.server' not in sys.modules, 'the env server was imported'"
    )
    found = subprocess.run(
        [sys.executable, "-c", f"{probe}; import rtplan.arena.app"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()) == ROOT / "rtplan" / "server" / "_assets" / "web"


def test_the_runs_of_one_agent_and_the_rules_of_ranked_runs(tmp_path):
    with _client(tmp_path, seed_set="smoke") as client:
        ids = {}
        for name in ("ann", "bob"):
            token = client.post("/v1/agents", json={"name": name, "version": "1"}).json()["token"]
            auth = {"Authorization": f"Bearer {token}"}
            for tier in ("fast", "standard")[: 1 + (name == "ann")]:
                r = client.post(
                    "/v1/runs", json={"game": "snake-rt-v0", "tier": tier}, headers=auth
                )
                assert r.status_code == 201, r.text
                ids.setdefault(name, []).append(r.json()["id"])
                client.delete(f"/v1/runs/{r.json()['id']}", headers=auth)  # one running at a time
        for name in ("ann", "bob"):
            runs = client.get(f"/v1/runs?agent={name}").json()["runs"]
            assert [r["id"] for r in runs] == ids[name] and {r["agent"] for r in runs} == {name}
        assert client.get("/v1/runs?agent=nobody").json() == {"runs": []}
        assert client.get("/v1/runs?agent=-x").json()["error"] == "invalid_request"
        rules = client.get("/v1/ranked").json()
    assert rules == {
        "games": list(ranked.GAMES),
        "tiers": [{"name": t.name, "fps": t.fps} for t in ranked.TIERS.values()],
        "seed_sets": [
            {"name": s.name, "first_seed": s.first_seed, "episodes": s.episodes,
             "max_frames": s.max_frames}
            for s in ranked.SEED_SETS.values()
        ],
        "seed_set": "smoke",
        "env_servers": [],
    }  # fmt: skip
