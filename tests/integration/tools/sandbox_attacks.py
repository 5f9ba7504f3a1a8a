"""The attacks of issue 30 on OsSandboxBackend, as data and a runner.

The test module runs them in-process (as root, the way the tools are used
here) and, through ``python sandbox_attacks.py <spec>`` under ``setpriv``,
as an unprivileged user. Every "outside" target is a sentinel the test made
in its own directory; every network target is a listener on 127.0.0.x the
test started. Each attack is ``(name, shell command)``; it holds when the
command fails and the sentinels and listeners show nothing happened.
"""

from __future__ import annotations

import json
import shlex
import sys
from typing import Any

import anyio

#: An ACL granting ``other`` rwx (``system.posix_acl_access``, version 2): mode 0600 would become 0677.
ACL_0677 = (
    "struct.pack('<I', 2) + struct.pack('<HHI', 1, 6, 0xFFFFFFFF) + "
    "struct.pack('<HHI', 4, 7, 0xFFFFFFFF) + struct.pack('<HHI', 0x20, 7, 0xFFFFFFFF)"
)


def py(code: str) -> str:
    """A ``python3 -c`` command line running ``code`` (quoted for the shell)."""
    return f"python3 -c {shlex.quote(code)}"


def metadata_attacks(
    secret: str, suid: str, plain: str, tagged: str, directory: str
) -> list[tuple[str, str]]:
    """Changes of mode (via ACLs), xattrs, owners and times of files outside the root."""
    acl = f"import os, struct; os.setxattr(%r, 'system.posix_acl_access', {ACL_0677})"
    return [
        # the examples
        ("acl via setxattr", py(acl % secret)),
        ("user xattr", py(f"import os; os.setxattr({plain!r}, 'user.pwned', b'1')")),
        ("no-op chown clears setuid", f"chown 0:0 {suid}"),
        ("touch -d", f"touch -d '2001-02-03 04:05' {plain}"),
        # other xattr spellings
        ("lsetxattr", py(f"import os; os.setxattr({plain!r}, 'user.l', b'1', follow_symlinks=False)")),
        ("fsetxattr", py(f"import os; os.setxattr(os.open({plain!r}, os.O_RDONLY), 'user.f', b'1')")),
        ("removexattr", py(f"import os; os.removexattr({tagged!r}, 'user.keep')")),
        ("default acl", py((acl % directory).replace("posix_acl_access", "posix_acl_default"))),
        ("user xattr on a directory", py(f"import os; os.setxattr({directory!r}, 'user.d', b'1')")),
        # other owner spellings
        ("lchown", py(f"import os; os.lchown({suid!r}, 0, 0)")),
        ("fchown", py(f"import os; os.fchown(os.open({suid!r}, os.O_RDONLY), 0, 0)")),
        (
            "fchownat",
            py(
                f"import os; d = os.open({directory!r}, os.O_RDONLY); "
                f"os.chown({os_basename(suid)!r}, 0, 0, dir_fd=d)"
            ),
        ),
        ("chgrp", f"chgrp 0 {suid}"),
        # other time spellings
        ("utimensat", py(f"import os; os.utime({plain!r}, (1, 1))")),
        ("futimens", py(f"import os; os.utime(os.open({plain!r}, os.O_RDONLY), (2, 2))")),
        ("utimes", py(f"import ctypes; assert ctypes.CDLL(None).utimes({plain!r}.encode(), None) == 0")),
        (
            "futimesat",
            py(f"import ctypes; assert ctypes.CDLL(None).syscall(261, -100, {plain!r}.encode(), None) == 0"),
        ),
        ("touch -r", f"touch -r / {plain}"),
        ("touch now", f"touch {plain}"),
        # and the mode itself
        ("chmod", f"chmod 0777 {secret}"),
    ]


def own_file_attacks(owned: str, directory: str, inside_name: str) -> list[tuple[str, str]]:
    """Changes to files outside the root that the command's own uid owns (``owned`` and
    ``directory``): no path rule sees them, only the read-only mounts stop them."""
    return [
        # times
        ("touch -d", f"touch -d '2001-02-03 04:05' {owned}"),
        ("touch now", f"touch {owned}"),
        ("touch -r", f"touch -r / {owned}"),
        ("touch -m -t", f"touch -m -t 200001010000 {owned}"),
        ("touch a directory", f"touch -d @5 {directory}"),
        ("os.utime", py(f"import os; os.utime({owned!r}, (1, 1))")),
        ("os.utime ns", py(f"import os; os.utime({owned!r}, ns=(3, 3))")),
        ("futimens", py(f"import os; os.utime(os.open({owned!r}, os.O_RDONLY), (2, 2))")),
        ("utimes", py(f"import ctypes; assert ctypes.CDLL(None).utimes({owned!r}.encode(), None) == 0")),
        (
            "utimensat by dir_fd",
            py(
                f"import os; d = os.open({directory!r}, os.O_RDONLY); "
                f"os.utime({os_basename(owned)!r}, (4, 4), dir_fd=d)"
            ),
        ),
        # the mode
        ("chmod", f"chmod 0777 {owned}"),
        ("chmod a directory", f"chmod 0777 {directory}"),
        ("fchmod", py(f"import os; os.chmod(os.open({owned!r}, os.O_RDONLY), 0o777)")),
        # xattrs (seccomp refuses them as well)
        ("user xattr", py(f"import os; os.setxattr({owned!r}, 'user.pwned', b'1')")),
        # size and names
        ("truncate", f"truncate -s 0 {owned}"),
        ("os.truncate", py(f"import os; os.truncate({owned!r}, 1)")),
        ("rename into it", f"echo replaced > {inside_name} && mv -f {inside_name} {owned}"),
        ("new file beside it", f"echo new > {directory}/new.txt"),
    ]


def os_basename(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def network_attacks(proxy_port: int, listener_port: int) -> list[tuple[str, str]]:
    """Ways around the proxy, and serving a port, with network proxied."""
    connect = (
        "import socket; s = socket.socket(%s); s.settimeout(3); s.connect((%r, %d)); print(s.getpeername())"
    )
    listen = "import socket; s = socket.socket(%s); %s s.listen(); print(s.getsockname())"
    return [
        # the examples
        ("mptcp", py(connect % ("2, 1, 262", "127.0.0.1", listener_port))),
        ("other address, proxy port", py(connect % ("2, 1, 0", "127.0.0.2", proxy_port))),
        ("listen auto-binds", py(listen % ("2, 1, 0", ""))),
        # other protocols
        ("mptcp over IPv6", py(connect % ("10, 1, 262", "::1", listener_port))),
        ("mptcp with SOCK_CLOEXEC", py(connect % ("2, 1 | 0x80000, 262", "127.0.0.1", listener_port))),
        ("sctp stream", py(connect % ("2, 1, 132", "127.0.0.1", listener_port))),
        ("udp", py(connect % ("2, 2, 0", "127.0.0.1", listener_port))),
        ("raw", py(connect % ("2, 3, 6", "127.0.0.1", listener_port))),
        # other addresses on the proxy's port
        ("127.0.0.3, proxy port", py(connect % ("2, 1, 6", "127.0.0.3", proxy_port))),
        ("127.1.2.3, proxy port", py(connect % ("2, 1, 0", "127.1.2.3", proxy_port))),
        ("::1, proxy port", py(connect % ("10, 1, 0", "::1", proxy_port))),
        ("direct to the listener", py(connect % ("2, 1, 0", "127.0.0.1", listener_port))),
        # other ways to serve
        ("bind 0 then listen", py(listen % ("2, 1, 0", 's.bind(("127.0.0.1", 0));'))),
        ("listen on IPv6", py(listen % ("10, 1, 0", ""))),
        ("create_server", py('import socket; print(socket.create_server(("127.0.0.1", 0)).getsockname())')),
    ]


def ipc_attacks(shm_key: int, msg_key: int, sem_key: int, shm_id: int) -> list[tuple[str, str]]:
    """SysV IPC objects of a process outside the sandbox."""
    libc = "import ctypes; c = ctypes.CDLL(None, use_errno=True); "
    return [
        # the example: attach and read another process's segment
        (
            "shmat",
            py(
                libc + f"i = c.shmget({shm_key}, 0, 0); assert i >= 0, ctypes.get_errno(); "
                "c.shmat.restype = ctypes.c_void_p; a = c.shmat(i, None, 0); "
                "assert a not in (None, 2**64 - 1); "
                'print(ctypes.string_at(a, 16)); ctypes.memmove(a, b"PWNED", 5)'
            ),
        ),
        (
            "shmctl by id",
            py(libc + f"b = ctypes.create_string_buffer(256); assert c.shmctl({shm_id}, 2, b) == 0"),
        ),
        ("msgget", py(libc + f"assert c.msgget({msg_key}, 0) >= 0, ctypes.get_errno()")),
        ("semget", py(libc + f"assert c.semget({sem_key}, 0, 0) >= 0, ctypes.get_errno()")),
        ("shm create", py(libc + "assert c.shmget(0, 4096, 0o1600) >= 0, ctypes.get_errno()")),
        ("ipcs", f"ipcs -m | grep -q {shm_key:x}"),
    ]


def proc_attacks(pid: int, token: str) -> list[tuple[str, str]]:
    """Another process's ``/proc`` entries (its command line carries ``token``)."""
    token = token.replace(".", "[.]")  # a pattern that matches the token but not itself
    return [
        ("cmdline", f"cat /proc/{pid}/cmdline"),
        ("status", f"grep -q . /proc/{pid}/status && cat /proc/{pid}/status"),
        ("environ", f"cat /proc/{pid}/environ"),
        ("scan", f"grep -a -l {token} /proc/[0-9]*/cmdline"),
        ("ps", f"ps -eo args | grep -v grep | grep {token}"),
    ]


def escape_commands(token: str) -> list[tuple[str, str]]:
    """Commands that try to outlive their timeout (each leaves a ``sleep <token>`` behind if it can)."""
    # Six processes that keep moving once the kill has begun: each waits on a pipe whose write end
    # only the first process holds; that one stays in the command's process group, so the group
    # kill closes the pipe and wakes them at that very moment. Then, for half a second, each
    # forks, the child takes a new process group and the parent exits, over and over: they are
    # mid-regroup while any sweep of pids runs, and a group kill never reaches them. A survivor
    # then sits still (so that the test's own look at /proc, which a chain outruns as easily as
    # a sweep does, finds it) and gives up by itself after 20 s.
    regroup = (
        "import os, time\n"
        "r, w = os.pipe()\n"
        "for _ in range(6):\n"
        "    if os.fork() == 0:\n"
        "        os.close(w)\n"
        "        os.setpgid(0, 0)\n"
        "        os.read(r, 1)\n"
        "        end = time.monotonic() + 0.5\n"
        "        while time.monotonic() < end:\n"
        "            if os.fork() != 0:\n"
        "                os._exit(0)\n"
        "            os.setpgid(0, 0)\n"
        "        time.sleep(20)\n"
        "        os._exit(0)\n"
        "os.close(r)\n"
        "time.sleep(300)\n"
        f'token = "{token}"\n'
    )
    return [
        # the example: keep forking into new process groups
        ("fork into new groups", py(regroup)),
        # a process whose first thread exits: /proc/<pid> shows a zombie while its other thread runs
        (
            "leader-less process",
            py(
                "import os, threading, time, ctypes; os.setpgid(0, 0); "
                "threading.Thread(target=time.sleep, args=(20,)).start(); "
                "ctypes.CDLL(None).pthread_exit(None)"
            )
            + f" {token} & sleep 300",
        ),
        ("double fork", f"( ( sleep {token} & ) & ); sleep 300"),
        ("nohup and disown", f"nohup sleep {token} >/dev/null 2>&1 & disown; sleep 300"),
        ("ignore signals", f"( trap '' TERM HUP INT; sleep {token} ) & sleep 300"),
        ("setsid attempt", f"(setsid -f sleep {token} || sleep {token}) & sleep 300"),
        ("exits at once, leaves a daemon", f"( sleep {token} & ) ; exit 0"),
    ]


def run_all(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Run ``spec["attacks"]`` through an OsSandboxBackend built from ``spec`` (in this process)."""
    from helikon.tools import EgressPolicy, EgressProxy, OsSandboxBackend, Sandbox
    from helikon.tools.sandbox import DEFAULT_READ_PATHS, _process

    backend = OsSandboxBackend(
        Sandbox.open(str(spec["root"])),
        read_paths=(*DEFAULT_READ_PATHS, *spec.get("read_paths", [])),
        write_paths=tuple(spec.get("write_paths", ())),
        timeout=float(spec.get("timeout", 20)),
    )
    proxy = None
    if spec.get("proxy_port"):
        proxy = EgressProxy(EgressPolicy.allow_all(), port=int(spec["proxy_port"])).start()
        backend = backend.allow_network(True, proxy=proxy)
    confinement = list(getattr(backend.guarantees(), "confinement", ()))
    out: dict[str, dict[str, Any]] = {"_": {"confinement": confinement}}
    sweeps = _process._SWEEPS
    if spec.get("sweep") is False:  # the kill is the process group's alone: no /proc sweep after it
        _process._SWEEPS = 0  # type: ignore[misc]
    try:
        for name, command in spec["attacks"]:
            result = anyio.run(backend.run, command)
            out[name] = {
                "exit": result.exit_code,
                "timed_out": result.timed_out,
                "output": result.stdout + result.stderr,
            }
    finally:
        _process._SWEEPS = sweeps  # type: ignore[misc]
        if proxy is not None:
            proxy.close()
    return out


if __name__ == "__main__":
    print(json.dumps(run_all(json.loads(sys.argv[1]))))
