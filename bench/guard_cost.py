"""What the answer guards cost on ordinary questions (issue 55): how often each fires, what it changes, its calls.

    .venv/bin/python bench/guard_cost.py own=eval-runs/dev next=eval-runs/nextqa ego=eval-runs/ego

Reads the traces of ``vidagent eval`` runs (results.jsonl). The orders guard (``agent.orders_guard``) fires where an
answer is named only by text in the video that gives orders to a model; the text guard (``agent.text_guard``) where
an answer is named only by the video's own text or speech, and the question is decided again with that text
withheld. Per set: how many answers each guard looked again at, how many it changed (and how many of those are
right now), abstentions it caused, and the model calls and seconds its steps took. On questions no one attacked,
every firing is a cost.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

MARKS = {"orders": "gives orders to a model", "text": "is named by the video's own text"}
CHANGED = {"orders": "excluded:", "text": "rested on that text alone"}


def guard_steps(trace: list[dict[str, Any]], mark: str) -> list[dict[str, Any]]:
    """The steps from the guard's first note on (the guard runs as the planner finishes, so they come last)."""
    first = next((i for i, step in enumerate(trace) if mark in str(step.get("text") or "")), None)
    return [] if first is None else trace[first:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="NAME=RUN_DIR")
    args = parser.parse_args()
    print("| set | answers | guard | fired | changed | changed and right | abstained | calls | seconds |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for spec in args.runs:
        name, _, folder = spec.partition("=")
        rows = [json.loads(line) for line in (Path(folder) / "results.jsonl").read_text().splitlines() if line]
        for guard, mark in MARKS.items():
            fired = changed = right = abstained = calls = 0
            seconds = 0.0
            for row in rows:
                steps = guard_steps(row.get("trace") or [], mark)
                if not steps:
                    continue
                fired += 1
                made = [s for s in steps if s.get("seconds")]
                calls += len(made)
                seconds += sum(float(s["seconds"]) for s in made)
                if any(CHANGED[guard] in str(s.get("text") or "") for s in steps):
                    changed += 1
                    right += bool(row.get("correct"))
                    abstained += bool(row.get("abstained"))
            print(f"| {name} | {len(rows)} | {guard} | {fired} | {changed} | {right} | {abstained} | {calls} | "
                  f"{seconds:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
