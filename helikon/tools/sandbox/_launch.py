"""The sandbox launcher: confine this process, then exec the command.

Run as a script, never imported by the command's parent for its effects::

    python -I -S _launch.py '<plan json>' -- /bin/bash -c 'make test'

It is a fresh interpreter (so there is no ``preexec_fn`` running in a forked
copy of a threaded parent), started in a new session by the parent. In this
order it:

1. moves into the sandbox root through the inherited directory descriptor
   (``fchdir``: the capability the parent holds, not a path that could be
   swapped);
2. restores ``SIGPIPE`` and ``SIGXFSZ`` to their defaults (Python ignores
   both, and ignored signals survive ``exec``);
3. applies the ``setrlimit`` caps;
4. with confinement asked for: isolates the command (``_isolate.py``: the
   relay to the egress proxy, new network, IPC, mount and PID namespaces, a
   fresh ``/proc``, every mount read-only but the root and the write
   paths, and, as root, idmapped root and write paths and an unprivileged uid),
   then drops every capability it still holds, sets ``no_new_privs``,
   applies Landlock and installs the seccomp filter;
5. closes the root's descriptor and execs the command.

Any failure before the exec prints ``helikon-sandbox: <reason>`` on stderr
and exits with :data:`FAILED`: the command never runs half-confined. It
imports only the standard library, and loads its three siblings by file path.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import resource
import signal
import sys
from types import ModuleType
from typing import Any, Final

#: The exit status that means "the sandbox could not be applied".
FAILED: Final = 125
#: The stderr prefix of such a failure.
MARKER: Final = "helikon-sandbox: "

_RLIMITS: Final = {
    "cpu": resource.RLIMIT_CPU,
    "fsize": resource.RLIMIT_FSIZE,
    "as": resource.RLIMIT_AS,
    "nproc": resource.RLIMIT_NPROC,
    "core": resource.RLIMIT_CORE,
}
_CAPABILITY_VERSION_3: Final = 0x20080522


def _sibling(name: str) -> ModuleType:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def set_limits(limits: dict[str, int | None]) -> None:
    """Lower each named limit (soft and hard) to the value given; never raise one."""
    for name, value in limits.items():
        if value is None:
            continue
        which = _RLIMITS[name]
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


def _effective_capabilities() -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def drop_capabilities(isolate: ModuleType) -> None:
    """Holding any capability (root, or a user namespace's owner): empty the bounding set and every set.

    Without this, a root parent's command would keep ``CAP_DAC_OVERRIDE``,
    ``CAP_SYS_ADMIN`` and friends, and a root ``exec`` regains whatever the
    bounding set holds.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if _effective_capabilities():
        isolate.drop_bounding_set()
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"capset: {os.strerror(code)}")


def confine(plan: dict[str, Any], root_fd: int | None) -> None:
    """Isolate (``_isolate.py``), then apply Landlock and seccomp as ``plan`` says (see ``_os.py``)."""
    landlock = _sibling("_landlock")
    seccomp = _sibling("_seccomp")
    isolate = _sibling("_isolate")
    if plan.get("isolate") is not None:
        isolate.isolate(plan["isolate"], root_fd)
    program = seccomp.build_filter(
        plan["arch"], network=plan["network"], deny_truncate=plan["abi"] < 3, deny_chmod=os.geteuid() == 0
    )
    drop_capabilities(isolate)
    seccomp.no_new_privs()
    landlock.restrict(
        plan["abi"],
        [(path, rights) for path, rights in plan["paths"]],
        connect_ports=plan["connect_ports"],
    )
    seccomp.install(program)


def main(argv: list[str]) -> None:
    try:
        split = argv.index("--")
        plan = json.loads(argv[1])
        command = argv[split + 1 :]
        if not command:
            raise ValueError("no command given")
        root_fd = plan.get("root_fd")
        if root_fd is not None:
            os.fchdir(root_fd)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        set_limits(plan.get("limits", {}))
        if plan.get("confine") is not None:
            confine(plan["confine"], root_fd)
        if root_fd is not None:
            os.close(root_fd)
    except Exception as exc:
        sys.stderr.write(f"{MARKER}{type(exc).__name__}: {exc}\n")
        sys.stderr.flush()
        os._exit(FAILED)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"{MARKER}cannot run {command[0]!r}: {exc.strerror}\n")
        sys.stderr.flush()
        os._exit(FAILED)


if __name__ == "__main__":
    main(sys.argv)
