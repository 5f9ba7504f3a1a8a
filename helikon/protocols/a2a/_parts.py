"""A2A message parts as text, for a model to read."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from a2a.helpers import get_data_parts
from a2a.types import Part


def plain(value: Any) -> Any:
    """``value`` with whole floats as ints (protobuf's ``Value`` carries every
    number as a double: ``5`` arrives as ``5.0``)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def parts_text(parts: Sequence[Part], separator: str = "\n") -> str:
    """Text parts as they are, data parts as JSON (sorted keys, whole numbers
    as ints), file parts by URL or file name."""
    pieces: list[str] = []
    for part in parts:
        if part.HasField("text"):
            pieces.append(part.text)
        elif part.HasField("data"):
            pieces.extend(json.dumps(plain(d), sort_keys=True) for d in get_data_parts([part]))
        elif part.HasField("url") or part.filename:
            pieces.append(f"[file: {part.url or part.filename}]")
    return separator.join(p for p in pieces if p)


__all__ = ["parts_text", "plain"]
