"""Fixtures of the MCP integration tests: the npm servers (installed into a
cache directory when missing; see ``npm_servers.py``)."""

from __future__ import annotations

import pytest
from mcp_support import Servers, installed_servers


@pytest.fixture(scope="session")
def servers() -> Servers:
    return Servers(installed_servers())
