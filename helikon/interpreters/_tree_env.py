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
from helikon.errors import ConfigError
from helikon.interpreters._children import resolve
from helikon.interpreters._env import Limits, RunEnv
from helikon.interpreters._machine import TreeMachine, WorkflowMachine


def is_composite(env: RunEnv) -> bool:
    """Whether ``env``'s agent runs as a tree: it has children or handoffs,
    or hooks (whose ``OnRunComplete`` is the tree's effect)."""
    return bool(env.children or env.hooks) or isinstance(env.machine, (WorkflowMachine, TreeMachine))


def _child_env(parent: RunEnv, key: str, agent: Any, interpreter: Any) -> RunEnv | None:
    """The environment of ``agent`` as child ``key`` of ``parent`` (None for
    an agent that is not a helikon machine)."""
    make_env = getattr(agent, "make_env", None)
    if make_env is None:
        return None
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
    return Member(name, spec, handoffs, hooks=bool(env.hooks))


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
    spec = TreeSpec(root, tuple(members[n] for n in sorted(members)))
    return attrs.evolve(env, machine=TreeMachine(spec))


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
    child = resolve(parent.children.get(key))
    built = _child_env(parent, key, child, interpreter) if child is not None else None
    if built is None:
        raise ConfigError(f"no helikon agent at {'/'.join(path)!r} of run {env.run_id}")
    env.subenvs[path] = built
    return built


__all__ = ["compose", "env_at", "is_composite"]
