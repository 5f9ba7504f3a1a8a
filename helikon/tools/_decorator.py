"""The ``@tool`` decorator and :class:`FunctionTool`.

``@tool`` reads a function once, at decoration time: the docstring gives the
description (its summary) and the parameter descriptions (its ``Args:``
section), the type hints give the parameter and output schemas, and a small
call plan is compiled so that :meth:`FunctionTool.invoke` does no inspection
on the hot path.
"""

from __future__ import annotations

import functools
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Final, Generic, ParamSpec, TypeVar, final, overload

import attrs

from helikon._json import JsonObject, JsonValue
from helikon.context import ToolContext
from helikon.errors import ConfigError, NormalFormError, ToolError
from helikon.model import ToolEffect
from helikon.protocols import Tool
from helikon.tools._convert import (
    ConversionError,
    Converter,
    accepts_none,
    compile_converter,
    is_plain,
    to_json,
)
from helikon.tools._docstrings import parse_docstring
from helikon.tools._models import FieldSpec, is_any, json_default, model_kind, unwrap_newtype
from helikon.tools._schema import SchemaBuilder, type_schema

P = ParamSpec("P")
R = TypeVar("R")

#: Values that are their own JSON normal form.
_SCALARS: Final = frozenset({type(None), bool, int})
_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


@attrs.frozen
class _Plan:
    """How to call the function with a JSON object of arguments."""

    #: The function, typed loosely for calls with ``**args``.
    target: Callable[..., Any]
    is_async: bool
    #: A sync function runs in a worker thread (else on the event loop).
    thread: bool
    takes_ctx: bool
    #: Async, keyword style, every parameter plain: call ``target(**args)`` as is.
    direct: bool
    #: Keyword style: parameter name -> converter (``None`` passes the value through).
    converters: Mapping[str, Converter | None]
    required: tuple[str, ...]
    #: Optional parameters that cannot be ``None``: a ``null`` means "use the default".
    drop_null: frozenset[str]
    #: Args-class style: builds the one argument from the whole object.
    args_converter: Converter | None
    #: An ``async def`` whose body has no ``await``, ``async with`` or
    #: ``async for`` (read from its bytecode): its coroutine ends at its first step.
    never_awaits: bool = False
    #: The code object ``never_awaits`` was read from (a reloader may swap it).
    code: object = None
    #: A call never suspends (an ``async def`` that never awaits, or a
    #: ``def`` called on the event loop): nothing in it can be interrupted.
    at_once: bool = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "at_once", self.never_awaits if self.is_async else not self.thread)

    async def call(self, ctx: ToolContext[Any], args: JsonObject) -> object:
        """Convert ``args`` and call the function (in a worker thread when it is sync).

        A worker thread cannot be interrupted: when the run is cancelled or
        times out, the call is abandoned (its thread finishes in the
        background, its result is dropped) so the run ends on time.
        """
        positional, keywords = self.bind(ctx, args)
        if self.is_async:
            return await self.target(*positional, **keywords)
        if not self.thread:
            return self.target(*positional, **keywords)
        from anyio import to_thread

        call = functools.partial(self.target, *positional, **keywords)
        return await to_thread.run_sync(call, abandon_on_cancel=True)

    def bind(self, ctx: ToolContext[Any], args: JsonObject) -> tuple[tuple[object, ...], dict[str, Any]]:
        """The positional and keyword arguments for the function.

        Raises:
            ToolError: an ``InvalidArgs`` failure listing every problem found.
        """
        positional: tuple[object, ...] = (ctx,) if self.takes_ctx else ()
        if self.args_converter is not None:
            try:
                return (*positional, self.args_converter(args)), {}
            except ConversionError as exc:
                raise ToolError.invalid_args(str(exc)) from None
        errors: list[str] = []
        keywords: dict[str, Any] = {}
        for key, value in args.items():
            if key not in self.converters:
                errors.append(f"unexpected argument {key!r}")
                continue
            if value is None and key in self.drop_null:
                continue
            convert = self.converters[key]
            try:
                keywords[key] = value if convert is None else convert(value)
            except ConversionError as exc:
                exc.segments.append(f".{key}")
                errors.append(str(exc))
        errors.extend(f"missing required argument {name!r}" for name in self.required if name not in args)
        if errors:
            raise ToolError.invalid_args(*errors)
        return positional, keywords


@final
@attrs.frozen(eq=False, repr=False)
class FunctionTool(Generic[P, R]):
    """A Python function the model can call; made by :func:`tool`.

    It implements the :class:`~helikon.protocols.Tool` protocol and stays
    callable like the function it wraps, so ``add(1, 2)`` still works in
    your unit tests after ``add`` was decorated.
    """

    #: The decorated function.
    fn: Callable[P, R]
    #: The tool's name as the model sees it.
    name: str
    #: What the tool does, for the model.
    description: str
    #: The JSON Schema (an object schema) of the arguments.
    parameters: dict[str, Any]
    #: The JSON Schema of the result, ``None`` when the function does not say.
    output_schema: dict[str, Any] | None
    #: What the tool does to the world; permission modes decide by it.
    effect: ToolEffect
    _plan: _Plan
    #: Running it twice with the same ``ToolContext.call_id`` does what
    #: running it once does: a started call whose result was lost is re-run.
    idempotent: bool = False
    #: ``reconcile(ctx, args) -> Reconciled`` (sync or async): what became
    #: of a started call whose result was lost (see ``docs/interpreters.md``).
    reconcile: Callable[..., Any] | None = None

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the wrapped function directly."""
        return self.fn(*args, **kwargs)

    async def invoke(self, ctx: ToolContext[Any], args: JsonObject) -> JsonValue:
        """Run the tool with schema-validated JSON arguments; return its JSON output.

        Raises:
            ToolError: the arguments do not convert (``InvalidArgs``) or the
                function raised one. Other exceptions propagate unchanged.
        """
        plan = self._plan
        if plan.direct and not (plan.drop_null and None in args.values()):
            try:
                pending = plan.target(ctx, **args) if plan.takes_ctx else plan.target(**args)
            except TypeError as exc:  # an async def only binds here: the arguments do not fit
                raise ToolError.invalid_args(str(exc)) from None
            result = await pending
        else:
            result = await plan.call(ctx, args)
        if type(result) in _SCALARS:  # its own normal form (what ``to_json`` answers at once)
            scalar: JsonValue = result
            return scalar
        try:
            return to_json(result)
        except NormalFormError as exc:
            # A failure the model sees, worded as when an interpreter
            # normalises a raw value itself (``tool_returned``).
            raise ToolError(f"tool {self.name!r} returned a value with no JSON form: {exc}") from None

    @property
    def __wrapped__(self) -> Callable[P, R]:
        """The decorated function (lets :func:`inspect.signature` see through)."""
        return self.fn

    def __repr__(self) -> str:
        return f"FunctionTool(name={self.name!r}, effect={self.effect})"


@overload
def tool(
    fn: Callable[P, R],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    effect: ToolEffect | None = None,
    thread: bool | None = None,
    idempotent: bool | None = None,
    reconcile: Callable[..., Any] | None = None,
) -> FunctionTool[P, R]: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    effect: ToolEffect | None = None,
    thread: bool | None = None,
    idempotent: bool | None = None,
    reconcile: Callable[..., Any] | None = None,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...
def tool(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    effect: ToolEffect | None = None,
    thread: bool | None = None,
    idempotent: bool | None = None,
    reconcile: Callable[..., Any] | None = None,
) -> FunctionTool[P, R] | Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """Turn a function into a :class:`FunctionTool`.

    Use it bare (``@tool``) or with options
    (``@tool(name="lookup", effect=ToolEffect.READ_ONLY)``). The function may
    be ``async def`` (awaited) or plain ``def`` (run in a worker thread,
    abandoned when the run is cancelled or times out; ``thread=False`` calls
    a trivially fast one on the event loop instead). Its
    parameters are either plain keyword parameters described in the
    docstring's ``Args:`` section, or one args class (attrs, msgspec Struct,
    dataclass or TypedDict) whose fields are the arguments. A first
    parameter named ``ctx`` or annotated ``ToolContext[...]`` receives the
    tool context and is not part of the schema.

    >>> @tool(effect=ToolEffect.READ_ONLY)
    ... async def add(a: int, b: int = 0) -> int:
    ...     '''Add two numbers.
    ...
    ...     Args:
    ...         a: The first addend.
    ...         b: The second addend.
    ...     '''
    ...     return a + b
    >>> add.name, add.description, add.effect
    ('add', 'Add two numbers.', <ToolEffect.READ_ONLY: 'read_only'>)
    >>> add.parameters["properties"]["b"]
    {'type': 'integer', 'description': 'The second addend.', 'default': 0}
    >>> add.parameters["required"], add.output_schema
    (['a'], {'type': 'integer'})

    Args:
        fn: The function (when used bare).
        name: The tool name; the function's name by default.
        description: The description; the docstring's summary by default.
        effect: What the tool does to the world (``SIDE_EFFECT`` by default).
        thread: For a plain ``def``: run it in a worker thread (the default),
            or, with ``False``, on the event loop, which saves the thread hop
            (about 150 µs) but blocks the run while it runs and cannot be
            interrupted. Only for quick, pure computations.
        idempotent: running the tool twice with the same
            ``ToolContext.call_id`` (its idempotency key) does what running
            it once does. A call that was started and whose result was lost
            (a crash, a lost worker) is then simply run again; otherwise it
            is reconciled.
        reconcile: ``reconcile(ctx, args) -> Reconciled`` (sync or async):
            asked, for a started call whose result was lost, whether it
            happened (``Reconciled(True, output)``) or not
            (``Reconciled(False)``: the call then runs). Without it, the
            model is told that the call's outcome is unknown.

    Decorating a :class:`FunctionTool` again returns a copy with just the
    given options changed: ``tool(add, name="plus")``.

    Raises:
        ConfigError: a parameter or the return type has an unsupported
            annotation, or the name is not 1-64 letters, digits, ``_`` or ``-``.
    """

    def decorate(func: Callable[P, R]) -> FunctionTool[P, R]:
        if isinstance(func, FunctionTool):  # re-decorating: only the given options change
            plan = func._plan if thread is None else attrs.evolve(func._plan, thread=thread)
            return attrs.evolve(
                func,
                name=_checked_name(func.name if name is None else name),
                description=func.description if description is None else description,
                effect=effect or func.effect,
                plan=plan,
                idempotent=func.idempotent if idempotent is None else idempotent,
                reconcile=func.reconcile if reconcile is None else reconcile,
            )
        built = _build(func, name, description, effect or ToolEffect.SIDE_EFFECT, thread is not False)
        if idempotent or reconcile is not None:
            built = attrs.evolve(built, idempotent=bool(idempotent), reconcile=reconcile)
        return built

    return decorate if fn is None else decorate(fn)


def tools(*items: Tool | Callable[..., Any]) -> tuple[Tool, ...]:
    """Collect tools for an agent: tool objects as they are, functions via :func:`tool`.

    >>> def ping() -> str:
    ...     '''Answer pong.'''
    ...     return "pong"
    >>> [t.name for t in tools(ping)]
    ['ping']

    Raises:
        ConfigError: an item is neither a tool nor a function, or two tools
            share a name.
    """
    out: list[Tool] = []
    for item in items:
        if isinstance(item, type):
            raise ConfigError(f"pass a tool instance, not the class {item.__qualname__}")
        if isinstance(item, (FunctionTool, Tool)):
            out.append(item)
        elif callable(item):
            out.append(tool(item))
        else:
            raise ConfigError(f"not a tool or a function: {item!r}")
    seen: set[str] = set()
    for each in out:
        if each.name in seen:
            raise ConfigError(f"two tools are named {each.name!r}")
        seen.add(each.name)
    return tuple(out)


# -- decoration --------------------------------------------------------------


@attrs.frozen
class _Unresolved:
    """An annotation that could not be evaluated."""

    text: str
    error: str


def _build(
    fn: Callable[P, R], name: str | None, description: str | None, effect: ToolEffect, thread: bool = True
) -> FunctionTool[P, R]:
    import inspect

    tool_name = _checked_name(name if name is not None else getattr(fn, "__name__", None))

    def fail(what: str, exc: Exception | str) -> ConfigError:
        return ConfigError(f"tool {tool_name!r}: {what}: {exc}")

    doc = parse_docstring(inspect.getdoc(fn))
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise fail("cannot read the signature", exc) from None
    hints = _hints(fn, signature)
    params = list(signature.parameters.values())
    takes_ctx = bool(params) and _is_ctx(params[0], hints.get(params[0].name))
    if takes_ctx:
        params = params[1:]
    for param in params:
        hint = hints.get(param.name, inspect.Parameter.empty)
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise fail(f"parameter {param.name!r}", "*args and **kwargs cannot be tool parameters")
        if hint is inspect.Parameter.empty:
            raise fail(f"parameter {param.name!r}", "has no type annotation")
        if isinstance(hint, _Unresolved):
            raise fail(f"parameter {param.name!r}", f"cannot resolve annotation {hint.text!r}: {hint.error}")
        if _is_ctx(param, hint):
            raise fail(f"parameter {param.name!r}", "the tool context must be the first parameter")

    builder = SchemaBuilder()
    is_async = _is_async(fn)
    args_class = unwrap_newtype(hints[params[0].name]) if len(params) == 1 else None
    if isinstance(args_class, type) and typing.get_origin(args_class) is None and model_kind(args_class):
        try:
            parameters = builder.finish(builder.model(args_class, describe=False))
            args_converter: Converter | None = compile_converter(args_class)
        except ConfigError as exc:
            raise fail(f"parameter {params[0].name!r}", exc) from None
        converters: dict[str, Converter | None] = {}
        required: tuple[str, ...] = ()
        drop_null: frozenset[str] = frozenset()
    else:
        args_converter = None
        for param in params:
            if param.kind is param.POSITIONAL_ONLY:
                raise fail(f"parameter {param.name!r}", "positional-only parameters cannot be tool arguments")
        fields = [_param_field(p, hints[p.name], dict(doc.args)) for p in params]
        try:
            parameters = builder.finish(builder.object_schema(fields, {}, None))
        except ConfigError as exc:  # already names the parameter
            raise ConfigError(f"tool {tool_name!r}: {exc}") from None
        converters = {}
        for spec in fields:
            try:
                converters[spec.name] = None if is_plain(spec.type) else compile_converter(spec.type)
            except ConfigError as exc:
                raise fail(f"parameter {spec.name!r}", exc) from None
        required = tuple(spec.name for spec in fields if spec.required)
        drop_null = frozenset(s.name for s in fields if not s.required and not accepts_none(s.type))

    never_awaits = is_async and _never_awaits(fn)
    plan = _Plan(
        target=fn,
        is_async=is_async,
        thread=thread,
        takes_ctx=takes_ctx,
        direct=is_async and args_converter is None and all(c is None for c in converters.values()),
        converters=converters,
        required=required,
        drop_null=drop_null,
        args_converter=args_converter,
        never_awaits=never_awaits,
        code=_code_of(fn) if never_awaits else None,
    )
    try:
        returns = hints.get("return")
        if isinstance(returns, _Unresolved):
            raise ConfigError(f"cannot resolve annotation {returns.text!r}: {returns.error}")
        output_schema = _output_schema(returns)
    except ConfigError as exc:
        raise fail("return type", exc) from None
    return FunctionTool(
        fn,
        tool_name,
        doc.summary if description is None else description,
        parameters,
        output_schema,
        effect,
        plan,
    )


def _checked_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(f"invalid tool name {name!r}: use 1-64 letters, digits, '_' or '-' (pass name=...)")
    return name


def _hints(fn: Callable[..., Any], signature: Any) -> dict[str, Any]:
    """The function's evaluated annotations; unresolvable ones as :class:`_Unresolved`."""
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:  # fall back to one annotation at a time, for readable errors
        pass
    import inspect

    globalns = getattr(inspect.unwrap(fn), "__globals__", {})
    annotations = {p.name: p.annotation for p in signature.parameters.values() if p.annotation is not p.empty}
    if signature.return_annotation is not signature.empty:
        annotations["return"] = signature.return_annotation
    out: dict[str, Any] = {}
    for key, annotation in annotations.items():
        holder = type("_Holder", (), {"__annotations__": {key: annotation}})
        try:
            out[key] = typing.get_type_hints(holder, globalns, include_extras=True)[key]
        except Exception as exc:  # reported later, with the parameter's name
            out[key] = _Unresolved(str(annotation), str(exc))
    return out


def _is_ctx(param: Any, hint: object) -> bool:
    if param.name == "ctx":
        return True
    if isinstance(hint, _Unresolved):
        return hint.text.startswith("ToolContext")
    return hint is ToolContext or typing.get_origin(hint) is ToolContext


def _is_async(fn: Callable[..., Any]) -> bool:
    import inspect

    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


#: The opcodes a coroutine suspends at (every ``await``, ``async with`` and
#: ``async for`` compiles to some of them).
_SUSPENDING = frozenset(
    {"YIELD_VALUE", "SEND", "GET_AWAITABLE", "GET_AITER", "GET_ANEXT", "BEFORE_ASYNC_WITH"}
)


def _never_awaits(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` is an ``async def`` whose body cannot suspend (False
    when unsure: a callable object, a wrapper, a generator-based coroutine,
    a compiled function whose ``__code__`` is not what runs)."""
    import dis
    import inspect

    code = _code_of(fn)
    if code is None or not code.co_flags & inspect.CO_COROUTINE:
        return False
    return not any(instruction.opname in _SUSPENDING for instruction in dis.get_instructions(code))


def _code_of(fn: object) -> types.CodeType | None:
    """The bytecode a Python function (or a method of one) runs; None for
    anything else (a compiled function's ``__code__`` is not what runs)."""
    if type(fn) is types.MethodType:
        fn = fn.__func__
    if type(fn) is not types.FunctionType:
        return None
    return fn.__code__


def at_once(tool: object) -> FunctionTool[..., Any] | None:
    """``tool`` if it is a :class:`FunctionTool` whose call never suspends
    (see ``_Plan.at_once``; an ``async def`` still runs the code it was read
    from), else None."""
    if type(tool) is FunctionTool:
        plan = tool._plan
        if plan.at_once and (plan.code is None or _code_of(plan.target) is plan.code):
            return tool
    return None


def context_free(tool: object) -> bool:
    """Whether ``tool`` is a :class:`FunctionTool` whose function takes no
    :class:`ToolContext` (its ``invoke`` then never reads the one it is given)."""
    return type(tool) is FunctionTool and not tool._plan.takes_ctx


def _param_field(param: Any, hint: object, docs: Mapping[str, str]) -> FieldSpec:
    name, description = param.name, docs.get(param.name)
    if param.default is param.empty:
        return FieldSpec(name, name, name, hint, True, description=description)
    has_default, default = json_default(param.default)
    return FieldSpec(name, name, name, hint, False, has_default, default, description)


def _output_schema(hint: object) -> dict[str, Any] | None:
    if hint is None or hint is type(None) or is_any(hint):
        return None
    return type_schema(hint)


__all__ = ["FunctionTool", "tool", "tools"]
