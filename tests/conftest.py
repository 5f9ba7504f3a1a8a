"""Test-wide configuration: the Hypothesis profiles.

``ci`` runs many examples with no deadline (shared CI machines are slow and
noisy, so timing says nothing) and prints the reproduction blob of a failure;
``dev`` runs few, for a fast edit-test loop. ``HYPOTHESIS_PROFILE`` picks one
by name; otherwise ``ci`` when the ``CI`` environment variable is set, else
``dev``. Health checks stay on: a test that really needs one suppressed says
so itself.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", max_examples=500, deadline=None, derandomize=False, print_blob=True)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))
