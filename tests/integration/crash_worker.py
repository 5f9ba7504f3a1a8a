"""Drive a paying agent's run through the step API, the state stored between effects.

``python crash_worker.py BACKEND TARGET STATE_FILE`` continues the run whose
snapshot is ``STATE_FILE`` (or starts it), performing every effect and
storing the state after each step (written to a temporary file, flushed to
disk, then renamed over the old one). The parent kills it with SIGKILL at
random points and starts it again.

The agent's tools write rows to a real database (``sqlite`` with ``TARGET`` a
file, or ``postgres`` with ``TARGET`` a table name in database ``test``):

- ``pay`` is not idempotent (a plain insert) and has no reconcile callback;
- ``put`` is idempotent: an insert keyed by ``ToolContext.call_id``;
- ``charge`` is not idempotent, and reconciles by looking its row up.

Each tool sleeps a little after its write, so a kill often lands between the
side effect and the stored result. Lines on stdout: ``STEP <effect>`` before
each effect is performed, ``WROTE <tool>`` after a tool's write, ``SAVED``
after each state is stored, and at the end ``DONE <usage and output as
JSON>``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import trio

from helikon import (
    LlmAgent,
    Reconciled,
    ToolContext,
    advance,
    dump_state,
    load_state,
    pending_effect,
    perform,
    start,
    tool,
)
from helikon.effects import Terminate
from helikon.model import Usage
from helikon.testing import MockModel, call_tools, say

POSTGRES = os.environ.get("HELIKON_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
PAUSE = 0.1


def connect(backend: str, target: str) -> Any:
    if backend == "sqlite":
        return sqlite3.connect(target, timeout=10)
    import psycopg

    return psycopg.connect(POSTGRES)


def marker(backend: str) -> str:
    return "?" if backend == "sqlite" else "%s"


def make_agent(backend: str, target: str) -> LlmAgent[Any]:
    table, p = (target if backend == "postgres" else "effects"), marker(backend)

    def write(kind: str, call_id: str, *, keyed: bool) -> None:
        db = connect(backend, target)
        try:
            if keyed:
                sql = f"INSERT INTO {table} (kind, call_id) VALUES ({p}, {p}) ON CONFLICT DO NOTHING"
            else:
                sql = f"INSERT INTO {table} (kind, call_id, seq) VALUES ({p}, {p}, {p})"
            db.execute(sql, (kind, call_id) if keyed else (kind, call_id, time.time_ns()))
            db.commit()
        finally:
            db.close()
        print("WROTE", kind, flush=True)
        time.sleep(PAUSE)  # a kill here: the side effect happened, its result is not stored

    @tool
    def pay(ctx: ToolContext[Any], amount: int) -> str:
        """Pay an amount (not idempotent, no reconcile).

        Args:
            amount: how much.
        """
        write("pay", ctx.call_id, keyed=False)
        return f"paid {amount}"

    @tool(idempotent=True)
    def put(ctx: ToolContext[Any], key: str) -> str:
        """Store a key (idempotent by call id).

        Args:
            key: the key.
        """
        write("put", ctx.call_id, keyed=True)
        return f"stored {key}"

    def found(ctx: ToolContext[Any], args: Any) -> Reconciled:
        db = connect(backend, target)
        try:
            sql = f"SELECT count(*) FROM {table} WHERE kind = 'charge' AND call_id = {p}"
            (count,) = db.execute(sql, (ctx.call_id,)).fetchone()
        finally:
            db.close()
        return Reconciled(True, f"charged {args['amount']}") if count else Reconciled(False)

    @tool(reconcile=found)
    def charge(ctx: ToolContext[Any], amount: int) -> str:
        """Charge a card (not idempotent; reconciles by its row).

        Args:
            amount: how much.
        """
        write("charge", ctx.call_id, keyed=False)
        return f"charged {amount}"

    usage = Usage(input_tokens=11, output_tokens=7)
    model = MockModel(
        [
            call_tools(("c1", "pay", {"amount": 5}), ("c2", "put", {"key": "k"}), usage=usage),
            call_tools(("c3", "charge", {"amount": 9}), usage=usage),
            say("done", usage=usage),
        ]
    )
    return LlmAgent(name="payer", model=model, instructions="Pay.", tools=[pay, put, charge])


def store(path: Path, state: Any) -> None:
    temporary = path.with_suffix(".tmp")
    with open(temporary, "wb") as out:
        out.write(dump_state(state))
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)
    print("SAVED", flush=True)


def main(backend: str, target: str, state_file: Path) -> None:
    agent = make_agent(backend, target)
    if state_file.exists():
        state = load_state(state_file.read_bytes())
        effect = pending_effect(agent, state)
    else:
        outcome = start(agent, "pay", run_id="crash")
        store(state_file, outcome.state)
        state, effect = outcome.state, outcome.effect

    async def drive() -> Any:
        nonlocal state, effect
        while not isinstance(effect, Terminate):
            print("STEP", type(effect).__name__, flush=True)
            _, result = await perform(agent, effect, run_id="crash")
            outcome = advance(agent, state, result)
            store(state_file, outcome.state)
            state, effect = outcome.state, outcome.effect
        return state

    final = trio.run(drive)
    usage = final.usage
    done = {"input": usage.input_tokens, "output": usage.output_tokens, "answer": final.phase.output}
    print("DONE", json.dumps(done), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
