"""The @tool decorator and FunctionTool.invoke.

This module uses ``from __future__ import annotations`` on purpose: every
hint reaches the decorator as a string and must be resolved.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import threading
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Required, TypedDict

import anyio
import attrs
import msgspec
import pytest
import trio

from helikon.cancel import CancellationToken
from helikon.context import Actions, SessionState, ToolContext, TracerHandle
from helikon.errors import ConfigError, InvalidArgs, ToolError
from helikon.ids import CallId, RunId
from helikon.model import ToolEffect
from helikon.protocols import Tool
from helikon.tools import FunctionTool, tool, tools

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

CTX: ToolContext[str] = ToolContext(
    "user-ctx",
    SessionState(),
    Actions(),
    CancellationToken(),
    TracerHandle(),
    CallId("call_1"),
    RunId("run_1"),
    "tester",
)


def run(fn: Callable[[], Awaitable[Any]], backend: str = "trio") -> Any:
    return anyio.run(fn, backend=backend)


def invoke(t: FunctionTool[Any, Any], args: dict[str, Any], backend: str = "trio") -> Any:
    async def go() -> Any:
        return await t.invoke(CTX, args)

    return run(go, backend)


# -- keyword-style tools -----------------------------------------------------


@tool
async def add(a: int, b: int = 0) -> int:
    """Add two numbers.

    Use it for sums.

    Args:
        a: The first addend.
        b: The second
            addend.

    Returns:
        The sum.
    """
    return a + b


def test_bare_decorator_reads_name_description_and_schema() -> None:
    assert isinstance(add, FunctionTool)
    assert isinstance(add, Tool)
    assert add.name == "add"
    assert add.description == "Add two numbers.\n\nUse it for sums."
    assert add.effect is ToolEffect.SIDE_EFFECT
    assert add.parameters == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "The first addend."},
            "b": {"type": "integer", "description": "The second addend.", "default": 0},
        },
        "required": ["a"],
        "additionalProperties": False,
    }
    assert add.output_schema == {"type": "integer"}


def test_the_tool_stays_callable_like_the_function() -> None:
    assert asyncio.run(add(2, b=3)) == 5
    assert add.__wrapped__ is add.fn


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_async_tool_is_awaited_under_both_backends(backend: str) -> None:
    assert invoke(add, {"a": 2, "b": 3}, backend) == 5
    assert invoke(add, {"a": 2}, backend) == 2


def test_null_for_an_optional_parameter_means_its_default() -> None:
    """Under OpenAI strict mode the model sends null for optional parameters."""
    assert invoke(add, {"a": 2, "b": None}) == 2


def test_arguments_that_do_not_bind_are_invalid_args() -> None:
    with pytest.raises(ToolError) as info:
        invoke(add, {"a": 1, "c": 2})
    assert isinstance(info.value.failure, InvalidArgs)


@tool(name="lookup", description="Find a thing.", effect=ToolEffect.READ_ONLY)
def find(query: str) -> str:
    """Ignored docstring."""
    return f"{query}@{threading.get_ident()}"


def test_options_override_name_description_and_effect() -> None:
    assert (find.name, find.description, find.effect) == ("lookup", "Find a thing.", ToolEffect.READ_ONLY)
    assert find("q").startswith("q@")


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_sync_tool_runs_in_a_worker_thread(backend: str) -> None:
    result = invoke(find, {"query": "x"}, backend)
    assert result.startswith("x@")
    assert int(result.split("@")[1]) != threading.get_ident()


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


@attrs.frozen
class Reading:
    """A temperature reading."""

    value: float
    unit: Unit


@tool
async def convert_temp(
    ctx: ToolContext[str], value: float, unit: Unit, to: Literal["c", "f"] = "c"
) -> Reading:
    """Convert a temperature.

    Args:
        value: The temperature.
        unit: Its unit.
        to: The target unit.
    """
    assert ctx.user_ctx == "user-ctx"
    assert isinstance(unit, Unit)
    if to == "c":
        return Reading(value if unit is Unit.C else (value - 32) * 5 / 9, Unit.C)
    return Reading(value if unit is Unit.F else value * 9 / 5 + 32, Unit.F)


def test_ctx_is_detected_by_name_and_left_out_of_the_schema() -> None:
    assert list(convert_temp.parameters["properties"]) == ["value", "unit", "to"]
    assert convert_temp.parameters["properties"]["unit"]["enum"] == ["celsius", "fahrenheit"]
    assert convert_temp.parameters["properties"]["to"] == {
        "type": "string",
        "enum": ["c", "f"],
        "description": "The target unit.",
        "default": "c",
    }


def test_enums_are_converted_and_the_result_is_json() -> None:
    assert invoke(convert_temp, {"value": 212, "unit": "fahrenheit"}) == {"value": 100.0, "unit": "celsius"}


def test_output_schema_comes_from_the_return_type() -> None:
    out = convert_temp.output_schema
    assert out is not None
    assert out["title"] == "Reading"
    assert out["required"] == ["value", "unit"]
    assert out["description"] == "A temperature reading."


def test_conversion_failures_are_invalid_args_with_readable_messages() -> None:
    with pytest.raises(ToolError) as info:
        invoke(convert_temp, {"value": 1, "unit": "kelvin"})
    failure = info.value.failure
    assert isinstance(failure, InvalidArgs)
    assert failure.schema_errors == ("$.unit: expected one of 'celsius', 'fahrenheit', got 'kelvin'",)


def test_missing_and_unexpected_arguments_are_all_reported() -> None:
    with pytest.raises(ToolError) as info:
        invoke(convert_temp, {"unit": "celsius", "bogus": 1})
    assert isinstance(info.value.failure, InvalidArgs)
    assert info.value.failure.schema_errors == (
        "unexpected argument 'bogus'",
        "missing required argument 'value'",
    )


@tool
async def typed_ctx(context: ToolContext[Any], n: int) -> int:
    """Read the call id."""
    return len(context.call_id) + n


def test_ctx_is_detected_by_annotation() -> None:
    assert list(typed_ctx.parameters["properties"]) == ["n"]
    assert invoke(typed_ctx, {"n": 1}) == len("call_1") + 1


@tool
async def no_args() -> None:
    """Do nothing."""


def test_a_tool_without_parameters_has_an_empty_object_schema() -> None:
    empty = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
    assert no_args.parameters == empty
    assert no_args.output_schema is None
    assert invoke(no_args, {}) is None


@tool
async def untyped_result(x: str):  # type: ignore[no-untyped-def]
    """No return annotation."""
    return (x, x)


@tool
async def any_result(x: str) -> Any:
    """Any result."""
    return {x: x}


def test_unannotated_or_any_results_have_no_output_schema_and_still_become_json() -> None:
    assert untyped_result.output_schema is None and any_result.output_schema is None
    assert invoke(untyped_result, {"x": "a"}) == ["a", "a"]
    assert invoke(any_result, {"x": "a"}) == {"a": "a"}


# -- args-class tools, one per model kind -------------------------------------


@attrs.frozen
class AttrsArgs:
    category: str = attrs.field(metadata={"description": "Spending category."})
    month: str = "2024-05"
    """Month in YYYY-MM form."""


class StructArgs(msgspec.Struct):
    category: Annotated[str, msgspec.Meta(description="Spending category.")]
    month: str = "2024-05"
    """Month in YYYY-MM form."""


@dataclasses.dataclass(frozen=True)
class DataArgs:
    category: str = dataclasses.field(metadata={"description": "Spending category."})
    month: str = "2024-05"
    """Month in YYYY-MM form."""


class DictArgs(TypedDict, total=False):
    """Arguments.

    Attributes:
        category: Spending category.
    """

    category: Required[str]
    month: str
    """Month in YYYY-MM form."""


def _spending(args: Any) -> dict[str, Any]:
    category = args["category"] if isinstance(args, dict) else args.category
    month = args.get("month", "2024-05") if isinstance(args, dict) else args.month
    return {"category": category, "month": month, "kind": type(args).__name__}


@tool
async def attrs_tool(args: AttrsArgs) -> dict[str, Any]:
    """Look up spending."""
    return _spending(args)


@tool
async def struct_tool(args: StructArgs) -> dict[str, Any]:
    """Look up spending."""
    return _spending(args)


@tool
def data_tool(ctx: ToolContext[str], args: DataArgs) -> dict[str, Any]:
    """Look up spending."""
    assert ctx is CTX
    return _spending(args)


@tool
async def dict_tool(args: DictArgs) -> dict[str, Any]:
    """Look up spending."""
    return _spending(args)


ARGS_TOOLS = [
    (attrs_tool, "AttrsArgs"),
    (struct_tool, "StructArgs"),
    (data_tool, "DataArgs"),
    (dict_tool, "dict"),
]


@pytest.mark.parametrize(("t", "kind"), ARGS_TOOLS, ids=lambda x: getattr(x, "name", x))
def test_args_class_fields_become_the_parameters(t: FunctionTool[Any, Any], kind: str) -> None:
    assert t.parameters["required"] == ["category"]
    props = t.parameters["properties"]
    assert list(props) == ["category", "month"]
    assert props["category"]["description"] == "Spending category."
    assert props["month"]["description"] == "Month in YYYY-MM form."
    assert "title" not in t.parameters


@pytest.mark.parametrize(("t", "kind"), ARGS_TOOLS, ids=lambda x: getattr(x, "name", x))
def test_args_class_instance_is_built_and_passed(t: FunctionTool[Any, Any], kind: str) -> None:
    assert invoke(t, {"category": "Dining"}) == {"category": "Dining", "month": "2024-05", "kind": kind}
    assert invoke(t, {"category": "Dining", "month": "2024-06"})["month"] == "2024-06"


@pytest.mark.parametrize(("t", "kind"), ARGS_TOOLS, ids=lambda x: getattr(x, "name", x))
def test_args_class_conversion_failures_are_invalid_args(t: FunctionTool[Any, Any], kind: str) -> None:
    with pytest.raises(ToolError) as info:
        invoke(t, {"category": 3})
    assert isinstance(info.value.failure, InvalidArgs)
    assert info.value.failure.schema_errors == ("$.category: expected string, got integer",)


@attrs.frozen
class Node:
    label: str
    children: tuple[Node, ...] = ()


@tool
async def count_nodes(tree: Node, depth: int | None = None) -> int:
    """Count nodes of a tree."""

    def count(n: Node) -> int:
        return 1 + sum(count(c) for c in n.children)

    return count(tree)


def test_recursive_nested_parameter() -> None:
    assert count_nodes.parameters["properties"]["tree"] == {"$ref": "#/$defs/Node"}
    node = count_nodes.parameters["$defs"]["Node"]
    assert node["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert count_nodes.parameters["properties"]["depth"] == {"type": ["integer", "null"], "default": None}
    tree = {"label": "a", "children": [{"label": "b"}, {"label": "c", "children": [{"label": "d"}]}]}
    assert invoke(count_nodes, {"tree": tree}) == 4


# -- errors and the exceptions a tool raises ----------------------------------


@tool
async def refuses(path: str) -> str:
    """Refuse."""
    raise ToolError.denied(f"{path} is outside the sandbox")


@tool
async def crashes() -> str:
    """Crash."""
    raise KeyError("boom")


def test_tool_errors_and_other_exceptions_propagate_unchanged() -> None:
    with pytest.raises(ToolError, match="outside the sandbox"):
        invoke(refuses, {"path": "/etc"})
    with pytest.raises(KeyError, match="boom"):
        invoke(crashes, {})


def test_unsupported_annotation_names_the_tool_and_parameter() -> None:
    with pytest.raises(ConfigError, match=r"tool 'bad': parameter 'blob'.*bytes"):

        @tool
        async def bad(blob: bytes) -> None:
            """Bad."""


def test_unsupported_return_type_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"tool 'bad_return': return type"):

        @tool
        async def bad_return() -> complex:
            """Bad."""
            return 1j


def test_missing_annotation_and_star_args_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="has no type annotation"):

        @tool
        def untyped(x) -> None:  # type: ignore[no-untyped-def]
            """Untyped."""

    with pytest.raises(ConfigError, match=r"\*args and \*\*kwargs"):

        @tool
        def star(**kwargs: int) -> None:
            """Star."""


def test_unresolvable_annotation_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"parameter 'x': cannot resolve annotation 'Nowhere'"):

        @tool
        def unresolved(x: Nowhere) -> None:  # type: ignore[name-defined]  # noqa: F821
            """Unresolved."""


def test_invalid_tool_names_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="invalid tool name"):
        tool(lambda: None)
    with pytest.raises(ConfigError, match="invalid tool name"):
        tool(name="has space")(add.fn)


def test_ctx_must_come_first() -> None:
    with pytest.raises(ConfigError, match="the tool context must be the first parameter"):

        @tool
        async def late(x: int, ctx: ToolContext[Any]) -> None:
            """Late."""


def test_redecorating_changes_only_the_given_options() -> None:
    plus = tool(convert_temp, name="plus")
    assert (plus.name, plus.description, plus.effect) == (
        "plus",
        convert_temp.description,
        convert_temp.effect,
    )
    assert plus.parameters is convert_temp.parameters
    assert invoke(plus, {"value": 0, "unit": "celsius"}) == {"value": 0.0, "unit": "celsius"}
    assert tool(effect=ToolEffect.WRITE)(add).effect is ToolEffect.WRITE


def test_thread_false_runs_a_sync_tool_on_the_calling_thread_and_survives_redecoration() -> None:
    seen: list[int] = []

    def where() -> str:
        """Report the thread."""
        seen.append(threading.get_ident())
        return "ok"

    threaded = tool(where)
    inline = tool(threaded, thread=False)
    renamed = tool(inline, name="here")  # other options keep thread=False
    for t in (threaded, inline, renamed):
        assert invoke(t, {}) == "ok"
    assert seen[0] != threading.get_ident()
    assert seen[1:] == [threading.get_ident()] * 2
    assert invoke(tool(renamed, thread=True), {}) == "ok"
    assert seen[-1] != threading.get_ident()


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (b"\x00", "$: a bytes"),
        ({"a": [1, bytearray(b"x")]}, "$.a[1]: a bytearray"),
        ([memoryview(b"x")], "$[0]"),
    ],
)
def test_a_binary_result_raises_naming_the_tool_and_where_not_as_base64(value: object, where: str) -> None:
    @tool
    async def raw() -> Any:
        """Return raw data."""
        return value

    with pytest.raises(ToolError) as info:
        invoke(raw, {})
    assert str(info.value).startswith("tool 'raw' returned a value with no JSON form")
    assert where in str(info.value)


# -- tools(...) ---------------------------------------------------------------


class Echo:
    """A hand-written tool."""

    name = "echo"
    description = "Echo the text."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"text": {"type": "string"}}}
    output_schema = None
    effect = ToolEffect.READ_ONLY

    async def invoke(self, ctx: ToolContext[Any], args: Any) -> Any:
        return args["text"]


def plain(text: str) -> str:
    """Shout."""
    return text.upper()


def test_tools_accepts_function_tools_tool_objects_and_functions() -> None:
    echo = Echo()
    collected = tools(add, echo, plain)
    assert collected[0] is add and collected[1] is tools(echo)[0]
    assert isinstance(collected[2], FunctionTool) and collected[2].name == "plain"
    assert invoke(collected[2], {"text": "hi"}) == "HI"


def test_tools_rejects_duplicates_and_non_tools() -> None:
    with pytest.raises(ConfigError, match="two tools are named 'add'"):
        tools(add, add)
    with pytest.raises(ConfigError, match="not a tool"):
        tools(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="not the class Echo"):
        tools(Echo)


def test_trio_run_drives_invoke_directly() -> None:
    async def main() -> Any:
        return await add.invoke(CTX, {"a": 40, "b": 2})

    assert trio.run(main) == 42


def test_the_examples_in_docs_tools_md_run(tmp_path: Any) -> None:
    """The python blocks of docs/tools.md, run in order as one module (with source,
    so attribute docstrings are found)."""
    import pathlib
    import re
    import runpy

    text = (pathlib.Path(__file__).parents[2] / "docs" / "tools.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 8
    script = tmp_path / "docs_tools_examples.py"
    script.write_text("\n".join(blocks))
    namespace = runpy.run_path(str(script))
    assert [t.name for t in namespace["registry"]] == ["add", "lookup_spending", "ping"]


# -- which tools the live interpreter calls without a cancel scope ----------------------------


def test_a_tool_that_cannot_suspend_is_told_apart_from_one_that_can() -> None:
    from helikon.tools._decorator import at_once

    async def never(a: int) -> int:
        """Add one.

        Args:
            a: a number.
        """
        return a + 1

    async def awaits(a: int) -> int:
        """Sleep, then add one.

        Args:
            a: a number.
        """
        await anyio.sleep(0)
        return a + 1

    async def enters(a: int) -> int:
        """Open a task group.

        Args:
            a: a number.
        """
        async with anyio.create_task_group():
            pass
        return a

    async def iterates(a: int) -> int:
        """Iterate asynchronously.

        Args:
            a: a number.
        """

        async def gen() -> AsyncIterator[int]:
            yield a

        return sum([x async for x in gen()])

    def plain(a: int) -> int:
        """Add one.

        Args:
            a: a number.
        """
        return a + 1

    class Callable_:
        async def __call__(self, a: int) -> int:
            """Add one (an object: its code is not read).

            Args:
                a: a number.
            """
            return a + 1

    assert at_once(tool(never)) is not None
    assert at_once(tool(plain, thread=False)) is not None
    assert at_once(tool(tool(plain), thread=False)) is not None  # re-decorated: thread changed
    obj = tool(Callable_(), name="obj")
    for may_suspend in (tool(awaits), tool(enters), tool(iterates), tool(plain), obj):
        assert at_once(may_suspend) is None, may_suspend
    assert at_once(len) is None


def test_a_function_like_object_whose_code_is_not_what_runs_may_suspend() -> None:
    # A compiled async function (Cython's kind) looks like a function to
    # ``inspect``: a ``__code__`` flagged as a coroutine's, for introspection
    # only (no await in it), while the code that runs awaits. Only a Python
    # function's own bytecode says it cannot suspend.
    from helikon.tools._decorator import at_once

    async def stub(a: int) -> int:
        """Echo a number.

        Args:
            a: a number.
        """
        return a

    class Compiled:
        __name__ = __qualname__ = "compiled"
        __defaults__ = __kwdefaults__ = None

        def __init__(self) -> None:
            self.__code__ = stub.__code__
            self.__annotations__ = dict(stub.__annotations__)
            self.__doc__ = stub.__doc__

        async def __call__(self, a: int) -> int:
            await anyio.sleep(0)
            return a

    class Methods:
        async def never(self, a: int) -> int:
            """Echo a number.

            Args:
                a: a number.
            """
            return a

    assert at_once(tool(Compiled())) is None
    assert at_once(tool(Methods().never)) is not None  # a bound method: its function's code


def test_a_tool_whose_code_was_replaced_since_it_was_decorated_may_suspend() -> None:
    # A reloader (IPython's autoreload) swaps a function's ``__code__`` in
    # place: what was read when it was decorated no longer says what runs.
    from helikon.tools._decorator import at_once

    async def echo(a: int) -> int:
        """Echo a number.

        Args:
            a: a number.
        """
        return a

    async def edited(a: int) -> int:
        await anyio.sleep(0)
        return a

    decorated = tool(echo)
    assert at_once(decorated) is not None
    echo.__code__ = edited.__code__
    assert at_once(decorated) is None
