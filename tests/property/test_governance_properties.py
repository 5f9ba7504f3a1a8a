"""Properties of the governance folds, checked with Hypothesis.

- deny rules win in every mode, whatever the other rules, policy and approvals;
- the mode order is real (a stricter mode never allows what a looser one
  denies), BYPASS never loosens, DONT_ASK is terminal;
- DONT_ASK never consults the policy (nor the approval handler), and only an
  allow rule permits under it;
- the hook fold: first deny wins, last replacement wins, injections in order,
  and folding a concatenation equals combining the folds (associativity);
- redaction is idempotent, leaves no known secret behind, and never lengthens
  a text with no secret-named key;
- the Bash splitter never drops a sub-command: every generated program is found.
"""

from __future__ import annotations

import shlex

from hypothesis import given
from hypothesis import strategies as st

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
    GuardAction,
    GuardRule,
    HookDecision,
    HookVerdict,
    InjectSystemMessage,
    PermissionDecision,
    PermissionSettings,
    PermissionStage,
    PermissionStep,
    PolicyNeeded,
    Replace,
    ReplaceInput,
    ReplaceOutput,
    after_approval,
    after_policy,
    fold_hooks,
    fold_permissions,
    known_secrets,
    redact,
    redact_key_values,
    resolve,
    resolve_without_handler,
    runs_any,
    strictness,
    tighten,
)
from helikon.model import ToolEffect

# -- strategies --------------------------------------------------------------------------

PROGRAMS = ("rm", "git", "curl", "ls", "make", "python3")
WRAPPERS = (
    "sudo ",
    "sudo -u root ",
    "timeout 5 ",
    "nice -n 5 ",
    "nohup ",
    "env A=1 ",
    "FOO=bar ",
    "command ",
    "stdbuf -oL ",
    "doas ",
    "time ",
    "exec ",
)
ARGS = (
    "-rf",
    "x",
    "'a && b'",
    '"c; d | e"',
    "/tmp",
    "--flag=1",
    "2>&1",
    "> /dev/null",
    ">> out.log",
    "&>/dev/null",
    "/",
    "~",
    ".git/config",
    "/etc/hosts",
    "src/a.py",
)
OPERATORS = ("&&", "||", ";", "|", "|&", "&", "\n")
PATHS = (
    ".env",
    "src/a.py",
    "src/../.env",
    ".git/config",
    "/etc/passwd",
    "dist/x.js",
    "README.md",
    "a/.ssh/k",
)
GLOBS = (".env", "src/**", "dist/**", "*.py", ".git/**", "*.md", "/etc", "a/")
TOOLS = ("Bash", "Read", "Write", "Edit", "WebFetch", "Deploy")


@st.composite
def sub_commands(draw: st.DrawFn) -> tuple[str, str]:
    """One sub-command and the program it runs."""
    program = draw(st.sampled_from(PROGRAMS))
    spelling = draw(
        st.sampled_from(
            (program, f"'{program}'", f'"{program}"', f"\\{program}", f"{program[0]}''{program[1:]}")
        )
    )
    wrappers = "".join(draw(st.lists(st.sampled_from(WRAPPERS), max_size=3)))
    args = draw(st.lists(st.sampled_from(ARGS), max_size=4))
    return " ".join([wrappers + spelling, *args]), program


@st.composite
def command_lines(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A compound command line and the programs of its sub-commands, in order."""
    parts = draw(st.lists(sub_commands(), min_size=1, max_size=5))
    line = parts[0][0]
    for text, _ in parts[1:]:
        operator = draw(st.sampled_from(OPERATORS))
        space = draw(st.sampled_from(("", " ")))
        line += f"{space}{operator}{space}{text}"
    return line, [program for _, program in parts]


def matchers_for(kind: type[DenyRule] | type[AllowRule]) -> st.SearchStrategy[DenyRule | AllowRule]:
    return st.one_of(
        st.sampled_from(TOOLS).map(kind.tool),
        st.sampled_from(PROGRAMS).map(kind.bash_command),
        st.sampled_from(GLOBS).map(kind.read),
        st.sampled_from(GLOBS).map(kind.edit),
    )


deny_rules = st.lists(matchers_for(DenyRule), max_size=3).map(
    lambda rules: tuple(r for r in rules if isinstance(r, DenyRule))
)
allow_rules = st.lists(matchers_for(AllowRule), max_size=3).map(
    lambda rules: tuple(r for r in rules if isinstance(r, AllowRule))
)
guard_rules = st.one_of(
    st.just(GuardRule.destructive_defaults()),
    st.just(()),
    st.tuples(
        st.sampled_from(PROGRAMS),
        st.sampled_from(GuardAction),
    ).map(lambda pa: (*GuardRule.destructive_defaults(), GuardRule.bash_command(pa[0], pa[1]))),
)
settings_strategy = st.builds(
    PermissionSettings,
    mode=st.sampled_from(PermissionMode),
    deny_rules=deny_rules,
    guard_rules=guard_rules,
    allow_rules=allow_rules,
    has_policy=st.booleans(),
)
policy_answers: st.SearchStrategy[PermissionDecision] = st.sampled_from(
    (Allow(), Deny("policy says no"), AskUser("ok?"), Replace({"sanitized": True}))
)
approvals: st.SearchStrategy[ApprovalOutcome | None] = st.sampled_from((Allow(), Deny("human says no"), None))


@st.composite
def calls(draw: st.DrawFn) -> tuple[str, ToolEffect, JsonValue]:
    tool = draw(st.sampled_from(TOOLS))
    effect = draw(st.sampled_from(ToolEffect))
    args: JsonValue
    if tool == "Bash":
        args = {"command": draw(command_lines())[0]}
    elif tool in ("Read", "Write", "Edit"):
        args = {"path": draw(st.sampled_from(PATHS))}
    else:
        args = {}
    return tool, effect, args


def drive(
    call: tuple[str, ToolEffect, JsonValue],
    settings: PermissionSettings,
    answer: PermissionDecision,
    approval: ApprovalOutcome | None,
) -> tuple[Decided, list[str]]:
    """Run the pipeline like an interpreter; the log records every request performed."""
    tool, effect, args = call
    log: list[str] = []
    step: PermissionStep = fold_permissions(tool, effect, args, settings)
    for _ in range(len(settings.guard_rules) + 3):
        match step:
            case Decided():
                return step, log
            case PolicyNeeded():
                assert settings.has_policy
                log.append("policy")
                step = after_policy(answer)
            case ApprovalNeeded():
                log.append("approval")
                if approval is None:
                    step = resolve_without_handler(step)
                else:
                    step = after_approval(tool, effect, args, settings, step, approval)
    raise AssertionError("the pipeline did not finish")


def allowed(decided: Decided) -> bool:
    return isinstance(decided.decision, Allow | Replace)


# -- permissions -------------------------------------------------------------------------


@given(calls(), settings_strategy, policy_answers, approvals)
def test_deny_rules_win_in_every_mode(
    call: tuple[str, ToolEffect, JsonValue],
    settings: PermissionSettings,
    answer: PermissionDecision,
    approval: ApprovalOutcome | None,
) -> None:
    tool, _, args = call
    matched = any(rule.matches(tool, args) for rule in settings.deny_rules)
    decided, log = drive(call, settings, answer, approval)
    if matched:
        assert decided.stage is PermissionStage.DENY_RULE and isinstance(decided.decision, Deny)
        assert log == []
    else:
        assert decided.stage is not PermissionStage.DENY_RULE


@given(calls(), settings_strategy, policy_answers, approvals)
def test_a_matching_deny_rule_beats_any_settings(
    call: tuple[str, ToolEffect, JsonValue],
    settings: PermissionSettings,
    answer: PermissionDecision,
    approval: ApprovalOutcome | None,
) -> None:
    settings = PermissionSettings(
        settings.mode,
        (*settings.deny_rules, DenyRule.tool(call[0])),
        settings.guard_rules,
        (*settings.allow_rules, AllowRule.tool(call[0])),
        settings.has_policy,
    )
    decided, _ = drive(call, settings, answer, approval)
    assert isinstance(decided.decision, Deny)


@given(
    calls(),
    settings_strategy,
    policy_answers,
    approvals,
    st.sampled_from(PermissionMode),
    st.sampled_from(PermissionMode),
)
def test_a_stricter_mode_never_allows_what_a_looser_one_denies(
    call: tuple[str, ToolEffect, JsonValue],
    settings: PermissionSettings,
    answer: PermissionDecision,
    approval: ApprovalOutcome | None,
    a: PermissionMode,
    b: PermissionMode,
) -> None:
    looser, stricter = sorted((a, b), key=strictness)
    at = {
        m: drive(
            call,
            PermissionSettings(
                m, settings.deny_rules, settings.guard_rules, settings.allow_rules, settings.has_policy
            ),
            answer,
            approval,
        )[0]
        for m in (looser, stricter)
    }
    assert not allowed(at[stricter]) or allowed(at[looser])


@given(st.lists(st.sampled_from(PermissionMode)))
def test_bypass_never_loosens(requests: list[PermissionMode]) -> None:
    mode = PermissionMode.BYPASS
    for requested in requests:
        nxt = tighten(mode, requested)
        assert strictness(nxt) >= strictness(mode)
        assert nxt in (PermissionMode.BYPASS, PermissionMode.DONT_ASK)
        if mode is PermissionMode.DONT_ASK:
            assert nxt is PermissionMode.DONT_ASK
        mode = nxt


@given(st.sampled_from(PermissionMode), st.sampled_from(PermissionMode))
def test_tighten_keeps_the_sticky_modes(current: PermissionMode, requested: PermissionMode) -> None:
    result = tighten(current, requested)
    assert result in (current, requested)
    if current in (PermissionMode.BYPASS, PermissionMode.DONT_ASK):
        assert strictness(result) >= strictness(current)


@given(calls(), settings_strategy, policy_answers, approvals)
def test_dont_ask_never_consults_the_policy(
    call: tuple[str, ToolEffect, JsonValue],
    settings: PermissionSettings,
    answer: PermissionDecision,
    approval: ApprovalOutcome | None,
) -> None:
    settings = PermissionSettings(
        PermissionMode.DONT_ASK,
        settings.deny_rules,
        settings.guard_rules,
        settings.allow_rules,
        has_policy=True,
    )
    decided, log = drive(call, settings, answer, approval)
    assert log == []  # neither the policy nor the approval handler
    if allowed(decided):
        tool, _, args = call
        assert decided.stage is PermissionStage.ALLOW_RULE
        assert any(rule.matches(tool, args) for rule in settings.allow_rules)


# -- hooks -------------------------------------------------------------------------------

hook_decisions: st.SearchStrategy[HookDecision] = st.one_of(
    st.just(Allow()),
    st.text(max_size=3).map(Deny),
    st.integers(0, 9).map(ReplaceInput),
    st.integers(0, 9).map(ReplaceOutput),
    st.text(max_size=3).map(InjectSystemMessage),
)


@given(st.lists(hook_decisions))
def test_the_hook_fold_matches_the_books_rule(decisions: list[HookDecision]) -> None:
    verdict = fold_hooks(decisions)
    first_deny = next((i for i, d in enumerate(decisions) if isinstance(d, Deny)), len(decisions))
    before = decisions[:first_deny]
    replacements = [d for d in before if isinstance(d, ReplaceInput | ReplaceOutput)]
    assert verdict.denial == (decisions[first_deny] if first_deny < len(decisions) else None)
    assert verdict.replacement == (replacements[-1] if replacements else None)
    assert verdict.injections == tuple(d.text for d in before if isinstance(d, InjectSystemMessage))


@given(st.lists(hook_decisions), st.lists(hook_decisions), st.lists(hook_decisions))
def test_the_hook_fold_is_associative(
    a: list[HookDecision], b: list[HookDecision], c: list[HookDecision]
) -> None:
    fa, fb, fc = fold_hooks(a), fold_hooks(b), fold_hooks(c)
    assert fold_hooks(a + b) == fa.then(fb)
    assert fa.then(fb).then(fc) == fa.then(fb.then(fc))
    assert fa.then(HookVerdict()) == fa == HookVerdict().then(fa)


# -- redaction ---------------------------------------------------------------------------

FRAGMENTS = (
    "A_TOKEN",
    "x_api_key",
    "DB_PASSWORD",
    "PATH",
    "export ",
    "=",
    ": ",
    " ",
    "\n",
    "\t",
    "abc",
    "sk-12345678",
    "***",
    "password",
    "hunter2hunter2",
    "_SECRET",
    ":",
    "=x",
)
texts = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), max_size=12).map("".join)
secret_lists = st.lists(
    st.one_of(
        st.sampled_from(("sk-12345678", "hunter2hunter2", "abc", "password", "12345678=x", "***12345")),
        st.text(min_size=6, max_size=12),
    ),
    max_size=4,
)


@given(texts, secret_lists)
def test_redaction_is_idempotent_and_leaves_no_known_secret(text: str, secrets: list[str]) -> None:
    once = redact(text, secrets)
    assert redact(once, secrets) == once
    assert not any(secret in once for secret in known_secrets(secrets))


@given(texts, secret_lists)
def test_redaction_never_lengthens_a_text_without_secret_keys(text: str, secrets: list[str]) -> None:
    if redact_key_values(text) != text:
        return  # a secret-named key: its value may be shorter than "***"
    out = redact(text, secrets)
    assert len(out) <= len(text)
    if not any(secret in text for secret in known_secrets(secrets)):
        assert out == text


# -- the Bash splitter -------------------------------------------------------------------


@given(command_lines())
def test_the_splitter_never_drops_a_sub_command(line_and_programs: tuple[str, list[str]]) -> None:
    line, programs = line_and_programs
    assert [c.program for c in resolve(line).commands] == programs
    assert all(runs_any(line, {p}) for p in programs)


@given(command_lines(), st.sampled_from(("bash -c ", "sh -c ", "sudo bash -lc ")))
def test_shell_re_entry_keeps_every_sub_command(line_and_programs: tuple[str, list[str]], shell: str) -> None:
    line, programs = line_and_programs
    nested = shell + shlex.quote(line)
    found = [c.program for c in resolve(nested).commands]
    assert found[0] == "bash" if "bash" in shell else found[0] == "sh"
    assert found[1:] == programs
