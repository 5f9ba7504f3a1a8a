"""What the loop knows of an agent's definition: data only.

An :class:`AgentSpec` is the agent as the pure machine sees it: its name,
static instructions (or the fact that they are rendered per turn), tool
definitions, model settings, output schema and run config. Objects with
behaviour (the model, the tool functions, an instructions function) stay
with the interpreter, which the machine reaches through effects.
"""

from __future__ import annotations

import enum

import attrs

from helikon._json import JsonObject
from helikon.config import RunConfig
from helikon.governance import PermissionSettings
from helikon.model import ModelSettings, ToolDef
from helikon.pricing import ModelPrice


@attrs.frozen
class OutputSchema:
    """The structured output an agent must produce: a named JSON Schema."""

    name: str
    schema: JsonObject


@attrs.frozen
class HandoffSpec:
    """A handoff the model may choose: the ``tool_name`` it calls to transfer
    to agent ``target``, described by the target's description."""

    tool_name: str
    target: str
    description: str

    def tool_def(self) -> ToolDef:
        """The synthetic transfer tool the model sees."""
        return ToolDef(
            self.tool_name,
            self.description or f"Transfer the conversation to {self.target}.",
            {"type": "object", "properties": {}, "additionalProperties": False},
        )


class ApprovalRoute(enum.Enum):
    """Where a call that needs a human's approval goes."""

    #: No approval handler: the ask resolves to deny (the book's headless default).
    DENY = "deny"
    #: Ask the run's approval handler (an ``AskApprovals`` effect).
    HANDLER = "handler"
    #: Suspend the run in ``NeedsApproval`` (an ``AwaitApproval`` effect).
    SUSPEND = "suspend"


@attrs.frozen
class Governance:
    """The run's governance configuration, as the machine reads it.

    Built from the agent and the run context in one place
    (:func:`helikon.agent.prepare`); fingerprinted in a trace's header,
    except ``secrets``, which must never be written down.

    Args:
        permissions: mode, deny/allow/guard rules, whether a policy exists.
        hooks: the names of the hooks that fire on tool calls, in fire order
            (the agent's own, then the run context's).
        approvals: where an ask goes.
        redact: scrub tool output of secrets (on by default).
        secrets: the known secret values to scrub (captured at run start).
    """

    permissions: PermissionSettings = PermissionSettings()
    hooks: tuple[str, ...] = ()
    approvals: ApprovalRoute = ApprovalRoute.DENY
    redact: bool = True
    secrets: tuple[str, ...] = attrs.field(default=(), repr=False)


@attrs.frozen
class AgentSpec:
    """An agent's definition as data.

    Args:
        name: the agent's name.
        instructions: static system instructions, or None.
        dynamic_instructions: render instructions per turn (a
            ``RenderInstructions`` effect) instead of using ``instructions``.
        tools: the tools the model may call, in declaration order.
        settings: model settings for every call.
        output: the structured output schema, or None for plain text.
        config: the run's limits.
        model_id: the model's id, for trace fingerprints.
        handoffs: the agents the model may transfer the conversation to.
        input_guardrails: check the user's text before the first turn.
        output_guardrails: check the final answer before the run completes.
        hooks: fire turn-start hooks (a ``RunHooks`` effect per turn).
        governance: permissions, tool hooks, approvals and redaction.
        description: what the agent does (telemetry's ``gen_ai.agent.description``).
        price: its model's price (resolved from the run's price source when
            the run starts), or None: its turns cost None.
        idempotent_tools: the names of the tools declared idempotent
            (``@tool(idempotent=True)``): a started call of one whose result
            was lost is run again with the same call id (see
            :func:`helikon.loop.may_rerun`).
    """

    name: str
    instructions: str | None = None
    dynamic_instructions: bool = False
    tools: tuple[ToolDef, ...] = ()
    settings: ModelSettings = ModelSettings()
    output: OutputSchema | None = None
    config: RunConfig = RunConfig()
    model_id: str = ""
    handoffs: tuple[HandoffSpec, ...] = ()
    input_guardrails: bool = False
    output_guardrails: bool = False
    hooks: bool = False
    governance: Governance = Governance()
    description: str = ""
    price: ModelPrice | None = None
    idempotent_tools: tuple[str, ...] = ()

    @property
    def model_tools(self) -> tuple[ToolDef, ...]:
        """Every tool the model sees: the agent's, then the transfer tools."""
        if not self.handoffs:
            return self.tools
        return (*self.tools, *(h.tool_def() for h in self.handoffs))

    def handoff(self, tool_name: str) -> HandoffSpec | None:
        """The handoff whose transfer tool is ``tool_name``, or None."""
        for handoff in self.handoffs:
            if handoff.tool_name == tool_name:
                return handoff
        return None

    def tool(self, name: str) -> ToolDef | None:
        """The tool called ``name``, or None.

        >>> AgentSpec("a", tools=(ToolDef("t", "", {}),)).tool("t").name
        't'
        """
        for tool in self.tools:
            if tool.name == name:
                return tool
        return None


def handoff_slug(agent_name: str) -> str:
    """The transfer tool name for an agent: lowercase, non-alphanumeric runs
    collapsed to ``_``.

    >>> handoff_slug("investing specialist")
    'transfer_to_investing_specialist'
    >>> handoff_slug("Q&A -- Desk!")
    'transfer_to_q_a_desk_'
    """
    slug = []
    gap = False
    for char in agent_name.lower():
        if char.isascii() and char.isalnum():
            slug.append(char)
            gap = False
        elif not gap:
            slug.append("_")
            gap = True
    return "transfer_to_" + "".join(slug)


__all__ = ["AgentSpec", "ApprovalRoute", "Governance", "HandoffSpec", "OutputSchema", "handoff_slug"]
