"""A model's answer in normal form, or the named error the run reports.

What a model streams enters the core as a :class:`~helikon.effects.ModelResponded`
and is folded by the machine, so the machine is where its values are checked,
once, the same under every interpreter: each text a model event carries (a
text or reasoning chunk, a tool call's id, name and argument text, the
reply's id) must be text in normal form (:func:`helikon.normal_form`: no lone
surrogate, which has no UTF-8 form and would break the next request, a trace
or an event stream far from its cause). An answer that is not is folded as
the model call's failure, ``ModelCallFailed(OtherModelFailure(...))`` naming
the event and field, so the run ends with a ``ModelError`` instead of
crashing later. (Argument text that is not JSON, or JSON msgspec refuses — a
lone-surrogate escape, a number out of range — is the loop's "invalid
arguments", which the model may correct.)
"""

from __future__ import annotations

from helikon._normal import is_normal, require_normal
from helikon.effects import ModelCallFailed, ModelResponded
from helikon.errors import NormalFormError, OtherModelFailure
from helikon.model import Finish, ModelEvent, ReasoningChunk, TextChunk, ToolCallChunk, Usage


def _texts(event: ModelEvent) -> tuple[tuple[str, str | None], ...]:
    """The text fields of ``event`` by name."""
    match event:
        case TextChunk(text=text):
            return (("text", text),)
        case ReasoningChunk(text=text, signature=signature):
            return (("text", text), ("signature", signature))
        case ToolCallChunk(call_id=call_id, name=name, arguments=arguments):
            return (("call_id", call_id), ("name", name), ("arguments", arguments))
        case Finish(response_id=response_id):
            return (("response_id", response_id),)
    return ()


def model_form_problem(events: tuple[ModelEvent, ...]) -> str | None:
    r"""Why ``events`` are not in normal form (the first place), or None.

    >>> from helikon.model import TextChunk
    >>> model_form_problem((TextChunk("fine"),)) is None
    True
    >>> model_form_problem((TextChunk("ok"), TextChunk("bad \ud800")))
    "$.events[1].text: the string holds a lone surrogate ('\\ud800' at index 4)"
    """
    for index, event in enumerate(events):
        kind = type(event)
        if kind is Usage:
            continue
        # ASCII (or absent) text is in normal form: the hot path, checked inline
        if kind is TextChunk and event.text.isascii():  # type: ignore[union-attr]
            continue
        if kind is ToolCallChunk:
            c: ToolCallChunk = event  # type: ignore[assignment]
            if (
                (c.call_id is None or c.call_id.isascii())
                and (c.name is None or c.name.isascii())
                and c.arguments.isascii()
            ):
                continue
        if kind is Finish:
            rid = event.response_id  # type: ignore[union-attr]
            if rid is None or rid.isascii():
                continue
        for name, value in _texts(event):
            if value is None or is_normal(value):
                continue
            try:
                require_normal(value, f"$.events[{index}].{name}")
            except NormalFormError as error:
                return str(error)
    return None


def model_answer(result: ModelResponded) -> ModelResponded | ModelCallFailed:
    """``result`` as the machine folds it: itself when in normal form, else
    the model call's failure naming where (the answer's usage is kept)."""
    problem = model_form_problem(result.events)
    if problem is None:
        return result
    usage = tuple(e for e in result.events if type(e) is Usage)
    return ModelCallFailed(OtherModelFailure(f"the model's answer is not in normal form: {problem}"), usage)


__all__ = ["model_answer", "model_form_problem"]
