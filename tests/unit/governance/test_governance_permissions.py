"""The permission pipeline: deny > guard > allow > mode > policy > AskUser, the
modes, approvals, the headless default, tighten-only modes, and the book's
examples. ``drive`` plays the interpreter: it performs the policy and approval
requests with plain functions."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from helikon import codec
from helikon._json import JsonValue
from helikon.config import PermissionMode
from helikon.governance import (
    Allow,
    AllowRule,
    ApprovalNeeded,
    ApprovalOutcome,
    AskUser,
    Decided,
    Deny,
    DenyRule,
    FromGuard,
    FromPolicy,
    GuardAction,
    GuardRule,
    PermissionDecision,
    PermissionSettings,
    PermissionStage,
    PermissionStep,
    PolicyNeeded,
    Replace,
    after_approval,
    after_policy,
    fold_permissions,
    mode_change_allowed,
    resolve_without_handler,
    strictness,
    tighten,
)
from helikon.model import ToolEffect

Policy = Callable[[str, JsonValue], PermissionDecision]
Approver = Callable[[str, str, JsonValue], ApprovalOutcome]

RO, WRITE, SIDE = ToolEffect.READ_ONLY, ToolEffect.WRITE, ToolEffect.SIDE_EFFECT


def drive(
    tool: str,
    effect: ToolEffect,
    args: JsonValue,
    settings: PermissionSettings,
    policy: Policy | None = None,
    approve: Approver | None = None,
) -> tuple[Decided, list[str]]:
    """Run the pipeline to its decision, as an interpreter would; log the requests."""
    settings = PermissionSettings(
        settings.mode,
        settings.deny_rules,
        settings.guard_rules,
        settings.allow_rules,
        has_policy=policy is not None,
        arguments=settings.arguments,
    )
    log: list[str] = []
    step: PermissionStep = fold_permissions(tool, effect, args, settings)
    while True:
        match step:
            case Decided():
                return step, log
            case PolicyNeeded():
                assert policy is not None
                log.append("policy")
                step = after_policy(policy(tool, args))
            case ApprovalNeeded(prompt):
                log.append(f"approval: {prompt}")
                if approve is None:
                    step = resolve_without_handler(step)
                else:
                    step = after_approval(tool, effect, args, settings, step, approve(tool, prompt, args))


def allow_all(_tool: str, _args: JsonValue) -> PermissionDecision:
    return Allow()


def deny_all(_tool: str, _args: JsonValue) -> PermissionDecision:
    return Deny("policy says no")


def ask_on_network(tool: str, _args: JsonValue) -> PermissionDecision:
    """The book's AskOnNetwork policy."""
    return AskUser(f"Allow {tool}?") if tool == "WebFetch" else Allow()


def auto_approve(_tool: str, _prompt: str, _args: JsonValue) -> ApprovalOutcome:
    """The book's AutoApprove handler."""
    return Allow()


def refuse(_tool: str, _prompt: str, _args: JsonValue) -> ApprovalOutcome:
    return Deny("the human said no")


def bash(command: str) -> JsonValue:
    return {"command": command}


# -- the order ---------------------------------------------------------------------------


def test_deny_rules_beat_everything_even_bypass_and_allow_rules() -> None:
    settings = PermissionSettings(
        PermissionMode.BYPASS, deny_rules=(DenyRule.tool("Bash"),), allow_rules=(AllowRule.tool("Bash"),)
    )
    decided, log = drive("Bash", SIDE, bash("ls"), settings, policy=allow_all, approve=auto_approve)
    assert decided == Decided(Deny("denied by deny rule: tool 'Bash'"), PermissionStage.DENY_RULE)
    assert log == []


def test_guard_rules_run_before_allow_rules_and_mode() -> None:
    settings = PermissionSettings(PermissionMode.BYPASS, allow_rules=(AllowRule.bash_command("rm"),))
    decided, log = drive("Bash", SIDE, bash("rm -rf /"), settings)
    assert decided.decision == Deny(
        "needs approval and no approval handler is installed: destructive command: recursive remove of / or ~"
    )
    assert log == ["approval: destructive command: recursive remove of / or ~"]


def test_allow_rules_beat_the_mode_and_skip_the_policy() -> None:
    settings = PermissionSettings(PermissionMode.PLAN, allow_rules=(AllowRule.edit("src/**"),))
    decided, log = drive("Write", WRITE, {"path": "src/a.py"}, settings, policy=deny_all)
    assert decided == Decided(Allow(), PermissionStage.ALLOW_RULE)
    assert log == []


def test_the_mode_decides_before_the_policy() -> None:
    decided, log = drive("Deploy", SIDE, {}, PermissionSettings(PermissionMode.PLAN), policy=allow_all)
    assert decided.stage is PermissionStage.MODE and isinstance(decided.decision, Deny)
    assert log == []


def test_the_policy_decides_last_and_its_ask_goes_to_the_approval_handler() -> None:
    settings = PermissionSettings()
    assert drive("WebFetch", SIDE, {}, settings, ask_on_network, auto_approve) == (
        Decided(Allow(), PermissionStage.APPROVAL),
        ["policy", "approval: Allow WebFetch?"],
    )
    assert drive("WebFetch", SIDE, {}, settings, ask_on_network, refuse)[0] == Decided(
        Deny("the human said no"), PermissionStage.APPROVAL
    )
    assert drive("Read", RO, {}, settings, ask_on_network, refuse)[0] == Decided(
        Allow(), PermissionStage.POLICY
    )


def test_with_no_approval_handler_ask_user_resolves_to_deny() -> None:
    decided, _ = drive("WebFetch", SIDE, {}, PermissionSettings(), ask_on_network, None)
    assert decided == Decided(
        Deny("needs approval and no approval handler is installed: Allow WebFetch?"), PermissionStage.APPROVAL
    )


def test_a_policy_replace_is_final() -> None:
    def sanitize(_tool: str, _args: JsonValue) -> PermissionDecision:
        return Replace({"url": "https://example.org"})

    decided, _ = drive("WebFetch", SIDE, {"url": "http://evil"}, PermissionSettings(), sanitize)
    assert decided == Decided(Replace({"url": "https://example.org"}), PermissionStage.POLICY)


# -- the modes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "effect", "expected"),
    [
        # DEFAULT: permissive with no policy (the book), else the policy decides
        (PermissionMode.DEFAULT, SIDE, Decided(Allow(), PermissionStage.MODE)),
        (PermissionMode.DEFAULT, WRITE, Decided(Allow(), PermissionStage.MODE)),
        # ACCEPT_EDITS: WRITE allowed by the mode; others fall through
        (PermissionMode.ACCEPT_EDITS, WRITE, Decided(Allow(), PermissionStage.MODE)),
        (PermissionMode.ACCEPT_EDITS, SIDE, Decided(Allow(), PermissionStage.MODE)),
        # PLAN: anything not READ_ONLY denied
        (PermissionMode.PLAN, RO, Decided(Allow(), PermissionStage.MODE)),
        (
            PermissionMode.PLAN,
            WRITE,
            Decided(Deny("plan mode allows only read-only tools; 'T' is write"), PermissionStage.MODE),
        ),
        # BYPASS: allow all
        (PermissionMode.BYPASS, SIDE, Decided(Allow(), PermissionStage.MODE)),
        # DONT_ASK: deny by default
        (
            PermissionMode.DONT_ASK,
            RO,
            Decided(Deny("dont-ask mode: no allow rule permits 'T'"), PermissionStage.MODE),
        ),
    ],
)
def test_modes_without_a_policy(mode: PermissionMode, effect: ToolEffect, expected: Decided) -> None:
    assert drive("T", effect, {}, PermissionSettings(mode)) == (expected, [])


@pytest.mark.parametrize(
    ("mode", "effect", "asks_policy"),
    [
        (PermissionMode.DEFAULT, RO, True),
        (PermissionMode.DEFAULT, WRITE, True),
        (PermissionMode.ACCEPT_EDITS, WRITE, False),
        (PermissionMode.ACCEPT_EDITS, SIDE, True),
        (PermissionMode.PLAN, RO, True),
        (PermissionMode.PLAN, SIDE, False),
        (PermissionMode.BYPASS, SIDE, False),
        (PermissionMode.DONT_ASK, RO, False),
    ],
)
def test_which_modes_consult_the_policy(mode: PermissionMode, effect: ToolEffect, asks_policy: bool) -> None:
    _, log = drive("T", effect, {}, PermissionSettings(mode), policy=deny_all)
    assert (log == ["policy"]) is asks_policy


def test_dont_ask_permits_only_through_allow_rules_and_never_asks() -> None:
    settings = PermissionSettings(
        PermissionMode.DONT_ASK, allow_rules=(AllowRule.tool("WebSearch"), AllowRule.edit("src/**"))
    )
    assert drive("WebSearch", SIDE, {}, settings, allow_all, auto_approve) == (
        Decided(Allow(), PermissionStage.ALLOW_RULE),
        [],
    )
    assert (
        drive("Write", WRITE, {"path": "src/x.py"}, settings, allow_all, auto_approve)[0].decision == Allow()
    )
    assert isinstance(
        drive("Write", WRITE, {"path": "x.py"}, settings, allow_all, auto_approve)[0].decision, Deny
    )
    # a guard's ask is a deny at once: nobody is asked
    decided, log = drive("Bash", SIDE, bash("rm -rf ~"), settings, allow_all, auto_approve)
    assert decided.stage is PermissionStage.GUARD_RULE and isinstance(decided.decision, Deny)
    assert log == []


# -- guards and approvals ----------------------------------------------------------------


def test_destructive_guard_denies_headless_and_asks_with_a_handler() -> None:
    settings = PermissionSettings()
    headless, _ = drive("Bash", SIDE, bash("sudo rm -rf /"), settings)
    assert isinstance(headless.decision, Deny)
    approved, log = drive("Bash", SIDE, bash("sudo rm -rf /"), settings, approve=auto_approve)
    assert approved.decision == Allow()
    assert log == ["approval: destructive command: recursive remove of / or ~"]


def test_an_approval_clears_one_guard_and_the_pipeline_goes_on() -> None:
    settings = PermissionSettings()
    command = bash("rm -rf / ; echo x > /etc/passwd ; echo y > .git/config")
    decided, log = drive("Bash", SIDE, command, settings, approve=auto_approve)
    assert decided == Decided(Allow(), PermissionStage.MODE)
    assert [entry.split(":")[0] for entry in log] == ["approval"] * 3
    # under PLAN the approval does not beat the mode
    decided, _ = drive(
        "Bash", SIDE, bash("rm -rf /"), PermissionSettings(PermissionMode.PLAN), approve=auto_approve
    )
    assert decided.stage is PermissionStage.MODE and isinstance(decided.decision, Deny)


def test_a_deny_guard_refuses_without_asking() -> None:
    settings = PermissionSettings(
        guard_rules=(GuardRule.bash_command("curl", GuardAction.DENY, "no network"),)
    )
    assert drive("Bash", SIDE, bash("curl x | sh"), settings, approve=auto_approve) == (
        Decided(Deny("no network"), PermissionStage.GUARD_RULE),
        [],
    )


def test_without_default_guards_nothing_is_guarded() -> None:
    decided, log = drive("Bash", SIDE, bash("rm -rf /"), PermissionSettings(guard_rules=()))
    assert decided == Decided(Allow(), PermissionStage.MODE) and log == []


def test_git_writes_are_refused_even_under_accept_edits_with_an_allow_rule() -> None:
    settings = PermissionSettings(PermissionMode.ACCEPT_EDITS, allow_rules=(AllowRule.edit(".git/**"),))
    decided, log = drive("Write", WRITE, {"path": ".git/config", "content": "x"}, settings)
    assert isinstance(decided.decision, Deny) and log[0].startswith("approval: write to a protected VCS")


def test_dev_null_is_not_blocked() -> None:
    assert drive("Bash", SIDE, bash("make > /dev/null 2>&1"), PermissionSettings()) == (
        Decided(Allow(), PermissionStage.MODE),
        [],
    )


def test_steps_name_the_guard_that_asked() -> None:
    step = fold_permissions("Write", WRITE, {"path": "/etc/hosts"}, PermissionSettings())
    assert step == ApprovalNeeded(
        "write to a protected system path (/, /etc, /usr, /bin, /sbin, /lib, /boot, /proc, /dev, ...)",
        FromGuard(1),
    )
    assert after_policy(AskUser("ok?")) == ApprovalNeeded("ok?", FromPolicy())


# -- the book's example ------------------------------------------------------------------


def test_the_books_permission_example() -> None:
    # ephemeral(()).with_permission_mode(AcceptEdits).with_deny_rules([tool("Bash")])
    #   .with_permission_policy(AskOnNetwork).with_approval_handler(AutoApprove)
    settings = PermissionSettings(PermissionMode.ACCEPT_EDITS, deny_rules=(DenyRule.tool("Bash"),))

    def run(tool: str, effect: ToolEffect) -> Decided:
        return drive(tool, effect, {}, settings, ask_on_network, auto_approve)[0]

    assert isinstance(run("Bash", SIDE).decision, Deny)
    assert run("Edit", WRITE) == Decided(Allow(), PermissionStage.MODE)
    assert run("WebFetch", SIDE) == Decided(Allow(), PermissionStage.APPROVAL)
    assert run("Search", RO) == Decided(Allow(), PermissionStage.POLICY)


# -- tighten-only modes ------------------------------------------------------------------


@pytest.mark.parametrize("requested", list(PermissionMode))
def test_bypass_only_tightens_to_dont_ask(requested: PermissionMode) -> None:
    expected = PermissionMode.DONT_ASK if requested is PermissionMode.DONT_ASK else PermissionMode.BYPASS
    assert tighten(PermissionMode.BYPASS, requested) is expected


@pytest.mark.parametrize("requested", list(PermissionMode))
def test_dont_ask_is_terminal(requested: PermissionMode) -> None:
    assert tighten(PermissionMode.DONT_ASK, requested) is PermissionMode.DONT_ASK
    assert mode_change_allowed(PermissionMode.DONT_ASK, requested) is (requested is PermissionMode.DONT_ASK)


def test_the_open_modes_change_freely() -> None:
    assert tighten(PermissionMode.DEFAULT, PermissionMode.ACCEPT_EDITS) is PermissionMode.ACCEPT_EDITS
    assert tighten(PermissionMode.PLAN, PermissionMode.BYPASS) is PermissionMode.BYPASS
    assert [m.name for m in sorted(PermissionMode, key=strictness)] == [
        "BYPASS",
        "ACCEPT_EDITS",
        "DEFAULT",
        "PLAN",
        "DONT_ASK",
    ]


# -- data --------------------------------------------------------------------------------


def test_settings_and_steps_round_trip_through_the_codec() -> None:
    settings = PermissionSettings(
        PermissionMode.DONT_ASK,
        deny_rules=(DenyRule.bash_command("rm"), DenyRule.read(".env")),
        allow_rules=(AllowRule.edit("src/**"),),
        has_policy=True,
    )
    assert codec.structure(codec.unstructure(settings), PermissionSettings) == settings
    steps: list[PermissionStep] = [
        PolicyNeeded(),
        ApprovalNeeded("ok?", FromGuard(2)),
        Decided(Replace({"a": [1, None]}), PermissionStage.POLICY),
    ]
    for step in steps:
        assert codec.from_json(codec.to_json(step, PermissionStep), PermissionStep) == step
