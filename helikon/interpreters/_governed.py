"""The text the model sees of a tool's value (shared by interpreters and tests).

Performing governance effects (turn hooks, guardrails, observing hooks) is
the performer's (:mod:`helikon.interpreters._perform`); deciding what their
answers mean is the machine's (:mod:`helikon.loop._answers`).
"""

from __future__ import annotations

import msgspec

_encode = msgspec.json.Encoder(order="sorted").encode


def tool_output_text(value: object) -> str:
    """The text the model sees for a tool's return value (JSON with sorted
    keys unless a str: the same text the machine makes of a tool's output).

    msgspec encodes attrs classes, dataclasses, Structs, enums and datetimes
    directly; a value it cannot encode raises ``TypeError``.
    """
    if isinstance(value, str):
        return value
    return _encode(value).decode()


__all__ = ["tool_output_text"]
