"""Server profiles: what an OpenAI-compatible Chat Completions server accepts.

OpenAI's reference is one dialect; llama.cpp, vLLM, Ollama and LM Studio each
accept a slightly different one (which field limits the output, whether an
assistant message may have ``content: null``, which structured-output form
they take, which ``tool_choice`` values they know). A :class:`ServerProfile`
states those facts once, and the Chat Completions body is built from it.
Explicit options of :class:`~helikon.providers.openai.OpenAIModel`
(``max_tokens_param=``, ``stream_usage=``, ``parallel_tool_calls=``,
``structured_output=``) still win over the profile.

``docs/providers.md`` has the table of the named profiles, with where each
fact comes from.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

import attrs

from helikon.errors import ConfigError

#: How a JSON Schema response format is asked of the server:
#:
#: - ``"native"``: ``response_format: {"type": "json_schema", ...}`` (OpenAI's form);
#: - ``"json_object"``: ``response_format: {"type": "json_object", "schema": ...}``
#:   (llama.cpp's grammar-constrained form);
#: - ``"tool"``: a final-result tool whose parameters are the schema, forced
#:   with ``tool_choice``; its arguments come back as the answer's text;
#: - ``"prompted"``: the schema is put in the instructions and the model is
#:   asked to answer with JSON only (works on any server; nothing constrains
#:   the decoding, so the loop's validation and repair turn matter most).
#:
#: In every mode the answer is validated against the original schema.
OutputMode = Literal["native", "json_object", "tool", "prompted"]
#: The ``tool_choice`` forms a server understands.
ToolChoiceForm = Literal["auto", "none", "required", "named"]
#: The assistant ``content`` of a message that only calls tools.
ToolCallContent = Literal["null", "empty"]
#: Which field carries ``max_output_tokens``.
TokenLimitField = Literal["max_completion_tokens", "max_tokens"]

#: The hidden tool of the ``"tool"`` output mode.
OUTPUT_TOOL_NAME: Final = "final_result"


@attrs.frozen
class ServerProfile:
    """What one OpenAI-compatible server accepts on ``/chat/completions``.

    Args:
        name: shown in errors and telemetry.
        max_tokens_param: the field that carries ``max_output_tokens``.
        tool_call_content: the assistant ``content`` of a message holding
            only tool calls: ``"null"`` (OpenAI's reference) or ``"empty"``
            (``""``, for servers whose request model wants a string).
        output_modes: the structured-output modes the server supports; the
            first is the default.
        stream_usage: whether the server takes ``stream_options.include_usage``.
        tool_choices: the ``tool_choice`` forms it understands; a request for
            another is refused before it is sent (a ``ModelError`` naming the
            profile), never silently dropped.
        parallel_tool_calls: whether it takes the ``parallel_tool_calls`` field.
        explicit_auto: send ``tool_choice: "auto"`` when the request has tools
            and no choice (llama-cpp-python's function-calling chat format
            ignores the tools unless a choice is sent).
        streams_auto_tool_choice: whether the server can stream a turn whose
            tools are offered with ``tool_choice: "auto"``; when not (llama-
            cpp-python), such a turn is made as one non-streaming call (the
            same events, delivered at once).
    """

    name: str
    max_tokens_param: TokenLimitField = "max_completion_tokens"
    tool_call_content: ToolCallContent = "null"
    output_modes: tuple[OutputMode, ...] = ("native", "tool", "prompted")
    stream_usage: bool = True
    tool_choices: frozenset[ToolChoiceForm] = frozenset({"auto", "none", "required", "named"})
    parallel_tool_calls: bool = True
    explicit_auto: bool = False
    streams_auto_tool_choice: bool = True

    def __attrs_post_init__(self) -> None:
        if not self.output_modes:
            raise ConfigError(f"server profile {self.name!r} needs at least one output mode")
        for mode in self.output_modes:
            if mode not in get_args(OutputMode):
                raise ConfigError(
                    f"server profile {self.name!r}: unknown output mode {mode!r} "
                    f"(one of {', '.join(get_args(OutputMode))})"
                )
        for form in self.tool_choices:
            if form not in get_args(ToolChoiceForm):
                raise ConfigError(f"server profile {self.name!r}: unknown tool_choice form {form!r}")
        if self.max_tokens_param not in get_args(TokenLimitField):
            raise ConfigError(
                f"server profile {self.name!r}: unknown max_tokens_param {self.max_tokens_param!r}"
            )
        if self.tool_call_content not in get_args(ToolCallContent):
            raise ConfigError(
                f"server profile {self.name!r}: tool_call_content must be 'null' or 'empty'"
            )

    @property
    def output_mode(self) -> OutputMode:
        """The default structured-output mode."""
        return self.output_modes[0]


#: The named profiles (``OpenAIModel.chat(..., profile="llama.cpp")``).
PROFILES: Final[dict[str, ServerProfile]] = {
    "openai": ServerProfile("openai"),
    "llama.cpp": ServerProfile(
        "llama.cpp",
        max_tokens_param="max_tokens",
        tool_call_content="empty",
        output_modes=("json_object", "tool", "prompted"),
        stream_usage=False,
        tool_choices=frozenset({"auto", "none", "named"}),
        parallel_tool_calls=False,
        explicit_auto=True,
        streams_auto_tool_choice=False,
    ),
    "vllm": ServerProfile(
        "vllm",
        max_tokens_param="max_tokens",
        output_modes=("native", "tool", "prompted"),
        parallel_tool_calls=False,
    ),
    "ollama": ServerProfile(
        "ollama",
        max_tokens_param="max_tokens",
        tool_call_content="empty",
        output_modes=("native", "prompted"),
        tool_choices=frozenset({"auto", "none"}),
        parallel_tool_calls=False,
    ),
    "lmstudio": ServerProfile(
        "lmstudio",
        max_tokens_param="max_tokens",
        tool_call_content="empty",
        output_modes=("native", "tool", "prompted"),
        stream_usage=False,
        tool_choices=frozenset({"auto", "none", "required"}),
        parallel_tool_calls=False,
    ),
}


def profile_named(profile: str | ServerProfile) -> ServerProfile:
    """The profile a ``profile=`` option names (or the profile object itself)."""
    if isinstance(profile, ServerProfile):
        return profile
    found = PROFILES.get(profile) if isinstance(profile, str) else None
    if found is None:
        raise ConfigError(
            f"unknown server profile {profile!r}: use one of {', '.join(repr(p) for p in PROFILES)} "
            "or a ServerProfile(...)"
        )
    return found


__all__ = [
    "OUTPUT_TOOL_NAME",
    "PROFILES",
    "OutputMode",
    "ServerProfile",
    "TokenLimitField",
    "ToolCallContent",
    "ToolChoiceForm",
    "profile_named",
]
