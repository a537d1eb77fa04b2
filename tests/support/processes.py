"""Processes as /proc shows them: the descendants of a process, recorded before its end, and
whether any of them is still running after it (a pid is identified with its start time, so
a pid reused by an unrelated process does not count as a survivor)."""

from __future__ import annotations

import os
import signal
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class Proc:
    pid: int
    started: int  # clock ticks after boot (/proc/PID/stat field 22)
    command: str

    def running(self) -> bool:
        """Still there, the same process, and not a zombie (exited, not yet reaped)."""
        stat = _stat(self.pid)
        return stat is not None and stat[2] != "Z" and int(stat[21]) == self.started


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat, the command (field 2, in parentheses) as one field."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    head, _, tail = text.rpartition(")")
    pid_field, _, command = head.partition(" (")
    return [pid_field, command, *tail.split()]


def _command(pid: int) -> str:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def descendants(pid: int) -> set[Proc]:
    """Every running process below `pid` (children, their children, ...)."""
    children: dict[int, list[Proc]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        stat = _stat(int(entry.name))
        if stat is None or stat[2] == "Z":
            continue
        proc = Proc(int(entry.name), int(stat[21]), _command(int(entry.name)))
        children.setdefault(int(stat[3]), []).append(proc)
    found: set[Proc] = set()
    parents = [pid]
    while parents:
        for child in children.get(parents.pop(), []):
            found.add(child)
            parents.append(child.pid)
    return found


# Children a program of the tree runs for a moment (`python -m MODULE`): a worker's Keystone
# authentication and clouds.yaml reading, the manager's self-signed certificate. Caught by a
# listing at the wrong instant, they are not programs of the tree.
SHORT_LIVED = (
    "-m pyccm.provider.openstack.transport.authenticate",
    "-m pyccm.provider.openstack.transport.clouds",
    "-m pyccm.manager.certificate",
)


def long_lived(processes: set[Proc]) -> set[Proc]:
    """`processes` without the short-lived children of the tree's programs."""
    return {p for p in processes if not any(part in p.command for part in SHORT_LIVED)}


def survivors(processes: set[Proc]) -> list[str]:
    """The command lines of those still running, for an assertion to name."""
    return sorted(p.command or str(p.pid) for p in processes if p.running())


def kill_all(processes: set[Proc]) -> None:
    """SIGKILL those still running: a failed test leaves nothing behind."""
    for proc in processes:
        if proc.running():
            with suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
