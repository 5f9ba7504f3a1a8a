"""Hook events, decisions and the fold."""

from __future__ import annotations

from helikon import codec
from helikon.governance import (
    Allow,
    Deny,
    HookDecision,
    HookEvent,
    HookVerdict,
    InjectSystemMessage,
    OnHandoff,
    OnRunComplete,
    OnRunStart,
    OnSubagentStop,
    OnTurnStart,
    PostToolUse,
    PreToolUse,
    ReplaceInput,
    ReplaceOutput,
    fire_order,
    fold_hooks,
    replaced_value,
)


def test_no_hooks_or_only_allows_change_nothing() -> None:
    assert fold_hooks([]) == HookVerdict()
    assert fold_hooks([Allow(), Allow()]) == HookVerdict()
    assert not HookVerdict().denied


def test_first_deny_short_circuits() -> None:
    verdict = fold_hooks([Deny("no"), ReplaceInput(1), Deny("later")])
    assert verdict.denial == Deny("no")
    assert verdict.replacement is None
    assert verdict.denied


def test_decisions_before_the_deny_are_kept_and_after_it_ignored() -> None:
    verdict = fold_hooks([InjectSystemMessage("a"), ReplaceInput(1), Deny("no"), InjectSystemMessage("b")])
    assert verdict == HookVerdict(Deny("no"), ReplaceInput(1), ("a",))


def test_last_replacement_wins_and_injections_accumulate_in_fire_order() -> None:
    verdict = fold_hooks(
        [ReplaceInput({"n": 1}), InjectSystemMessage("a"), ReplaceInput({"n": 2}), InjectSystemMessage("b")]
    )
    assert verdict == HookVerdict(None, ReplaceInput({"n": 2}), ("a", "b"))
    assert replaced_value(verdict, {"n": 0}) == {"n": 2}


def test_replace_input_and_output_share_one_slot() -> None:
    assert fold_hooks([ReplaceInput(1), ReplaceOutput("x")]).replacement == ReplaceOutput("x")
    assert replaced_value(fold_hooks([ReplaceOutput("[scrubbed]")]), "secret") == "[scrubbed]"
    assert replaced_value(fold_hooks([ReplaceOutput(None)]), "secret") is None  # null is a real replacement
    assert replaced_value(HookVerdict(), "kept") == "kept"


def test_agent_hooks_fire_before_run_hooks_and_the_fold_composes() -> None:
    agent: list[HookDecision] = [ReplaceInput("agent"), InjectSystemMessage("from agent")]
    run: list[HookDecision] = [InjectSystemMessage("from run")]
    whole = fold_hooks(fire_order(agent, run))
    assert whole == fold_hooks(agent).then(fold_hooks(run))
    assert whole.injections == ("from agent", "from run")
    assert fire_order(["a1", "a2"], ["r1"]) == ("a1", "a2", "r1")


def test_an_agent_deny_means_run_hooks_do_not_count() -> None:
    verdict = fold_hooks([Deny("agent says no")]).then(fold_hooks([InjectSystemMessage("run")]))
    assert verdict == HookVerdict(Deny("agent says no"))


def test_events_and_verdicts_are_data() -> None:
    events: list[HookEvent] = [
        OnRunStart(),
        OnTurnStart(3),
        PreToolUse("Bash", {"command": "ls"}),
        PostToolUse("Bash", {"command": "ls"}, {"stdout": "a\n"}),
        OnHandoff("triage", "billing"),
        OnRunComplete(),
        OnSubagentStop("researcher"),
    ]
    for event in events:
        assert codec.from_json(codec.to_json(event, HookEvent), HookEvent) == event
    verdict = HookVerdict(Deny("x"), ReplaceOutput([1, 2]), ("a",))
    assert codec.structure(codec.unstructure(verdict), HookVerdict) == verdict
