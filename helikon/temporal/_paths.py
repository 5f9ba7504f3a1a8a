"""Where a path of an agent tree leads: pure lookups over a ``TreeSpec``.

The workflow and the worker both need to know which agent of a tree runs at
a path (the workflow for its tool-call limit and its timeout, the worker to
describe the tree): a workflow child's key names one of the workflow's
nodes, whose agent it runs; a handoff's key is the target's own name (see
:func:`helikon.interpreters.compose`).
"""

from __future__ import annotations

from helikon.agents import Member, TreeSpec, WorkflowSpec
from helikon.loop import AgentSpec


def child_keys(member: Member) -> tuple[tuple[str, str], ...]:
    """The (key, member key) of every child ``member`` can start: a
    workflow's nodes, or an agent's handoff targets (a child without a
    recorded link runs the member keyed by its agent's name)."""
    spec = member.spec
    if isinstance(spec, WorkflowSpec):
        pairs = tuple((node.key, node.agent) for node in spec.nodes)
    elif isinstance(spec, AgentSpec):
        pairs = tuple((handoff.target, handoff.target) for handoff in spec.handoffs)
    else:
        return ()
    return tuple((key, member.linked(key) or agent) for key, agent in pairs)


def member_at(tree: TreeSpec, path: tuple[str, ...]) -> Member | None:
    """The agent of ``tree`` that runs at ``path`` (None: no such path).

    >>> from helikon.agents import Node, WorkflowKind
    >>> flow = WorkflowSpec("desk", WorkflowKind.PARALLEL, (Node("left", "notes"),))
    >>> tree = TreeSpec("desk", (Member("desk", flow), Member("notes", AgentSpec("notes"))))
    >>> member_at(tree, ("left",)).name, member_at(tree, ("right",))
    ('notes', None)
    """
    member = tree.member(tree.root)
    for key in path:
        if member is None:
            return None
        name = dict(child_keys(member)).get(key)
        if name is None and ":" in key:  # an agent used as a tool, keyed ``tool:call id``
            name = member.agent_tool(key.split(":", 1)[0])
        member = tree.member(name) if name is not None else None
    return member


def member_paths(tree: TreeSpec) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Every agent of ``tree`` with the first path (breadth first) it runs at.

    >>> from helikon.loop import HandoffSpec
    >>> a = AgentSpec("a", handoffs=(HandoffSpec("transfer_to_b", "b", ""),))
    >>> b = AgentSpec("b", handoffs=(HandoffSpec("transfer_to_a", "a", ""),))
    >>> member_paths(TreeSpec("a", (Member("a", a), Member("b", b))))
    (('a', ()), ('b', ('b',)))
    """
    found: dict[str, tuple[str, ...]] = {}
    queue: list[tuple[str, tuple[str, ...]]] = [(tree.root, ())]
    while queue:
        name, path = queue.pop(0)
        member = tree.member(name)
        if name in found or member is None:
            continue
        found[name] = path
        queue.extend((child, (*path, key)) for key, child in child_keys(member))
    return tuple(found.items())


def is_private(tree: TreeSpec | None, path: tuple[str, ...]) -> bool:
    """Whether ``path`` runs inside an agent used as a tool (a private
    sub-run: its live events never reach the caller's stream)."""
    if tree is None:
        return False
    for index, key in enumerate(path):
        parent = member_at(tree, path[:index])
        if ":" in key and parent is not None and parent.agent_tool(key.split(":", 1)[0]) is not None:
            return True
    return False


__all__ = ["child_keys", "is_private", "member_at", "member_paths"]
