"""The world of an agent tree: its members as data, each path's environment.

An agent with handoffs, a workflow or a swarm runs as one pure machine, the
tree (:mod:`helikon.agents._tree`). :func:`compose` gives the tree what it
needs to know as data: every agent the run can reach (by handoff, as a
workflow child, at any depth), each with its spec, built from the root's run
context by the one environment builder (``make_env``). :func:`env_at` gives
an interpreter the environment of the sub-machine at a path, to perform that
sub-machine's effects with the right model, tools, hooks and context.
"""

from __future__ import annotations

from typing import Any

import attrs

from helikon.agents import Member, TreeSpec
from helikon.context import RunContext
from helikon.errors import ConfigError
from helikon.interpreters._children import resolve
from helikon.interpreters._env import Limits, RunEnv
from helikon.interpreters._machine import TreeMachine, WorkflowMachine


def agent_tools(env: RunEnv) -> list[tuple[str, Any]]:
    """``env``'s tools that are agents (``AgentAsTool``: they know the
    context their sub-run gets), by tool name."""
    return [(name, tool) for name, tool in sorted(env.tools.items()) if _is_agent_tool(tool)]


def _is_agent_tool(tool: object) -> bool:
    return callable(getattr(tool, "sub_context", None))


def is_composite(env: RunEnv) -> bool:
    """Whether ``env``'s agent runs as a tree: it has children, handoffs or
    agents as tools, or hooks (whose ``OnRunComplete`` is the tree's effect)."""
    if env.children or env.hooks or isinstance(env.machine, (WorkflowMachine, TreeMachine)):
        return True
    return bool(agent_tools(env))


def _child_env(
    parent: RunEnv, key: str, agent: Any, interpreter: Any, ctx: RunContext[Any] | None = None
) -> RunEnv | None:
    """The environment of ``agent`` as child ``key`` of ``parent`` (None for
    an agent that is not a helikon machine); ``ctx`` overrides the context
    the child inherits."""
    make_env = getattr(agent, "make_env", None)
    if make_env is None:
        return None
    if ctx is None:
        ctx = attrs.evolve(parent.ctx, agent_depth=parent.ctx.agent_depth + 1)
    env: RunEnv = make_env(
        ctx,
        interpreter,
        run_id=f"{parent.run_id}/{key}",
        path=(*parent.path, key),
        parent=Limits.of(parent),
    )
    return env


def _member(key: str, name: str, agent: Any, env: RunEnv | None, links: dict[str, str]) -> Member:
    budget = getattr(agent, "max_handoffs", None)
    handoffs = budget if isinstance(budget, int) else None
    if env is None:
        return Member(name, None, handoffs, key=key)
    spec = env.machine.spec if isinstance(env.machine, WorkflowMachine) else env.spec
    tools: list[tuple[str, str]] = []
    children: list[tuple[str, str]] = []
    for segment, member in sorted(links.items()):
        kind, _, child = segment.partition(":")
        (tools if kind == "tool" else children).append((child, member))
    return Member(
        name,
        spec,
        handoffs,
        hooks=bool(env.hooks),
        agent_tools=tuple(tools),
        links=tuple(children),
        key=key,
        timeout=env.spec.config.timeout,
        limits=env.spec.config.usage_limits,
    )


def compose(agent: Any, env: RunEnv, interpreter: Any) -> RunEnv:
    """``env`` with the tree machine of every agent its run can reach, when
    ``agent`` has handoffs or children; ``env`` unchanged otherwise.

    Members are agents, told apart by identity, not by name: each gets a key
    (its name, or, when an earlier member has that name, the ``/``-joined
    path it was first found at, breadth first in declaration order) and each
    parent records which member each of its children runs.
    """
    if not is_composite(env) or isinstance(env.machine, TreeMachine):
        return env
    root = getattr(agent, "name", env.spec.name)
    keys: dict[int, str] = {}  # id(agent) -> member key
    found: list[tuple[str, str, Any, RunEnv | None, dict[str, str]]] = []
    queue: list[tuple[tuple[str, ...], str, Any, RunEnv | None, dict[str, str] | None, str]] = [
        ((), root, agent, env, None, "")
    ]
    while queue:
        path, name, current, current_env, owner_links, segment = queue.pop(0)
        key = keys.get(id(current))
        if key is None:
            taken = set(keys.values())
            key = name if name not in taken else "/".join(path)
            while key in taken:
                key += "'"
            keys[id(current)] = key
            links: dict[str, str] = {}
            found.append((key, name, current, current_env, links))
            if current_env is not None:
                workflow = isinstance(current_env.machine, WorkflowMachine)
                for child_key, entry in current_env.children.items():
                    child = resolve(entry)
                    if child is None:
                        continue
                    child_name = getattr(child, "name", child_key) if workflow else child_key
                    built = _child_env(current_env, child_key, child, interpreter)
                    queue.append(((*path, child_key), child_name, child, built, links, f"child:{child_key}"))
                for tool_name, tool in agent_tools(current_env):
                    sub = tool.sub_context(current_env.ctx)
                    built = _child_env(current_env, tool_name, tool.agent, interpreter, sub)
                    queue.append(
                        ((*path, tool_name), tool.agent.name, tool.agent, built, links, f"tool:{tool_name}")
                    )
        if owner_links is not None:
            owner_links[segment] = key
    members = [
        _member(key, name, current, current_env, links) for key, name, current, current_env, links in found
    ]
    spec = TreeSpec(
        keys[id(agent)], tuple(sorted(members, key=lambda m: m.key)), env.spec.config.usage_limits
    )
    return attrs.evolve(env, machine=TreeMachine(spec))


def child_of(parent: RunEnv, key: str) -> tuple[Any, RunContext[Any] | None]:
    """The agent at ``key`` under ``parent`` and the context it runs in (None:
    its parent's, one level deeper): a handoff target or a workflow child by
    key, or an agent used as a tool, keyed ``tool:call id``."""
    tool: Any = parent.tools.get(key.split(":", 1)[0]) if ":" in key else None
    if _is_agent_tool(tool):
        return tool.agent, tool.sub_context(parent.ctx)
    return resolve(parent.children.get(key)), None


def env_at(env: RunEnv, path: tuple[str, ...], interpreter: Any) -> RunEnv:
    """The environment of the sub-machine at ``path`` below ``env`` (cached
    for the run: a path's environment is built once)."""
    if not path:
        return env
    cached = env.subenvs.get(path)
    if cached is not None:
        return cached
    parent = env_at(env, path[:-1], interpreter)
    key = path[-1]
    child, ctx = child_of(parent, key)
    built = _child_env(parent, key, child, interpreter, ctx) if child is not None else None
    if built is None:
        raise ConfigError(f"no helikon agent at {'/'.join(path)!r} of run {env.run_id}")
    env.subenvs[path] = built
    return built


def is_private(env: RunEnv, path: tuple[str, ...], interpreter: Any) -> bool:
    """Whether the sub-machine at ``path`` below ``env`` runs inside an agent
    used as a tool: a private sub-run, whose live events never reach the
    caller's stream."""
    for index, key in enumerate(path):
        if ":" in key:
            parent = env_at(env, path[:index], interpreter)
            if _is_agent_tool(parent.tools.get(key.split(":", 1)[0])):
                return True
    return False


__all__ = ["agent_tools", "child_of", "compose", "env_at", "is_composite", "is_private"]
