"""Perform one effect of the resume agent's run in this process, then exit.

``python step_process.py STATE_FILE`` starts the run when ``STATE_FILE``
does not exist; otherwise it loads the state, performs the effect it waits
on with a brand-new agent (and so a brand-new ``MockModel`` holding all the
scripts) and saves the next state. Each event goes to stdout as a JSON line;
the last line is ``DONE`` once the run is over.
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from helikon import advance, dump_state, load_state, pending, perform, start
from helikon.codec import to_json
from helikon.effects import Terminate
from helikon.events import AgentEvent

sys.path.insert(0, str(Path(__file__).parent))
from resume_agent import make_agent


def main(state_file: Path) -> None:
    agent = make_agent()  # every script: the model finds its place in the request
    if not state_file.exists():
        outcome = start(agent, "add", run_id="r")
        events = list(outcome.events)
    else:
        state = load_state(state_file.read_bytes())
        effect = pending(agent, state)
        live, result = trio.run(lambda: perform(agent, effect, run_id="r"))
        outcome = advance(agent, state, result)
        events = [*live, *outcome.events]
    state_file.write_bytes(dump_state(outcome.state))
    for event in events:
        sys.stdout.buffer.write(to_json(event, AgentEvent) + b"\n")
    if isinstance(outcome.effect, Terminate):
        sys.stdout.buffer.write(b"DONE\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
