"""What the machine's hot paths read of an agent, worked out once per spec.

The hot paths of a tool loop (:func:`~helikon.loop._transition.one_call_turn`,
:func:`~helikon.loop._round.settle_one`) ask the same questions of the agent
at every step: may a call of this tool run whatever its arguments, what
checks its arguments, may the next turn start without hooks, instructions or
a usage check, which tools and settings the model request carries. The
answers are a function of the (frozen) spec, so they are worked out once and
memoised by the spec's identity; the memo changes speed, never results.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Final, TypeAlias, TypeVar, final

from helikon._json import JsonValue
from helikon.effects import CallModel, ExecuteTools, InvokeTool
from helikon.governance import Allow, Decided
from helikon.loop._calls import ToolCallState, argument_free_fold
from helikon.loop._outcome import Outcome
from helikon.loop._spec import AgentSpec
from helikon.loop._states import CallingModel, ExecutingTools, RunState
from helikon.loop._validate import surely_valid
from helikon.model import ModelRequest, ModelSettings, ToolChoiceNamed, ToolChoiceRequired, ToolDef, Usage

T = TypeVar("T")
#: A quick test of a tool's arguments (see :func:`~helikon.loop._validate.surely_valid`).
Fits: TypeAlias = Callable[[JsonValue], bool]


@final
class Facts:
    """The hot paths' answers for one spec.

    Args:
        spec: the spec they are about, weakly: a memo must not keep an
            agent's spec (its secrets among it) alive after its runs.
        calls: by name, each tool a call of which opens straight in
            ``Running`` whatever its arguments, and its arguments' quick test
            (None until first needed: see :func:`check_of`); empty when a
            model turn has no hot path (handoffs, a price, a usage limit or
            tool hooks).
        max_turns: the spec's ``max_turns``.
        begins: a turn starts with the model call at once (no turn hooks,
            no dynamic instructions, no usage limit to check).
        model_tools: the tools of the model request.
        settings: the settings of the model request, or None when a forced
            tool choice may be dropped (then the request is made in full).
    """

    __slots__ = ("begins", "calls", "max_turns", "model_tools", "settings", "spec")

    def __init__(self, spec: AgentSpec) -> None:
        config, governance = spec.config, spec.governance
        unlimited = config.usage_limits.unlimited
        self.spec = weakref.ref(spec, _forget(id(spec)))
        self.max_turns = config.max_turns
        self.calls: dict[str, tuple[ToolDef, Fits | None]] = {}
        if unlimited and not spec.handoffs and spec.price is None and not governance.hooks:
            seen: set[str] = set()
            for tool in spec.tools:
                if tool.name in seen:
                    continue  # ``spec.tool`` finds the first of a name
                seen.add(tool.name)
                folded = argument_free_fold(tool.name, tool.effect, governance.permissions)
                if type(folded) is Decided and type(folded.decision) is Allow:
                    self.calls[tool.name] = (tool, None)  # its check: compiled when first needed
        self.begins = unlimited and not spec.hooks and not spec.dynamic_instructions
        self.model_tools = spec.model_tools
        choice = spec.settings.tool_choice
        forced = type(choice) in (ToolChoiceRequired, ToolChoiceNamed) and not choice.keep  # type: ignore[union-attr]
        self.settings: ModelSettings | None = None if forced else spec.settings


def facts(spec: AgentSpec) -> Facts:
    """The hot paths' :class:`Facts` for ``spec`` (memoised by identity)."""
    hit = _by_identity.get(id(spec))
    if hit is not None and hit.spec() is spec:
        return hit
    made = Facts(spec)
    if len(_by_identity) >= _IDENTITIES:
        _by_identity.clear()
    # dropped when the spec goes (see _forget), before its id can be reused
    _by_identity[id(spec)] = made
    return made


def _forget(key: int) -> Callable[[object], None]:
    """What drops the memo of the spec whose id is ``key`` when it goes."""

    def forget(_gone: object) -> None:
        _by_identity.pop(key, None)

    return forget


def check_of(hot: Facts, name: str) -> Fits:
    """The arguments' quick test of tool ``name`` of ``hot.calls``, compiled now if not yet."""
    tool, fits = hot.calls[name]
    if fits is None:
        fits = surely_valid(tool.parameters)
        hot.calls[name] = (tool, fits)
    return fits


_by_identity: dict[int, Facts] = {}
_IDENTITIES: Final = 256

#: The memo by the spec's ``id``, for the hot paths to read a hit inline:
#: ``memo.get(id(spec))`` is the spec's facts when its ``spec()`` is the spec
#: (else :func:`facts` makes them).
memo: Final = _by_identity


def _dict_setter(cls: type[T]) -> Callable[[T, dict[str, object]], None]:
    """What sets the ``__dict__`` of an instance of dict class ``cls``: the
    ``__set__`` of its ``__dict__`` descriptor, called straight."""
    descriptor = next(c.__dict__["__dict__"] for c in cls.__mro__ if "__dict__" in c.__dict__)
    setter: Callable[[T, dict[str, object]], None] = descriptor.__set__
    return setter


#: A new run state's fields at once: ``set_state(new, {**old.__dict__, "phase": ...})``,
#: with the copy a ``dict.copy()`` of the old state's fields (several times
#: cheaper than filling a new instance's dict field by field).
set_state: Final = _dict_setter(RunState)
#: A new usage's fields at once (as :data:`set_state`).
set_usage: Final = _dict_setter(Usage)

#: The carriers the hot paths build without calling their ``__init__``: a new
#: instance (``object.__new__``) whose ``__dict__`` gets every field, in field
#: order, as given (or is set at once, a copy of an instance's of the same
#: class with some fields changed: :data:`set_state`, :data:`set_usage`).
#: That is all their ``__init__`` does, for classes like these:
#: dict classes (``slots=False``) with no converter (but ``RunState``'s, given a
#: :class:`~helikon.Conversation`, which it returns as it is), no validator, no
#: ``__attrs_pre_init__`` or ``__attrs_post_init__`` (``tests/unit/test_loop_hot_paths.py``
#: checks each still is one).
BUILT_RAW: Final = (
    CallModel,
    CallingModel,
    ExecuteTools,
    ExecutingTools,
    InvokeTool,
    ModelRequest,
    Outcome,
    RunState,
    ToolCallState,
    Usage,
)

__all__ = [
    "BUILT_RAW",
    "Facts",
    "Fits",
    "check_of",
    "facts",
    "memo",
    "set_state",
    "set_usage",
]
