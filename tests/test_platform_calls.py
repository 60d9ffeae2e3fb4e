"""labkit runs on Linux, macOS and Windows: every POSIX-only call in it sits behind a check, with its fallback stated.

The scan reads labkit's source (ast) for what exists only on POSIX systems, or only on Linux: signals other than
SIGINT and SIGTERM, ``os.kill`` (on Windows it terminates the process whatever the signal, and signal 0 is Ctrl-C),
process groups and sessions, ``posix_fadvise``, CPU affinity, priorities, ``sysconf``, ``fork``, the load average,
user ids, the POSIX-only modules (``resource``, ``fcntl``, ...), ``prctl`` through ctypes, and ``/proc`` and
``/sys`` (RAPL's powercap among them). Each use must be guarded: inside an ``if``, a conditional expression or an
``and``/``or`` that tests ``hasattr``, ``sys.platform``, ``os.name`` or ``platform.system()``; after such an ``if``
that returns or raises; or inside a ``try`` whose handler catches what the call raises elsewhere (``OSError``,
``AttributeError``, ``ImportError``, ``NotImplementedError``, or broader). And the guard states its fallback: a
comment with the word "elsewhere" on the guard's line, the line above it, or its ``except``/``else`` line (a path
kept in a constant or a default argument states it on its own line).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

LABKIT = Path(__file__).resolve().parents[1] / "labkit"

POSIX_OS = {
    "kill", "killpg", "setsid", "getsid", "setpgrp", "setpgid", "getpgid", "getpgrp", "fork", "forkpty", "getloadavg",
    "geteuid", "getuid", "getegid", "getgid", "getgroups", "setuid", "setgid", "setpriority", "getpriority",
    "PRIO_PROCESS", "nice", "sysconf", "sysconf_names", "wait3", "wait4", "WNOHANG", "uname", "statvfs", "O_DIRECT",
    "mkfifo", "chown", "lchown", "pipe2", "memfd_create", "sync",
}  # fmt: skip
POSIX_OS_PREFIXES = ("posix_", "POSIX_", "sched_")
POSIX_SIGNAL = {
    "SIGKILL", "SIGSTOP", "SIGCONT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGCHLD", "SIGPIPE",
    "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGWINCH", "SIGXCPU", "SIGPROF", "SIGVTALRM", "alarm", "setitimer", "getitimer",
    "pause", "pthread_kill", "pthread_sigmask", "sigwait", "siginterrupt",
}  # fmt: skip
POSIX_MODULES = {"resource", "fcntl", "termios", "pwd", "grp", "pty", "tty", "posix", "syslog", "crypt", "spwd"}
POSIX_POPEN_ARGS = {"start_new_session", "preexec_fn", "process_group", "pass_fds", "user", "group", "extra_groups"}
LINUX_PATH = re.compile(r"^/(proc|sys)(/|$)")
CAUGHT_ELSEWHERE = {
    "OSError", "FileNotFoundError", "AttributeError", "ImportError", "ModuleNotFoundError", "NotImplementedError",
    "Exception", "BaseException",
}  # fmt: skip


@dataclass(frozen=True)
class Use:
    where: str  # file:line
    what: str
    guarded: bool
    stated: bool

    def __str__(self) -> str:
        problem = "no check" if not self.guarded else "no fallback stated (a comment with 'elsewhere')"
        return f"{self.where}: {self.what}: {problem}"


def _uses(tree: ast.AST):
    """(node, description) for each POSIX-only thing the code names."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module, name = node.value.id, node.attr
            if module == "os" and (name in POSIX_OS or name.startswith(POSIX_OS_PREFIXES)):
                yield node, f"os.{name}"
            elif module == "signal" and name in POSIX_SIGNAL:
                yield node, f"signal.{name}"
            elif module == "ctypes" and name == "CDLL":
                yield node, "ctypes.CDLL (a C library by name)"
        elif isinstance(node, ast.Attribute) and node.attr == "prctl":
            yield node, "prctl (Linux)"
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                if name.split(".")[0] in POSIX_MODULES:
                    yield node, f"import {name}"
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) == 2:
                target = node.args[0]
                if isinstance(target, ast.Name) and target.id in ("os", "signal"):
                    if not isinstance(node.args[1], ast.Constant):
                        yield node, f"getattr({target.id}, <a name chosen at run time>)"
            for keyword in node.keywords:
                if keyword.arg in POSIX_POPEN_ARGS:
                    yield keyword, f"{keyword.arg}= (POSIX only)"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and LINUX_PATH.match(node.value):
            yield node, f"the path {node.value!r}"


def _is_check(expr: ast.AST) -> bool:
    for node in ast.walk(expr):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "hasattr":
            return True
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in {("sys", "platform"), ("os", "name"), ("platform", "system")}:
                return True
    return False


def _exits(stmts: list[ast.stmt]) -> bool:
    return bool(stmts) and isinstance(stmts[-1], ast.Return | ast.Raise | ast.Continue | ast.Break)


def _catches_elsewhere(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in CAUGHT_ELSEWHERE for n in names)


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
                found.add(id(node.body[0].value))
    return found


def _comments(source: str) -> dict[int, str]:
    return {
        tok.start[0]: tok.string
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }


def scan(source: str, name: str = "<source>") -> list[Use]:
    """Every POSIX-only use in ``source``, whether a check guards it, and whether the guard states a fallback."""
    tree = ast.parse(source)
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    comments = _comments(source)
    skip = _docstrings(tree)

    def says_elsewhere(*lines: int) -> bool:
        return any("elsewhere" in comments.get(line, "").lower() for line in lines)

    def guard(node: ast.AST) -> tuple[bool, bool]:
        if isinstance(node, ast.keyword) and _is_check(node.value):  # start_new_session=os.name == "posix"
            return True, says_elsewhere(node.lineno, node.end_lineno or node.lineno)
        child, parent = node, parents.get(id(node))
        while parent is not None:
            if (
                isinstance(parent, ast.If | ast.IfExp | ast.While)
                and child is not parent.test
                and _is_check(parent.test)
            ):
                orelse = parent.orelse[0].lineno - 1 if isinstance(parent, ast.If) and parent.orelse else -1
                return True, says_elsewhere(parent.lineno, parent.lineno - 1, orelse)
            if isinstance(parent, ast.BoolOp):
                before = parent.values[: parent.values.index(child)] if child in parent.values else []
                if any(_is_check(v) for v in before):
                    return True, says_elsewhere(parent.lineno, parent.lineno - 1)
            if isinstance(parent, ast.Try) and child in parent.body:
                caught = [h for h in parent.handlers if _catches_elsewhere(h)]
                if caught:
                    return True, says_elsewhere(parent.lineno, parent.lineno - 1, *(h.lineno for h in caught))
            for block in ("body", "orelse", "finalbody"):  # an earlier `if <check>: return/raise` in the same block
                stmts = getattr(parent, block, None)
                if isinstance(stmts, list) and child in stmts:
                    for earlier in stmts[: stmts.index(child)]:
                        if isinstance(earlier, ast.If) and _is_check(earlier.test) and _exits(earlier.body):
                            return True, says_elsewhere(earlier.lineno, earlier.lineno - 1, earlier.body[-1].lineno)
            child, parent = parent, parents.get(id(parent))
        return False, False

    def declared(node: ast.AST) -> bool:
        """A path kept in a module's constant or a default argument, its fallback stated on its line."""
        parent = parents.get(id(node))
        at_module = isinstance(parent, ast.Assign | ast.AnnAssign) and parents.get(id(parent)) is tree
        default = isinstance(parent, ast.arguments)
        return (at_module or default) and says_elsewhere(node.lineno)

    found = []
    for node, what in _uses(tree):
        if id(node) in skip:
            continue
        guarded, stated = guard(node)
        if not guarded and isinstance(node, ast.Constant) and declared(node):
            guarded = stated = True
        found.append(Use(f"{name}:{node.lineno}", what, guarded, stated))
    return sorted(set(found), key=lambda u: (u.where.split(":")[0], int(u.where.split(":")[1]), u.what))


def _labkit_uses() -> list[Use]:
    return [u for path in sorted(LABKIT.rglob("*.py")) for u in scan(path.read_text(), str(path.relative_to(LABKIT)))]


def test_every_posix_only_call_in_labkit_is_checked_and_says_what_happens_elsewhere():
    uses = _labkit_uses()
    assert len(uses) >= 10, "the scan finds labkit's known POSIX-only calls (signals, /proc, affinity, ...)"
    problems = [str(u) for u in uses if not (u.guarded and u.stated)]
    assert not problems, "POSIX-only calls without a check or a stated fallback:\n" + "\n".join(problems)


# The scan itself, on small pieces of code: what it must flag, and what it must accept.
@pytest.mark.parametrize(
    "code, what",
    [
        ("import os, signal\nos.kill(pid, signal.SIGKILL)\n", "os.kill"),
        ("import os\ndef alive(pid):\n    try:\n        os.kill(pid, 0)\n    except ProcessLookupError:\n"
         "        return False\n", "os.kill"),
        ("import os\nn = len(os.sched_getaffinity(0))\n", "os.sched_getaffinity"),
        ("import resource\n", "import resource"),
        ("import subprocess\nsubprocess.Popen(['x'], start_new_session=True)\n", "start_new_session= (POSIX only)"),
        ("text = open('/proc/stat').read()\n", "the path '/proc/stat'"),
        ("import os\nos.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)\n", "os.posix_fadvise"),
        ("import os, signal\nos.kill(p, getattr(signal, name))\n", "getattr(signal, <a name chosen at run time>)"),
    ],
)  # fmt: skip
def test_the_scan_flags_an_unguarded_posix_only_call(code, what):
    flagged = [u for u in scan(code) if not u.guarded]
    assert what in [u.what for u in flagged], scan(code)


@pytest.mark.parametrize(
    "code",
    [
        "import os\nif hasattr(os, 'posix_fadvise'):  # elsewhere: the pages stay cached\n"
        "    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)\n",
        "import os\nload = os.getloadavg()[0] if hasattr(os, 'getloadavg') else None  # elsewhere: None\n",
        "import os\ntry:\n    n = len(os.sched_getaffinity(0))\nexcept AttributeError:  # elsewhere: cpu_count\n    n = 1\n",
        "import sys, signal\ndef f():\n    if not sys.platform.startswith('linux'):  # elsewhere: nothing\n        return\n"
        "    signal.SIGKILL\n",
        "ROOT = '/sys/class/powercap'  # elsewhere: no such folder, so no counters\n",
        "def caches(root='/sys/devices/system/cpu'):  # elsewhere: the folder is missing, so {}\n    return root\n",
        "import os\nok = hasattr(os, 'sched_setaffinity') and len(os.sched_getaffinity(0)) > 1  # elsewhere: False\n",
        "import os, subprocess\nsubprocess.Popen(['x'], start_new_session=os.name == 'posix')  # elsewhere: its own\n",
    ],
)
def test_the_scan_accepts_a_checked_call_with_its_fallback_stated(code):
    assert all(u.guarded and u.stated for u in scan(code)), [str(u) for u in scan(code)]


def test_a_check_without_a_stated_fallback_is_not_enough():
    (use,) = scan("import os\nif hasattr(os, 'getloadavg'):\n    load = os.getloadavg()\n")
    assert use.guarded and not use.stated
    assert not scan("ROOT = '/proc/stat'\n")[0].guarded, "a constant needs its fallback stated on its line"
