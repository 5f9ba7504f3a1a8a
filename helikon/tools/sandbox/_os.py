""":class:`OsSandboxBackend`: commands confined by the Linux kernel.

The launcher (``_launch.py``) applies, in the child and before ``exec``:

- **namespaces** (``_isolate.py``), where the kernel allows them (probed
  once): a PID namespace whose first process is the command, so every
  process it starts dies with it or at the timeout, with a fresh ``/proc``
  listing only those; an empty IPC namespace; a network namespace holding
  only loopback, plus, with network proxied, a relay to the egress proxy on
  the proxy's own address and port; every mount read-only but the root,
  the private temporary directory and ``write_paths`` (no metadata change
  outside them, even of the command's own files); not root, a user
  namespace makes these possible;
- **an unprivileged uid**: when this process is root, the command runs as
  ``user``/``group`` (65534, ``nobody``, by default) and sees the sandbox
  root and the write paths, through idmapped mounts, as its own;
- **Landlock**: read and write beneath the sandbox root and a private
  temporary directory (``HOME`` and ``TMPDIR``), read and execute the system
  paths programs need (:data:`DEFAULT_READ_PATHS`), nothing else; with
  network allowed, TCP ``connect`` only to the egress proxy's port and no
  ``bind``;
- **seccomp**: no ``socket()`` (or, with network allowed, TCP only), no
  ``listen``, no SysV IPC, no ``chown`` or extended attribute changes, no
  kernel administration, no namespaces, no ``setsid`` (``_seccomp.py``);
- **no privileges**: ``no_new_privs``, and every capability dropped when
  this process is root;
- the same ``setrlimit`` caps, timeout and session kill as the host backend.

Why a small ctypes layer rather than ``bubblewrap``: Landlock and seccomp are
unprivileged and need no namespaces, so the backend works where user
namespaces are disabled (many containers and CI runners, Ubuntu's AppArmor
default); it is one mechanism the kernel itself enforces on every
descendant; and it needs no binary on the host. It fails closed: building
one raises :class:`OsSandboxError` naming what the kernel lacks, after a
trial run has shown that the confinement really holds.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Final, final

import attrs

from helikon.errors import HelikonError, ToolError
from helikon.tools.sandbox import _landlock, _seccomp
from helikon.tools.sandbox._backend import ExecResult, Isolation, SandboxGuarantees
from helikon.tools.sandbox._egress import EgressPolicy, EgressProxy
from helikon.tools.sandbox._host import (
    CommandSettings,
    strings,
)
from helikon.tools.sandbox._launch import FAILED, MARKER
from helikon.tools.sandbox._process import LAUNCHER, execute, scrub_env

#: Read-and-execute paths a command gets besides the root (missing ones are skipped).
DEFAULT_READ_PATHS: Final = (
    "/bin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/sbin",
    "/usr",
    "/etc/alternatives",
    "/etc/bash.bashrc",
    "/etc/ca-certificates",
    "/etc/gai.conf",
    "/etc/gitconfig",
    "/etc/group",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/inputrc",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/locale.alias",
    "/etc/localtime",
    "/etc/magic",
    "/etc/mime.types",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/pki",
    "/etc/profile",
    "/etc/python3",
    "/etc/resolv.conf",
    "/etc/ssl",
    "/etc/terminfo",
    "/etc/timezone",
    "/proc",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/zero",
)
#: Paths a command may also write (device files only: nothing persists).
DEFAULT_WRITE_PATHS: Final = ("/dev/null",)
#: ``PATH`` inside the sandbox (the host's may name directories it cannot read).
SANDBOX_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

LABEL: Final = "os-sandbox (landlock+seccomp)"
LABEL_PROXIED: Final = "os-sandbox (landlock+seccomp, egress through a proxy)"
#: The uid and gid a root process's commands run as by default (``nobody``).
NOBODY: Final = 65534

_ALL: Final = -1  # "every right the ABI knows": masked by the launcher's Landlock layer
_READ: Final = _landlock.READ_RIGHTS
_WRITE_DEV: Final = _landlock.READ_FILE | _landlock.WRITE_FILE | _landlock.IOCTL_DEV
# A check that the confinement holds: "/" must be unlistable, seccomp must be on, sockets must fail.
_TRIAL: Final = (
    "ls / >/dev/null 2>&1 && exit 3; "
    "grep -q '^Seccomp:[[:space:]]*2' /proc/self/status || exit 4; "
    "grep -q '^NoNewPrivs:[[:space:]]*1' /proc/self/status || exit 5; exit 0"
)


class OsSandboxError(HelikonError):
    """The OS cannot enforce the sandbox; raised when building the backend (fail closed)."""


@functools.cache
def _kernel() -> tuple[str, int]:
    """``(arch, landlock ABI)``, or raise :class:`OsSandboxError` naming what is missing."""
    if sys.platform != "linux":
        raise OsSandboxError(f"OsSandboxBackend needs Linux (Landlock and seccomp); this is {sys.platform}")
    arch = _seccomp.machine()
    if arch is None:
        raise OsSandboxError(f"no seccomp filter for {os.uname().machine} (x86_64 and aarch64 are supported)")
    try:
        abi = _landlock.abi_version()
    except OSError as exc:
        raise OsSandboxError(_landlock.describe_missing(exc)) from None
    if not _seccomp.available():
        raise OsSandboxError("the kernel lacks seccomp filters (CONFIG_SECCOMP_FILTER)")
    return arch, abi


def _confine_plan(
    arch: str,
    abi: int,
    paths: list[tuple[str, int]],
    proxy: tuple[str, int] | None,
    *,
    namespaces: bool,
    user: tuple[int, int] | None,
    read_only_outside: bool = False,
    writable: list[tuple[str, bool]] | None = None,
) -> dict[str, Any]:
    return {
        "arch": arch,
        "abi": abi,
        "network": "deny" if proxy is None else "proxied",
        "paths": paths,
        "connect_ports": None if proxy is None else [proxy[1]],
        "isolate": {
            "namespaces": namespaces,
            "proxy": None if proxy is None else list(proxy),
            "user": None if user is None else user[0],
            "group": None if user is None else user[1],
            "read_only_outside": namespaces and read_only_outside,
            "writable": [[path, mapped] for path, mapped in writable or []],
        },
    }


# The isolation check: PID 1 of its own namespace, a /proc listing only itself, (as root) not root,
# and a network namespace with one interface (loopback).
_TRIAL_ISOLATION: Final = (
    '[ "$$" = 1 ] || exit 6; [ "$(ls -d /proc/[0-9]* | wc -l)" -le 5 ] || exit 7; '
    '[ "$(id -u)" = "$HELIKON_TRIAL_UID" ] || exit 8; '
    '[ "$(grep -c : /proc/net/dev)" = 1 ] || exit 9; exit 0'
)
# And the read-only mounts: a file outside the root that the command's own uid owns keeps its
# time, while the root stays writable.
_TRIAL_READ_ONLY: Final = (
    'touch -c -d @1 "$HELIKON_TRIAL_OUTSIDE" 2>/dev/null && exit 10; : > ./written 2>/dev/null || exit 11; '
) + _TRIAL_ISOLATION
_OLD: Final = 1_000_000_000


def _run_trial(
    arch: str,
    abi: int,
    script: str,
    *,
    namespaces: bool,
    user: tuple[int, int] | None,
    read_only_outside: bool = False,
) -> None:
    work = tempfile.mkdtemp(prefix="helikon-sbx-trial-")
    outside = tempfile.mkdtemp(prefix="helikon-sbx-trial-outside-")
    sentinel = os.path.join(outside, "sentinel")
    fd = os.open(work, os.O_RDONLY | os.O_DIRECTORY)
    try:
        uid = os.geteuid() if user is None else user[0]
        with open(sentinel, "w"):
            pass
        os.utime(sentinel, (_OLD, _OLD))
        os.chmod(outside, 0o755)
        if user is not None:
            os.chown(sentinel, *user)
        paths = [(".", _ALL), *((p, _READ) for p in DEFAULT_READ_PATHS), ("/dev/null", _WRITE_DEV)]
        confine = _confine_plan(
            arch, abi, paths, None, namespaces=namespaces, user=user, read_only_outside=read_only_outside
        )
        plan = {"root_fd": fd, "limits": {}, "confine": confine}
        argv = [sys.executable, "-I", "-S", "-B", LAUNCHER, json.dumps(plan), "--", "/bin/sh", "-c", script]
        env = {"PATH": SANDBOX_PATH, "HELIKON_TRIAL_UID": str(uid), "HELIKON_TRIAL_OUTSIDE": sentinel}
        ran = subprocess.run(argv, capture_output=True, text=True, pass_fds=(fd,), timeout=60, env=env)
        moved = os.stat(sentinel).st_mtime_ns != _OLD * 10**9
    except (OSError, subprocess.SubprocessError) as exc:
        raise OsSandboxError(f"the trial run of the sandbox failed: {exc}") from None
    finally:
        os.close(fd)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(outside, ignore_errors=True)
    if ran.returncode == FAILED and ran.stderr.startswith(MARKER):
        raise OsSandboxError(f"the kernel refused the sandbox: {ran.stderr[len(MARKER) :].strip()}")
    if ran.returncode == 0 and read_only_outside and moved:
        raise OsSandboxError("the sandbox does not hold on this system (a time outside the root changed)")
    if ran.returncode != 0:
        what = {
            3: "Landlock did not confine the filesystem",
            4: "seccomp was not applied",
            6: "the command was not alone in a PID namespace",
            7: "/proc showed other processes",
            8: "the command did not run as the expected uid",
            9: "the network namespace held more than loopback",
            10: "a time outside the root changed",
            11: "the root was not writable",
        }
        reason = what.get(ran.returncode, f"exit status {ran.returncode}: {ran.stderr.strip()}")
        raise OsSandboxError(f"the sandbox does not hold on this system ({reason})")


@functools.cache
def _trial(arch: str, abi: int) -> None:
    """Run a confined ``sh`` once and check the Landlock and seccomp confinement holds (cached)."""
    _run_trial(arch, abi, _TRIAL, namespaces=False, user=None)


def _blocking_ancestor(root: str, uid: int, gid: int) -> str | None:
    """The first ancestor of ``root`` that ``uid``/``gid`` may not search (by its mode bits), or ``None``."""
    path = os.path.dirname(os.path.abspath(root))
    chain = []
    while True:
        chain.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for directory in reversed(chain):
        try:
            info = os.stat(directory)
        except OSError:
            return directory
        bit = 0o100 if info.st_uid == uid else 0o010 if info.st_gid == gid else 0o001
        if not info.st_mode & bit:
            return directory
    return None


@functools.cache
def _isolation(arch: str, abi: int, user: tuple[int, int] | None) -> tuple[bool, bool, str]:
    """Whether namespaces (and, as root, the uid drop to ``user``) hold here, and whether every
    mount outside the root can be made read-only: ``(namespaces, read-only, why not)``.

    Probed, not assumed: a confined ``sh`` must find itself PID 1 with a
    private ``/proc``, running as the expected uid, unable to change the time
    of a file outside the root that it owns, and able to write its root.
    Without the read-only mounts (a kernel before 5.12 has no
    ``mount_setattr``) the namespaces are tried alone.
    """
    try:
        _run_trial(arch, abi, _TRIAL_READ_ONLY, namespaces=True, user=user, read_only_outside=True)
    except OsSandboxError as exc:
        first = str(exc)
    else:
        return True, True, ""
    try:
        _run_trial(arch, abi, _TRIAL_ISOLATION, namespaces=True, user=user)
    except OsSandboxError as exc:
        return False, False, str(exc)
    return True, False, f"mounts outside the root cannot be made read-only: {first}"


@final
@attrs.frozen
class OsSandboxBackend(CommandSettings):
    """Run a command with ``bash -c`` under Landlock and seccomp, in the sandbox root.

    Network is denied; ``allow_network(True)`` returns a copy whose commands
    reach the network only through an :class:`~helikon.tools.EgressProxy`.

    Args:
        sandbox: the root the command may read and write beneath.
        timeout, env_allowlist, env, output_limit, limits, shell: as
            :class:`~helikon.tools.HostBackend` (``PATH`` defaults to
            :data:`SANDBOX_PATH`; set it with ``env`` to change it).
        read_paths: read-and-execute paths besides the root.
        write_paths: extra paths the command may write (beyond the root and
            its private temporary directory).

    Raises:
        OsSandboxError: this system cannot enforce the sandbox.
    """

    read_paths: tuple[str, ...] = attrs.field(default=DEFAULT_READ_PATHS, converter=strings, kw_only=True)
    write_paths: tuple[str, ...] = attrs.field(default=(), converter=strings, kw_only=True)
    #: When this process is root: the uid and gid commands run as (``None``: stay root, which
    #: leaves every root-owned file's metadata open to the command; see ``docs/tools.md``).
    user: int | None = attrs.field(default=NOBODY, kw_only=True)
    group: int | None = attrs.field(default=NOBODY, kw_only=True)
    #: The proxy network goes through; ``None``: no network.
    proxy: EgressProxy | None = attrs.field(default=None, kw_only=True, eq=False)
    _owns_proxy: bool = attrs.field(default=False, kw_only=True, eq=False, repr=False)
    _arch: str = attrs.field(init=False, eq=False, repr=False)
    _abi: int = attrs.field(init=False, eq=False, repr=False)
    _namespaces: bool = attrs.field(init=False, eq=False, repr=False)
    _read_only: bool = attrs.field(init=False, eq=False, repr=False)
    _why_not: str = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if (self.user is None) != (self.group is None):
            raise ValueError("give both user and group, or neither")
        arch, abi = _kernel()
        if self.proxy is not None and abi < 4:
            raise OsSandboxError(
                f"Landlock ABI {abi} cannot restrict TCP ports (ABI 4, Linux 6.7, is needed to force "
                "the network through the egress proxy)"
            )
        _trial(arch, abi)
        namespaces, read_only, why_not = _isolation(arch, abi, self._run_as())
        if namespaces and os.geteuid() == 0 and self.user is not None and self.group is not None:
            blocking = _blocking_ancestor(self.sandbox.root, self.user, self.group)
            if blocking is not None:
                why_not = (
                    f"commands run as root without capabilities: uid {self.user} cannot search {blocking}, "
                    "an ancestor of the sandbox root (make it searchable, e.g. mode 0711, to run them "
                    "unprivileged)"
                )
        object.__setattr__(self, "_arch", arch)
        object.__setattr__(self, "_abi", abi)
        object.__setattr__(self, "_namespaces", namespaces)
        object.__setattr__(self, "_read_only", read_only)
        object.__setattr__(self, "_why_not", why_not)

    def _run_as(self) -> tuple[int, int] | None:
        """The uid and gid to drop to: only when root, and only with the namespaces (idmapped root)."""
        if os.geteuid() != 0 or self.user is None or self.group is None:
            return None
        if _blocking_ancestor(self.sandbox.root, self.user, self.group) is not None:
            return None
        return self.user, self.group

    @property
    def isolation_unavailable(self) -> str:
        """Why the namespaces, the uid drop or the read-only mounts outside the root do not hold here
        (``""`` when they all do)."""
        return self._why_not

    def allow_network(
        self, enabled: bool = True, *, policy: EgressPolicy | None = None, proxy: EgressProxy | None = None
    ) -> OsSandboxBackend:
        """A copy whose commands may (or may not) use the network, through an egress proxy.

        Args:
            enabled: ``False`` returns a copy with network denied again.
            policy: the domain policy of a proxy started for this backend
                (default: allow every public host). Close it with :meth:`close`.
            proxy: a running proxy to use instead (its owner closes it).

        Raises:
            OsSandboxError: the proxy cannot start, or the kernel cannot force
                traffic through it (Landlock ABI < 4).
        """
        if not enabled:
            return attrs.evolve(self, proxy=None, owns_proxy=False)
        if proxy is not None and policy is not None:
            raise ValueError("give a policy or a proxy, not both")
        owns = proxy is None
        if proxy is None:
            try:
                proxy = EgressProxy(policy or EgressPolicy.allow_all()).start()
            except OSError as exc:
                raise OsSandboxError(f"the egress proxy could not start: {exc}") from None
        elif not proxy.running:
            raise OsSandboxError("the egress proxy is not running (start it first)")
        try:
            return attrs.evolve(self, proxy=proxy, owns_proxy=owns)
        except BaseException:
            if owns:
                proxy.close()
            raise

    def close(self) -> None:
        """Stop the egress proxy this backend started, if any."""
        if self._owns_proxy and self.proxy is not None:
            self.proxy.close()

    def __enter__(self) -> OsSandboxBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def confinement(self) -> tuple[str, ...]:
        """What holds for this backend's commands on this system, one name each (probed at construction)."""
        held = [f"landlock-abi-{self._abi}", "seccomp", "no-new-privs", "no-capabilities"]
        held += ["no-sysv-ipc", "no-xattr-or-chown", "no-listen"]
        if self.proxy is not None:
            held.append("tcp-only")
        if self._namespaces:
            held += [
                "network-namespace",
                "pid-namespace",
                "private-proc",
                "ipc-namespace",
                "process-tree-kill",
            ]
        if self._namespaces and self._read_only:
            held.append("read-only-outside")
        if os.geteuid() != 0:
            held.append("caller-uid")
        elif self._namespaces and self._run_as() is not None:
            held.append("unprivileged-uid")
        else:
            held.append("root-uid-without-capabilities")
        return tuple(held)

    def guarantees(self) -> SandboxGuarantees:
        """Kernel-enforced filesystem and syscalls; network denied (kernel) or proxied.

        ``confinement`` names what was found to hold on this kernel (see :meth:`confinement`).
        """
        held = self.confinement()
        if self.proxy is None:
            return SandboxGuarantees(
                Isolation.OS_KERNEL, Isolation.OS_KERNEL, Isolation.OS_KERNEL, LABEL, confinement=held
            )
        return SandboxGuarantees(
            Isolation.OS_KERNEL, Isolation.PROXIED, Isolation.OS_KERNEL, LABEL_PROXIED, confinement=held
        )

    def _environment(self, home: str) -> dict[str, str]:
        env = scrub_env(self.env_allowlist, {"PATH": SANDBOX_PATH})
        env.update(HOME=home, TMPDIR=home)
        if self.proxy is not None:
            url = self.proxy.url
            for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
                env[name] = url
            env["NO_PROXY"] = env["no_proxy"] = ""
        env.update(dict(self.env))
        return env

    async def run(self, command: str, *, timeout: float | None = None) -> ExecResult:
        """Run ``command`` confined; kill its whole session at the timeout or on cancellation.

        Raises:
            ToolError: the egress proxy stopped, or the sandbox could not be
                applied (the command did not run).
        """
        proxy = None
        if self.proxy is not None:
            if not self.proxy.running:
                raise ToolError("the egress proxy is not running; the command was not started")
            proxy = self.proxy.address
        run_as = self._run_as() if self._namespaces else None
        home = tempfile.mkdtemp(prefix="helikon-sbx-")
        if run_as is not None:
            os.chown(home, *run_as)
        paths: list[tuple[str, int]] = [(".", _ALL), (home, _ALL)]
        paths += [(p, _READ) for p in self.read_paths]
        paths += [(p, _WRITE_DEV) for p in DEFAULT_WRITE_PATHS]
        paths += [(p, _ALL) for p in self.write_paths]
        confine = _confine_plan(
            self._arch,
            self._abi,
            paths,
            proxy,
            namespaces=self._namespaces,
            user=run_as,
            read_only_outside=self._read_only,
            writable=[(home, False), *((p, True) for p in self.write_paths)],
        )
        plan = {"limits": self.limits.as_plan(), "confine": confine}
        try:
            return await execute(
                [*self.shell, command],
                root_fd=self.sandbox.fileno(),
                cwd=self.sandbox.root,
                env=self._environment(home),
                plan=plan,
                timeout=self.timeout if timeout is None else min(timeout, self.timeout),
                output_limit=self.output_limit,
            )
        finally:
            shutil.rmtree(home, ignore_errors=True)


def kernel_support() -> str | None:
    """Why :class:`OsSandboxBackend` cannot run here, or ``None`` when it can."""
    try:
        _trial(*_kernel())
    except OsSandboxError as exc:
        return str(exc)
    return None


__all__ = [
    "DEFAULT_READ_PATHS",
    "DEFAULT_WRITE_PATHS",
    "SANDBOX_PATH",
    "OsSandboxBackend",
    "OsSandboxError",
    "kernel_support",
]
