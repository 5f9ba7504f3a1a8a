"""The quick way to structure valid data: one plain function per type.

:func:`helikon.codec.structure` goes through cattrs, which looks up a hook
per value and, for a tagged union, copies the object to pop its tag; on a
trace of a few thousand carriers that is most of the time it takes to load.
:func:`quick` compiles, once per type, a function that does the same thing
directly: a carrier's fields read and checked in one generated function, a
union dispatched on its tag, a tuple built from a list.

It gives the same value as :func:`~helikon.codec.structure` for every value
that one accepts, and raises (some exception, its message not meant for a
user) for every value that one rejects: its checks are the converter's own
(a string must be a ``str``, an integer an ``int`` and not a ``bool``, a
number an ``int`` or a ``float``, ...), and a type it has no quick form for
is handed to the converter's own hook. A caller that meets an exception
runs :func:`~helikon.codec.structure` again on the same value for the
error a user reads (its field paths and words); the quick path never words
one.

:func:`typed` goes one step further for a trace's step lines: msgspec
decodes a line as ``Struct`` mirrors of its carriers, checking every type in
C, and the carriers are built from them with no check at all; a line it
refuses is read the quick way (and then the strict way).

Both make a carrier without running its ``__init__`` when attrs generated
one that only stores its arguments (:func:`construction`, :func:`maker`):
the instance is made with ``object.__new__`` and its slots or ``__dict__``
set directly, as that ``__init__`` would (a class with a validator, a
factory default, a hook or a cached hash is called as usual).
"""

from __future__ import annotations

import enum
import inspect
import re
import types
import typing
from collections.abc import Callable
from typing import Any

import attrs
import msgspec

from helikon import codec

#: A compiled structure function: raw JSON data in, a value out.
Quick = Callable[[Any], Any]


class _Refused(Exception):
    """The quick path met a value it does not take (the converter words why)."""


def quick(tp: Any) -> Quick:
    """The quick structure function for ``tp`` (built once per type)."""
    found = _compiled.get(tp)
    if found is None:
        # A stand-in while it is built, for a type that contains itself.
        _compiled[tp] = _Lazy(tp)
        try:
            found = _build(tp)
        except BaseException:
            del _compiled[tp]  # never a stand-in for nothing
            raise
        _compiled[tp] = found
    return found


def _build(tp: Any) -> Quick:
    if tp is str:
        return _str
    if tp is int:
        return _int
    if tp is float:
        return _float
    if tp is bool:
        return _bool
    supertype = getattr(tp, "__supertype__", None)  # a NewType: its base type's
    if supertype is not None and getattr(tp, "__module__", "").startswith("helikon"):
        return quick(supertype)
    if isinstance(tp, type) and attrs.has(tp):
        return _carrier(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum(tp)
    if codec._is_tuple(tp):
        return _tuple(tp)
    if codec._is_tagged_union(tp):
        return _union(tp)
    if codec._is_scalar_union(tp):
        return _scalar_union(tp)
    # Raw JSON: the converter's own hooks, called without the converter.
    if codec._is_json_value(tp):
        return codec._json_value
    if codec._is_json_object(tp) or codec._is_any_dict(tp):
        return codec._json_object
    conv = codec.converter()
    hook = conv.get_structure_hook(tp)
    return lambda value: hook(value, tp)


def _str(value: Any) -> str:
    if type(value) is not str:
        raise _Refused
    return value


def _int(value: Any) -> int:
    if type(value) is not int:
        raise _Refused
    return value


def _float(value: Any) -> float:
    kind = type(value)
    if kind is float:
        return value  # type: ignore[no-any-return]
    if kind is int:
        return float(value)
    raise _Refused


def _bool(value: Any) -> bool:
    if type(value) is not bool:
        raise _Refused
    return value


def _enum(tp: type[enum.Enum]) -> Quick:
    # The converter builds a member from its value; so does this, by lookup.
    members = {m.value: m for m in tp}
    hook = codec.converter().get_structure_hook(tp)

    def structure(value: Any) -> Any:
        if type(value) is str:
            found = members.get(value)
            if found is not None:
                return found
        return hook(value, tp)

    return structure


def _scalar_union(tp: Any) -> Quick:
    allowed = tuple(a for a in typing.get_args(tp) if isinstance(a, type))
    widen = float in allowed

    def structure(value: Any) -> Any:
        kind = type(value)
        if kind in allowed:
            return value
        if kind is int and widen:
            return float(value)
        raise _Refused

    return structure


def _tuple(tp: Any) -> Quick:
    args = typing.get_args(tp)
    if len(args) == 2 and args[1] is Ellipsis:
        each = quick(args[0])

        def homogeneous(value: Any) -> Any:
            if type(value) is not list and type(value) is not tuple:
                raise _Refused
            return tuple(map(each, value))

        return homogeneous
    hooks = [quick(a) for a in args]
    size = len(args)

    def fixed(value: Any) -> Any:
        if (type(value) is not list and type(value) is not tuple) or len(value) != size:
            raise _Refused
        return tuple([h(v) for h, v in zip(hooks, value, strict=True)])

    return fixed


def _union(tp: Any) -> Quick:
    members = [a for a in typing.get_args(tp) if isinstance(a, type) and attrs.has(a)]
    optional = type(None) in typing.get_args(tp)
    if any("type" in attrs.fields_dict(m) for m in members):
        # The tag would hide a field of that name: the converter's way.
        hook = codec.converter().get_structure_hook(tp)
        return lambda value: hook(value, tp)
    hooks = {m.__name__: quick(m) for m in members}

    def structure(value: Any) -> Any:
        if type(value) is not dict:
            if value is None and optional:
                return None
            raise _Refused
        tag = value.get("type")
        hook = hooks.get(tag) if type(tag) is str else None
        if hook is None:
            raise _Refused
        return hook(value)

    return structure


_INLINE: dict[Any, str] = {
    str: "if type({v}) is not str: raise _Refused",
    int: "if type({v}) is not int: raise _Refused",
    bool: "if type({v}) is not bool: raise _Refused",
}


def _carrier(cls: type) -> Quick:
    """One generated function that reads every field of ``cls`` from a dict
    and calls the class (its converters run, as with the converter)."""
    hints = typing.get_type_hints(cls)
    fields = attrs.fields(cls)
    plain = all(f.init and f.alias == f.name for f in fields) and not any(
        isinstance(f.default, _FACTORY) and f.default.takes_self for f in fields
    )
    if not plain:
        hook = codec.converter().get_structure_hook(cls)
        return lambda value: hook(value, cls)
    scope: dict[str, Any] = {"_Refused": _Refused, "_cls": cls, "_missing": _MISSING}
    lines = ["def structure(value):", "    if type(value) is not dict: raise _Refused"]
    args: list[str] = []
    for n, field in enumerate(fields):
        tp = hints[field.name]
        v = f"v{n}"
        required = field.default is attrs.NOTHING
        read = f"value[{field.name!r}]" if required else f"value.get({field.name!r}, _missing)"
        lines.append(f"    {v} = {read}")
        indent = "    "
        if not required:
            default = field.default
            if isinstance(default, _FACTORY):
                scope[f"d{n}"] = default.factory
                lines.append(f"    if {v} is _missing: {v} = d{n}()")
            else:
                scope[f"d{n}"] = default
                lines.append(f"    if {v} is _missing: {v} = d{n}")
            lines.append("    else:")
            indent = "        "
        check = _INLINE.get(tp)
        if check is not None:
            lines.append(indent + check.format(v=v))
        else:
            scope[f"h{n}"] = quick(tp)
            lines.append(f"{indent}{v} = h{n}({v})")
        args.append(f"{field.name}={v}" if field.kw_only else v)
    made = construction(cls, [f"v{n}" for n in range(len(fields))], scope, "_m")
    if made is None:
        lines.append(f"    return _cls({', '.join(args)})")
    else:
        lines.extend(f"    {line}" for line in (*made, "return o"))
    exec("\n".join(lines), scope)  # generated from the class's own fields, as cattrs does
    structure: Quick = scope["structure"]
    return structure


def _assignments(cls: type) -> list[tuple[str, str, Any]] | None:
    """How the attrs-generated ``__init__`` of ``cls`` stores each field, in
    field order: ``(name, "slot" or "dict", converter or None)``; None when
    it does anything else (a validator, a factory default, a hook such as
    ``__attrs_post_init__``, a cached hash, ...) or is not attrs' own.

    Read from the source attrs generated (it keeps it for tracebacks): a
    statement of a form not listed here means "call the class", so a
    change in attrs can make building slower, never different.
    """
    if "__attrs_attrs__" not in cls.__dict__ or cls.__new__ is not _OBJECT_NEW:
        return None
    init = cls.__dict__.get("__init__")
    code = getattr(init, "__code__", None)
    if code is None or not code.co_filename.startswith("<attrs generated"):
        return None
    scope = init.__globals__  # type: ignore[union-attr]
    if scope.get("_cached_setattr_get") != _OBJECT_SETATTR_GET:
        return None
    try:
        source = inspect.getsource(init)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return None
    if not _same_code(source, code):
        return None  # the text read is not this ``__init__``'s (a stale line cache)
    body = source.splitlines()[1:]
    fields = attrs.fields(cls)
    found: list[tuple[str, str, Any]] = []
    for line in body:
        statement = line.strip()
        if statement in ("_setattr = _cached_setattr_get(self)", "_inst_dict = self.__dict__", ""):
            continue
        match = _STORE.fullmatch(statement)
        if match is None:
            return None
        name = match["slot"] or match["key"]
        value = match["value"] or match["value2"]
        converter = None
        if value != name:
            call = _CONVERTED.fullmatch(value)
            if call is None or call["field"] != name or call["arg"] != name:
                return None
            converter = scope.get(f"__attr_converter_{name}")
            if not callable(converter):
                return None
        found.append((name, "slot" if match["slot"] else "dict", converter))
    if [name for name, _, _ in found] != [f.name for f in fields] or any(
        f.alias != f.name or not f.init for f in fields
    ):
        return None
    return found


def _same_code(source: str, code: types.CodeType) -> bool:
    """Whether ``source`` compiles to ``code``: the text the line cache gave
    for an ``__init__`` is the one it runs (attrs may reuse a file name for a
    class defined again with the same name)."""
    try:
        compiled = compile(source, code.co_filename, "exec")
    except (SyntaxError, ValueError):
        return False
    for const in compiled.co_consts:
        if isinstance(const, types.CodeType) and const.co_name == code.co_name:
            return (const.co_code, const.co_names, const.co_varnames, const.co_consts) == (
                code.co_code,
                code.co_names,
                code.co_varnames,
                code.co_consts,
            )
    return False


_OBJECT_SETATTR_GET: Any = object.__setattr__.__get__
_OBJECT_NEW: Any = object.__new__
_STORE = re.compile(
    r"_setattr\('(?P<slot>\w+)', (?P<value>.+)\)|_inst_dict\['(?P<key>\w+)'\] = (?P<value2>.+)"
)
_CONVERTED = re.compile(r"__attr_converter_(?P<field>\w+)\((?P<arg>\w+)\)")


def construction(cls: type, values: list[str], scope: dict[str, Any], prefix: str) -> list[str] | None:
    """Statements that make ``o``, an instance of ``cls`` from the Python
    expressions ``values`` (one per field, in order), exactly as calling
    the class would, with no ``__init__`` run (a frame and a call per field
    less); None if the class's ``__init__`` does more than store its
    arguments (see :func:`_assignments`). Names it needs go to ``scope``,
    starting with ``prefix``."""
    stores = _assignments(cls)
    if stores is None:
        return None
    scope[f"{prefix}cls"] = cls
    scope["_new"] = object.__new__
    scope["_osetattr"] = object.__setattr__
    lines = [f"o = _new({prefix}cls)"]
    in_dict: list[str] = []
    for n, ((name, kind, converter), value) in enumerate(zip(stores, values, strict=True)):
        if converter is not None:
            scope[f"{prefix}c{n}"] = converter
            value = f"{prefix}c{n}({value})"
        if kind == "dict":
            in_dict.append(f"{name!r}: {value}")
            continue
        setter = _slot_setter(cls, name)
        if setter is None:
            lines.append(f"_osetattr(o, {name!r}, {value})")
        else:
            scope[f"{prefix}s{n}"] = setter
            lines.append(f"{prefix}s{n}(o, {value})")
    if in_dict:
        lines.append(f"_osetattr(o, '__dict__', {{{', '.join(in_dict)}}})")
    return lines


def _slot_setter(cls: type, name: str) -> Any:
    """The ``__set__`` of the member descriptor ``object.__setattr__`` would
    find for ``name`` on ``cls`` (a slot), or None (then that is called)."""
    for klass in cls.__mro__:
        found = klass.__dict__.get(name)
        if found is not None:
            return found.__set__ if type(found) is types.MemberDescriptorType else None
    return None


def maker(cls: type) -> Callable[..., Any]:
    """A function that takes every field of ``cls`` positionally, in order,
    and gives what ``cls(*fields)`` gives, without running ``__init__`` when
    that only stores them (:func:`construction`); else the class itself."""
    found = _makers.get(cls)
    if found is None:
        scope: dict[str, Any] = {}
        names = [f"a{n}" for n in range(len(attrs.fields(cls)))]
        lines = construction(cls, names, scope, "_")
        if lines is None:
            found = cls
        else:
            body = "\n    ".join([*lines, "return o"])
            exec(f"def make({', '.join(names)}):\n    {body}", scope)  # generated, as in _carrier
            found = scope["make"]
        _makers[cls] = found
    return found


_makers: dict[type, Callable[..., Any]] = {}


def typed(tp: Any) -> tuple[Any, Quick | None]:
    """A msgspec type that decodes what :func:`quick` of ``tp`` reads (or
    less: what it refuses, :func:`quick` is left to read), and the function
    that makes the value :func:`quick` would give of what it decoded (None:
    the decoded value is that value). msgspec checks the types in C while it
    decodes, so a line decoded with it is built with no check at all.

    A carrier becomes a ``Struct`` of its fields (tagged with its class name
    in a union); a type that has no such form here (a carrier with its own
    hook, a recursive one, an enum, raw JSON) is decoded as any JSON and
    read by :func:`quick`.
    """
    found = _typed.get(tp)
    if found is None:
        if tp in _typing:  # a type that contains itself: read the quick way there
            return Any, quick(tp)
        _typing.add(tp)
        try:
            found = _typed[tp] = _build_typed(tp, tagged=False)
        finally:
            _typing.discard(tp)
    return found


def _build_typed(tp: Any, tagged: bool) -> tuple[Any, Quick | None]:
    if tp is str or tp is int or tp is float or tp is bool:
        return tp, None
    supertype = getattr(tp, "__supertype__", None)
    if supertype is not None and getattr(tp, "__module__", "").startswith("helikon"):
        return typed(supertype)
    if isinstance(tp, type) and attrs.has(tp):
        return _struct(tp, tagged)
    if isinstance(tp, type) and issubclass(tp, enum.Enum) and all(type(m.value) is str for m in tp):
        # msgspec reads a member from its value, as :func:`quick` does
        # (looked up: an alias gives its canonical member).
        return tp, None
    if codec._is_tuple(tp):
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            each, build = typed(args[0])
            homogeneous: Any = tuple[each, ...]  # type: ignore[valid-type]
            if build is None:
                return homogeneous, None
            builds = _dispatch.get(build)
            if builds is not None:  # of a union: each member built at once
                return homogeneous, _each_of(builds)
            return homogeneous, lambda value: tuple(map(build, value))
        parts = [typed(a) for a in args]
        if all(build is None for _, build in parts):
            return tuple[tuple(t for t, _ in parts)], None  # type: ignore[misc]
        return Any, quick(tp)
    if codec._is_tagged_union(tp):
        return _tagged_union(tp)
    if codec._is_scalar_union(tp) and all(a in _SCALARS for a in typing.get_args(tp)):
        return tp, None
    return Any, quick(tp)


_SCALARS = (str, int, float, bool, type(None))


def _each_of(builds: dict[type, Quick]) -> Quick:
    """The function that builds a tuple of a union's mirrors, each by its
    class's function (up to three values, the usual case, with no loop)."""

    def build(value: Any) -> Any:
        n = len(value)
        if n == 1:
            v = value[0]
            return (builds[type(v)](v),)
        if n == 2:
            v, w = value
            return (builds[type(v)](v), builds[type(w)](w))
        if n == 3:
            v, w, x = value
            return (builds[type(v)](v), builds[type(w)](w), builds[type(x)](x))
        return tuple([builds[type(v)](v) for v in value])

    return build


def typed_member(cls: type) -> tuple[Any, Quick | None]:
    """:func:`typed` of the carrier ``cls`` as a member of a tagged union
    (its ``Struct`` tagged with its class name), or ``(Any, ...)`` for one
    that has no such form."""
    found = _tagged.get(cls)
    if found is None:
        if cls in _typing:
            return Any, quick(cls)
        _typing.add(cls)
        try:
            found = _tagged[cls] = _build_typed(cls, tagged=True)
        finally:
            _typing.discard(cls)
    return found


def _tagged_union(tp: Any) -> tuple[Any, Quick | None]:
    members = [a for a in typing.get_args(tp) if a is not type(None)]
    optional = type(None) in typing.get_args(tp)
    structs: list[Any] = []
    builds: dict[type, Quick] = {}
    for member in members:
        struct, each = typed_member(member)
        if struct is Any or each is None:
            return Any, quick(tp)
        structs.append(struct)
        builds[struct] = each
    if optional:
        structs.append(type(None))
        builds[type(None)] = _none
    union: Any = typing.Union[tuple(structs)]  # noqa: UP007 (a union of a list of types)

    def build(value: Any) -> Any:
        return builds[type(value)](value)

    _dispatch[build] = builds
    return union, build


def exact(mirror: Any) -> bool:
    """Whether two values msgspec decoded as ``mirror`` (a type :func:`typed`
    gave) that are ``==`` always have the same JSON text: no float (``-0.0 ==
    0.0``), no raw JSON (``true == 1``, ``1 == 1.0``), only strings,
    integers, booleans, None, tuples of those and mirrors of those (a
    mirror equals only a mirror of its own class)."""
    found = _exact.get(mirror)
    if found is None:
        _exact[mirror] = False  # a type that contains itself: not known exact
        found = _exact[mirror] = _is_exact(mirror)
    return found


def _is_exact(mirror: Any) -> bool:
    if mirror in (str, int, bool, type(None)):
        return True
    if isinstance(mirror, type) and issubclass(mirror, msgspec.Struct):
        return all(exact(f.type) for f in msgspec.structs.fields(mirror))
    args = typing.get_args(mirror)
    origin = typing.get_origin(mirror)
    if origin is tuple:
        return all(a is Ellipsis or exact(a) for a in args)
    if origin is typing.Union or isinstance(mirror, types.UnionType):
        return all(exact(a) for a in args)
    return False


_exact: dict[Any, bool] = {}


def _none(value: None) -> None:
    return None


def _struct(cls: type, tagged: bool) -> tuple[Any, Quick | None]:
    """A carrier as a ``Struct`` of its fields, and the function that calls
    the class with them (its converters and validators run, as with
    :func:`quick`)."""
    hints = typing.get_type_hints(cls)
    fields = attrs.fields(cls)
    plain = all(f.init and f.alias == f.name for f in fields) and not any(
        isinstance(f.default, _FACTORY) and f.default.takes_self for f in fields
    )
    if not plain or (tagged and any(f.name == "type" for f in fields)):
        return Any, quick(cls)
    specs: list[tuple[str, Any, Any]] = []
    scope: dict[str, Any] = {"_cls": cls}
    args: list[str] = []
    reads: list[str] = []
    for n, field in enumerate(fields):
        mirror, build = typed(hints[field.name])
        read = f"value.{field.name}"
        if build is not None:
            scope[f"b{n}"] = build
        # An absent field takes the class's default as it is (as with
        # :func:`quick`), never built: a factory's value comes wrapped.
        if field.default is attrs.NOTHING:
            specs.append((field.name, mirror, msgspec.NODEFAULT))
            if build is not None:
                read = f"b{n}({read})"
        elif isinstance(field.default, _FACTORY):
            factory = field.default.factory
            if build is None:
                specs.append((field.name, mirror, msgspec.field(default_factory=factory)))
            else:
                specs.append((field.name, mirror, msgspec.field(default_factory=_made(factory))))
                scope["_Made"] = _Made
                read = f"(v.value if type(v := {read}) is _Made else b{n}(v))"
        else:
            specs.append((field.name, mirror, field.default))
            if build is not None:
                scope[f"d{n}"] = field.default
                read = f"(d{n} if (v := {read}) is d{n} else b{n}(v))"
        args.append(f"{field.name}={read}" if field.kw_only else read)
        reads.append(read)
    try:
        struct = msgspec.defstruct(
            f"{cls.__name__}Mirror",
            specs,
            kw_only=True,
            tag=cls.__name__ if tagged else None,
            tag_field="type" if tagged else None,
            gc=False,  # decoded JSON holds no cycle: not tracked, made and freed faster
        )
        msgspec.json.Decoder(struct)  # a field type msgspec refuses shows here
    except (TypeError, ValueError):
        return Any, quick(cls)
    made = construction(cls, reads, scope, "_m")
    if made is None:
        exec(f"def build(value): return _cls({', '.join(args)})", scope)  # generated, as in _carrier
    else:
        exec("def build(value):\n    " + "\n    ".join([*made, "return o"]), scope)
    built: Quick = scope["build"]
    return struct, built


class _Made:
    """A factory default's value in a mirror (taken as it is, not built)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _made(factory: Callable[[], Any]) -> Callable[[], _Made]:
    return lambda: _Made(factory())


_typed: dict[Any, tuple[Any, Quick | None]] = {}
#: A union's build function -> its members' (by their mirror's type).
_dispatch: dict[Quick, dict[type, Quick]] = {}
_tagged: dict[Any, tuple[Any, Quick | None]] = {}
#: The types whose typed form is being built (one that contains itself is read the quick way there).
_typing: set[Any] = set()


class _Lazy:
    """A type's structure function while it is being compiled: a carrier
    that holds a union that contains it calls it through this."""

    __slots__ = ("fn", "tp")

    def __init__(self, tp: Any) -> None:
        self.tp = tp
        self.fn: Quick | None = None

    def __call__(self, value: Any) -> Any:
        fn = self.fn
        if fn is None:
            fn = self.fn = quick(self.tp)
        return fn(value)


_MISSING: Any = object()
#: attrs' default factory class (typed loosely: its stubs declare a function).
_FACTORY: Any = attrs.Factory
_compiled: dict[Any, Quick] = {}

__all__ = ["Quick", "construction", "exact", "maker", "quick", "typed", "typed_member"]
