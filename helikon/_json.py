"""JSON values as the core sees them.

Raw JSON only ever appears in fields typed :data:`JsonValue` or
:data:`JsonObject`; everything else crossing the core boundary is a frozen
attrs carrier. The aliases use read-only ``Mapping``/``Sequence`` so a plain
``dict[str, int]`` fits where a JSON object is expected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ForwardRef, TypeAlias, Union

if TYPE_CHECKING:
    #: Any JSON-compatible value.
    JsonValue: TypeAlias = Union[  # noqa: UP007, RUF036
        None, bool, int, float, str, Sequence["JsonValue"], Mapping[str, "JsonValue"]
    ]
else:
    # At run time the recursive reference names its module, so resolving the
    # hints of a class in another module (cattrs does) finds it.
    _self = ForwardRef("JsonValue", module=__name__)
    JsonValue = Union[None, bool, int, float, str, Sequence[_self], Mapping[str, _self]]  # noqa: UP007

#: A JSON object, such as a JSON Schema or a tool's arguments.
JsonObject: TypeAlias = Mapping[str, JsonValue]

__all__ = ["JsonObject", "JsonValue"]
