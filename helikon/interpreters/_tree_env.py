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


def _member(name: str, agent: Any, env: RunEnv | None) -> Member:
    budget = getattr(agent, "max_handoffs", None)
    handoffs = budget if isinstance(budget, int) else None
    if env is None:
        return Member(name, None, handoffs)
    spec = env.machine.spec if isinstance(env.machine, WorkflowMachine) else env.spec
    tools = tuple((tool_name, tool.agent.name) for tool_name, tool in agent_tools(env))
    return Member(name, spec, handoffs, hooks=bool(env.hooks), agent_tools=tools)


def compose(agent: Any, env: RunEnv, interpreter: Any) -> RunEnv:
    """``env`` with the tree machine of every agent its run can reach, when
    ``agent`` has handoffs or children; ``env`` unchanged otherwise.

    A name names one agent: when two agents of the tree share a name, the
    first found (breadth first, in declaration order) is the one run.
    """
    if not is_composite(env) or isinstance(env.machine, TreeMachine):
        return env
    root = getattr(agent, "name", env.spec.name)
    members: dict[str, Member] = {}
    owners: dict[str, Any] = {}
    queue: list[tuple[str, Any, RunEnv | None]] = [(root, agent, env)]
    while queue:
        name, current, current_env = queue.pop(0)
        if name in owners:  # a name names one agent: the first found (handoff cycles end here)
            continue
        owners[name] = current
        members[name] = _member(name, current, current_env)
        if current_env is None:
            continue
        workflow = isinstance(current_env.machine, WorkflowMachine)
        for key, entry in current_env.children.items():
            child = resolve(entry)
            if child is None:
                continue
            child_name = getattr(child, "name", key) if workflow else key
            queue.append((child_name, child, _child_env(current_env, key, child, interpreter)))
        for tool_name, tool in agent_tools(current_env):
            sub = tool.sub_context(current_env.ctx)
            built = _child_env(current_env, tool_name, tool.agent, interpreter, sub)
            queue.append((tool.agent.name, tool.agent, built))
    spec = TreeSpec(root, tuple(members[n] for n in sorted(members)))
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


__all__ = ["agent_tools", "child_of", "compose", "env_at", "is_composite"]
