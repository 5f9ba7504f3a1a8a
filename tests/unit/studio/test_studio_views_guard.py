"""The regression, evals and sessions routes go through the studio's guard:
a foreign ``Host`` (DNS rebinding) or another origin is refused before any
replay runs or any report or session is read, and their scripts carry the
same security headers as every response."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient
from studio_views_support import GOLDEN_TESTS, broken, saved_eval_run

from helikon.studio import Studio

BASE = "http://127.0.0.1:8765"
ROUTES = ["/api/evals", "/api/evals/x", "/api/sessions", "/api/sessions/x", "/views.js", "/regression.js"]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    evals = tmp_path_factory.mktemp("evals")
    saved_eval_run(evals / "nightly")
    studio = Studio(agents=[broken("instructions")], golden=GOLDEN_TESTS, evals=[evals])
    with TestClient(studio.app(), base_url=BASE) as client:
        yield client  # type: ignore[misc]


def first_golden(client: TestClient) -> str:
    rows = client.get("/api/runs").json()["runs"]
    return next(row["id"] for row in rows if row["name"] == "traces/single_tool.jsonl")


@pytest.mark.parametrize(
    "host", ["evil.example", "localhost.evil.example:8765", "127.0.0.2", "[::ffff:7f00:1]"]
)
def test_a_foreign_host_is_refused_on_the_new_routes(host: str, client: TestClient) -> None:
    for path in ROUTES:
        response = client.get(path, headers={"host": host})
        assert response.status_code == 403, (path, response.text)
        assert response.json()["error"]["code"] == "forbidden"
        assert "support nightly" not in response.text
    replay = client.post(f"/api/runs/{first_golden(client)}/replay", json={}, headers={"host": host})
    assert replay.status_code == 403 and "diverged" not in replay.text


@pytest.mark.parametrize(
    "origin", ["http://evil.example", "http://127.0.0.1:3000", "null", "https://127.0.0.1:8765"]
)
def test_another_origin_cannot_replay_or_read_reports_or_sessions(origin: str, client: TestClient) -> None:
    replay = client.post(f"/api/runs/{first_golden(client)}/replay", json={}, headers={"origin": origin})
    assert replay.status_code == 403 and "diverged" not in replay.text
    for path in ROUTES:
        assert client.get(path, headers={"origin": origin}).status_code == 403, path


def test_a_cross_site_fetch_is_refused_and_the_pages_own_origin_may_replay(client: TestClient) -> None:
    rid = first_golden(client)
    refused = client.post(f"/api/runs/{rid}/replay", json={}, headers={"sec-fetch-site": "cross-site"})
    assert refused.status_code == 403
    same = client.post(
        f"/api/runs/{rid}/replay",
        json={},
        headers={"origin": "http://127.0.0.1:8765", "sec-fetch-site": "same-origin"},
    )
    assert same.status_code == 200 and same.json()["outcome"] == "diverged"


@pytest.mark.parametrize("path", ["/views.js", "/regression.js", "/api/evals", "/api/sessions"])
def test_the_new_routes_carry_the_security_headers(path: str, client: TestClient) -> None:
    response = client.get(path)
    assert response.status_code == 200
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy
    assert "'unsafe-inline'" not in policy
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["x-frame-options"] == "SAMEORIGIN"


def test_the_scripts_set_text_never_markup() -> None:
    static = Path(__file__).resolve().parents[3] / "helikon" / "studio" / "static"
    for name in ("dom.js", "studio.js", "fork.js", "views.js", "regression.js"):
        source = (static / name).read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "Function("):
            assert sink not in source, (name, sink)


def test_the_page_holds_every_view_as_its_own_section(client: TestClient) -> None:
    from html.parser import HTMLParser

    class Sections(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.depth = 0
            self.top: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "section":
                if self.depth == 0:
                    self.top.append(dict(attrs).get("id") or "")
                self.depth += 1

        def handle_endtag(self, tag: str) -> None:
            if tag == "section":
                self.depth -= 1

    parser = Sections()
    parser.feed(client.get("/").text)
    assert parser.depth == 0  # every section closed
    assert {"runs-view", "run-view", "evals-view", "sessions-view"} <= set(parser.top)
