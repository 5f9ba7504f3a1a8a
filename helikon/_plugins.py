"""Hooks a higher layer plugs into a lower one.

A lower layer may need behaviour that lives above it (the default run
observer reports to OpenTelemetry through :mod:`helikon.observability`,
which sits on top of the interpreters). Importing upward would break the
layering, so the lower layer reads a hook from here and the facade
(``helikon/__init__.py``, which may reach every layer) sets it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: Builds the observer of a run whose ``TracerHandle`` names no tracer, once a
#: global OpenTelemetry provider is known to be configured (set by the facade).
default_observer: Callable[[], Any] | None = None
