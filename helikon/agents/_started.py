"""Resuming an agent tree: started tool steps are known, as in the agent loop.

A tree node keeps the effect its machine asked for. For a member waiting on
a tool round, that effect may hold tool steps its state marks started
(:class:`~helikon.loop.Running`); a stored tree state resumed anywhere must
not run them again silently, so the node asks what the agent loop's own
resume asks for (:func:`helikon.loop.resumed_step`: re-run an idempotent
tool with the same call id, reconcile any other). A node whose round runs
agents as tools is left as it is: those steps are sub-runs of the tree.
"""

from __future__ import annotations

import attrs

from helikon.agents._tree import TreeNode, TreeSpec, TreeState
from helikon.effects import ExecuteTools
from helikon.loop import AgentSpec, ExecutingTools, RunState, resumed_step


def started_steps_known(state: TreeState, spec: TreeSpec) -> TreeState:
    """``state`` whose nodes ask for the recovery steps of their started
    tool calls instead of running them again."""
    root = _known(state.root, spec)
    return state if root is state.root else attrs.evolve(state, root=root)


def _known(node: TreeNode, spec: TreeSpec) -> TreeNode:
    children = tuple(
        child if (known := _known(child.node, spec)) is child.node else attrs.evolve(child, node=known)
        for child in node.children
    )
    if any(a is not b for a, b in zip(children, node.children, strict=True)):
        node = attrs.evolve(node, children=children)
    state, member = node.state, spec.member(node.agent)
    if (
        type(node.effect) is not ExecuteTools
        or not isinstance(state, RunState)
        or type(state.phase) is not ExecutingTools
        or member is None
        or not isinstance(member.spec, AgentSpec)
        or member.agent_tools
    ):
        return node
    agent = member.spec
    steps = tuple(s for s in (resumed_step(call, agent) for call in state.phase.calls) if s is not None)
    return node if steps == node.effect.steps else attrs.evolve(node, effect=ExecuteTools(steps))


__all__ = ["started_steps_known"]
