from __future__ import annotations

import pytest
from otel_support import Pipeline


@pytest.fixture
def otel() -> Pipeline:
    """A fresh in-memory tracer and meter provider (never the global ones)."""
    return Pipeline.new()
