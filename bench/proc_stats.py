"""CPU time and memory of a process and its descendants, read from /proc (Linux), for benchmarks.

``TreeMonitor(pid)`` samples the resident memory of the process tree in a thread and reports its
peak; ``tree_cpu_s(pid)`` is the CPU time (user + system) of the tree's live processes plus what
waited-for children already used.
"""

from __future__ import annotations

import os
import resource
import signal
import threading
import time
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # fields from the state on (the name may hold spaces)


def descendants(pid: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields:
                parents.setdefault(int(fields[1]), []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def tree_cpu_s(pid: int) -> float:
    """utime + stime (+ cutime + cstime) of ``pid`` and every live descendant, in seconds."""
    total = 0
    for member in [pid, *descendants(pid)]:
        fields = _stat(member)
        if fields:
            total += sum(int(v) for v in fields[11:15])
    return total / TICKS


def tree_rss_bytes(pid: int) -> int:
    total = 0
    for member in [pid, *descendants(pid)]:
        try:
            total += int(Path(f"/proc/{member}/statm").read_text().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            pass
    return total


class TreeMonitor:
    """Peak resident memory of a process tree, sampled every ``interval_s`` while running."""

    def __init__(self, pid: int, interval_s: float = 0.2) -> None:
        self.pid, self.interval_s = pid, interval_s
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, tree_rss_bytes(self.pid))
            self._stop.wait(self.interval_s)

    def __enter__(self) -> "TreeMonitor":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_bytes = max(self.peak_bytes, tree_rss_bytes(self.pid))


def wait_measured(process, interval_s: float = 0.2, limit_s: float | None = None) -> tuple[int, float, float, int]:
    """Wait for a ``subprocess.Popen`` started just before: (exit code, wall s, CPU s of its tree,
    peak tree RSS bytes). CPU is the larger of the sampled tree's and what reaped children used
    (processes the child waited for count in the second). Past ``limit_s`` the child's process
    group is killed (start it with ``start_new_session=True``) and the exit code is -9."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    peak, sampled = 0, 0.0
    while process.poll() is None:
        peak = max(peak, tree_rss_bytes(process.pid))
        sampled = max(sampled, tree_cpu_s(process.pid))
        if limit_s is not None and time.perf_counter() - started > limit_s:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            break
        time.sleep(interval_s)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    reaped = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return process.returncode, wall, max(sampled, reaped), peak
