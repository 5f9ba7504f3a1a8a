"""JSON values as the core sees them.

Raw JSON only ever appears in fields typed :data:`JsonValue` or
:data:`JsonObject`; everything else crossing the core boundary is a frozen
attrs carrier. The aliases use read-only ``Mapping``/``Sequence`` so a plain
``dict[str, int]`` fits where a JSON object is expected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias, Union

#: Any JSON-compatible value.
JsonValue: TypeAlias = Union[  # noqa: UP007 - a runtime object cattrs can see
    None, bool, int, float, str, Sequence["JsonValue"], Mapping[str, "JsonValue"]
]
#: A JSON object, such as a JSON Schema or a tool's arguments.
JsonObject: TypeAlias = Mapping[str, JsonValue]

__all__ = ["JsonObject", "JsonValue"]
