"""Wall seconds of the fast test tier, its collection alone, and its slowest tests.

    .venv/bin/python bench/fast_tier.py [--slowest 20] [--collect-only] [-- PYTEST_ARGS ...]

Runs ``pytest -q -m "not models and not clips"`` (the README's first command) in a child process, timing
first the collection alone (``--collect-only``) and then the whole tier, and prints the wall seconds of each,
the load average before and after (the machine's other work slows both), and the slowest tests by their
setup, call and teardown together (from a JUnit XML report). Arguments after ``--`` go to both pytest runs
(``-- -n 2`` with pytest-xdist, ``-- tests/memory`` for a part). Compare runs made side by side on one
machine: on a loaded one the ratio between them is what holds, not the seconds.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIER = ["-m", "not models and not clips"]


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def timed_pytest(arguments: list[str]) -> tuple[float, int, str]:
    """Wall seconds, exit status and the last line of a pytest run in a child process."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *arguments], cwd=ROOT,
                          capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return time.perf_counter() - started, done.returncode, lines[-1] if lines else done.stderr.strip()[-200:]


def slowest(report: Path, count: int) -> list[tuple[float, str]]:
    """The ``count`` slowest tests of a JUnit XML report (setup, call and teardown together)."""
    cases = ElementTree.parse(report).getroot().iter("testcase")
    timed = [(float(case.get("time", 0.0)), f"{case.get('classname')}::{case.get('name')}") for case in cases]
    return sorted(timed, reverse=True)[:count]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slowest", type=int, default=20, help="how many of the slowest tests to list")
    parser.add_argument("--collect-only", action="store_true", help="time the collection alone")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()

    print(f"load average before: {load()}")
    seconds, status, last = timed_pytest([*TIER, "--collect-only", *args.pytest_args])
    print(f"collection: {seconds:.1f} s wall ({last})")
    if status != 0 or args.collect_only:
        return status
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "junit.xml"
        seconds, status, last = timed_pytest([*TIER, f"--junitxml={report}", *args.pytest_args])
        print(f"fast tier: {seconds:.1f} s wall ({last})")
        print(f"load average after: {load()}")
        if report.exists():
            print(f"slowest {args.slowest} (setup + call + teardown):")
            for test_seconds, name in slowest(report, args.slowest):
                print(f"  {test_seconds:6.2f} s  {name}")
    return status


if __name__ == "__main__":
    sys.exit(main())
