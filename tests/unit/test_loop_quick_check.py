"""The quick argument check says "valid" only of what jsonschema calls valid.

``surely_valid`` (and ``schema_errors``'s fast path) read a closed set of
keywords of flat object schemas. A schema an agent built with the low-level
:class:`~helikon.loop.AgentSpec` is not checked first (``schema_problem`` runs
when an ``Agent`` is built), so the quick check must not read a value jsonschema
reads differently.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from helikon.loop._validate import schema_errors, surely_valid


def jsonschema_valid(value: Any, schema: Any) -> bool:
    validator_class = jsonschema.validators.validator_for(schema)
    return not list(validator_class(schema, format_checker=validator_class.FORMAT_CHECKER).iter_errors(value))


@pytest.mark.parametrize("extra", [0, 0.0, 1, 1.0])
def test_an_additional_properties_that_is_a_number_is_read_as_jsonschema_reads_it(extra: object) -> None:
    # ``0 == False`` and ``1 == True``: jsonschema reads ``0`` as closed (it is falsy), the quick
    # check read it as open, and let an unexpected argument through.
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": extra}
    value = {"a": 1, "x": 2}
    expected = jsonschema_valid(value, schema)
    assert surely_valid(schema)(value) == expected
    assert (schema_errors(value, schema) == ()) == expected
