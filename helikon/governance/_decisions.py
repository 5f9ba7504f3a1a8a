"""The two verdicts every governance vocabulary shares: allow and deny.

A permission policy, an approval handler and a hook all answer "go ahead" or
"stop, because ...". The same two frozen classes serve all three unions
(:data:`~helikon.governance.PermissionDecision`,
:data:`~helikon.governance.ApprovalOutcome`,
:data:`~helikon.governance.HookDecision`), so a ``match`` on any of them reads
the same and a denial's reason travels unchanged from the hook or rule that
gave it to the ``PermissionDenied`` event and the tool result the model sees.
"""

from __future__ import annotations

from typing import final

import attrs

from helikon._normal import normal_text


@final
@attrs.frozen
class Allow:
    """Proceed unchanged."""


@final
@attrs.frozen
class Deny:
    """Stop; ``reason`` is surfaced to the model (and to the user's events)."""

    reason: str = attrs.field(converter=normal_text)


__all__ = ["Allow", "Deny"]
