"""A2A, both ways (the ``a2a`` extra: the official ``a2a-sdk``).

- :class:`A2AServer` serves a helikon agent as an A2A agent: an agent card,
  ``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``,
  approvals as ``input-required`` (:mod:`helikon.protocols.a2a._server`).
- :class:`RemoteA2AAgent` is an A2A agent as a helikon agent: a handoff
  target, an ``AgentAsTool``, a workflow child; inside a tree it is an
  opaque child whose result is recorded, so the run replays with no network
  (:mod:`helikon.protocols.a2a._client`).

See ``docs/protocols.md``.
"""

from helikon.protocols._mount import mount_protocols
from helikon.protocols.a2a._client import RemoteA2AAgent, request_text
from helikon.protocols.a2a._server import (
    APPROVING_WORDS,
    A2AContext,
    A2AServer,
    HelikonExecutor,
    agent_card,
    decisions_from,
)

__all__ = [
    "APPROVING_WORDS",
    "A2AContext",
    "A2AServer",
    "HelikonExecutor",
    "RemoteA2AAgent",
    "agent_card",
    "decisions_from",
    "mount_protocols",
    "request_text",
]
