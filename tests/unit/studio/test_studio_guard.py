"""The studio answers this machine's pages only: a request whose ``Host`` is
not a loopback name, or whose ``Origin`` is another site's, is refused (DNS
rebinding), on every route (the mounted agent server's too); every response
carries headers that keep the page from being framed by others or sniffed."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect
from tests_support_studio import GOLDEN, agent_with

from helikon.studio import Studio, loopback_host, loopback_origin
from helikon.testing import say

ALLOWED_HOSTS = [
    "127.0.0.1",
    "127.0.0.1:8765",
    "localhost",
    "LOCALHOST:80",
    "localhost.",
    "localhost.:8765",
    "[::1]",
    "[::1]:8765",
    "127.0.0.1.:1",
]
REFUSED_HOSTS = [
    "evil.example",
    "evil.example:8765",
    "localhost.evil.example",
    "127.0.0.1.evil.example",
    "localhost..",
    "localhost:",
    "localhost:0",
    "localhost:65536",
    "localhost:80:80",
    "localhost:8765x",
    "[::1",
    "[::1]x",
    "::1",
    "[::ffff:7f00:1]",
    "0.0.0.0",
    "127.0.0.2",
    "user@localhost",
    "",
]
#: (Host, Origin): the page's own origin, however its name is spelled.
SAME_ORIGINS = [
    ("127.0.0.1:8765", "http://127.0.0.1:8765"),
    ("localhost:8765", "http://LOCALHOST:8765"),
    ("localhost.:8765", "http://localhost:8765"),
    ("[::1]:8765", "http://[::1]:8765"),
    ("localhost", "http://localhost"),
    ("localhost:80", "http://localhost"),
]
#: Loopback origins that are not the page's: another local server's page.
OTHER_LOCAL_ORIGINS = [
    "http://127.0.0.1:3000",
    "http://localhost:8765",
    "https://127.0.0.1:8765",
    "http://[::1]",
]
REFUSED_ORIGINS = [
    "http://evil.example",
    "https://evil.example:8765",
    "http://127.0.0.1.evil.example",
    "null",
    "file://",
    "http://localhost:8765/path",
    "http://user@localhost:8765",
    "ftp://localhost",
]


@pytest.fixture
def client() -> TestClient:
    studio = Studio(agents=[agent_with("desk", say("hi"), say("hi again"))], golden=GOLDEN)
    with TestClient(studio.app(), base_url="http://127.0.0.1:8765") as client:
        yield client  # type: ignore[misc]


@pytest.mark.parametrize("host", ALLOWED_HOSTS)
def test_a_loopback_host_is_admitted(host: str, client: TestClient) -> None:
    assert loopback_host(host)
    assert client.get("/api/runs", headers={"host": host}).status_code == 200


@pytest.mark.parametrize("host", REFUSED_HOSTS)
def test_a_foreign_host_is_refused_on_every_route(host: str, client: TestClient) -> None:
    assert not loopback_host(host)
    for path in ("/", "/api/runs", "/studio.js", "/server/", "/server/agents"):
        response = client.get(path, headers={"host": host})
        assert response.status_code == 403, (path, response.text)
        assert response.json()["error"]["code"] == "forbidden"
        assert "desk" not in response.text


@pytest.mark.parametrize(("host", "origin"), SAME_ORIGINS)
def test_the_pages_own_origin_may_post(host: str, origin: str, client: TestClient) -> None:
    assert loopback_origin(origin)
    response = client.post(
        "/server/agents/desk/runs", json={"input": "hello"}, headers={"host": host, "origin": origin}
    )
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("origin", OTHER_LOCAL_ORIGINS)
def test_another_local_origin_is_refused(origin: str, client: TestClient) -> None:
    assert loopback_origin(origin)  # on this machine, but not this studio's page (Host 127.0.0.1:8765)
    response = client.post("/server/agents/desk/runs", json={"input": "hello"}, headers={"origin": origin})
    assert response.status_code == 403


@pytest.mark.parametrize("origin", REFUSED_ORIGINS)
def test_a_foreign_origin_cannot_start_a_run_or_read_runs(origin: str, client: TestClient) -> None:
    assert not loopback_origin(origin)
    response = client.post("/server/agents/desk/runs", json={"input": "hello"}, headers={"origin": origin})
    assert response.status_code == 403
    assert client.get("/api/runs", headers={"origin": origin}).status_code == 403
    assert client.get("/api/runs").json()["runs"][0]["source"] == "golden"  # no run was started


def test_a_cross_site_fetch_is_refused_even_without_an_origin(client: TestClient) -> None:
    assert client.get("/api/runs", headers={"sec-fetch-site": "cross-site"}).status_code == 403
    assert client.get("/api/runs", headers={"sec-fetch-site": "same-origin"}).status_code == 200


def test_a_websocket_from_a_foreign_origin_is_closed(client: TestClient) -> None:
    with (
        pytest.raises(WebSocketDisconnect) as closed,
        client.websocket_connect(
            "/server/agents/desk/runs/x/events", headers={"origin": "http://evil.example"}
        ),
    ):
        pass
    assert closed.value.code == 1008


def test_every_response_forbids_framing_by_others_sniffing_and_inline_script(client: TestClient) -> None:
    for path in ("/", "/api/runs", "/studio.js", "/server/", "/nowhere"):
        headers = client.get(path).headers
        policy = headers["content-security-policy"]
        assert "frame-ancestors 'self'" in policy and "default-src 'none'" in policy
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["x-frame-options"] == "SAMEORIGIN"
    # the page's script is a file of its own: the policy admits no inline script of the studio's
    page = client.get("/").text
    assert '<script src="studio.js" defer></script>' in page and "<script>" not in page
