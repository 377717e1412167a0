"""Seconds a question, median and quartiles, for evaluation runs made side by side on the same questions.

    .venv/bin/python bench/answer_speed.py RUN_DIR [RUN_DIR ...]

Reads each run's ``results.jsonl`` (``vidagent eval --out RUN_DIR``) and prints, on the questions every run
answered, the median wall seconds a question (and the first and third quartiles), the median seconds in the
LLM, LLM calls, prompt tokens read anew (not reused from the KV cache) and segments read, and each run's median
against the first run's. Make the runs one after another on an idle machine: a run beside another job is slower
by however much that job takes (llama.cpp's threads lose 3-4x when anything else takes a core).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def rows(folder: Path) -> dict[str, dict]:
    path = folder / "results.jsonl"
    if not path.is_file():
        raise SystemExit(f"{folder}: no results.jsonl (is it a `vidagent eval` run folder?)")
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if not row.get("error"):
                found[str(row["id"])] = row
    return found


def quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return (values[0],) * 3 if values else (0.0, 0.0, 0.0)
    first, median, third = statistics.quantiles(values, n=4)
    return first, median, third


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args()
    runs = {folder: rows(folder) for folder in args.runs}
    shared = set.intersection(*(set(found) for found in runs.values()))
    if not shared:
        print("the runs share no answered question", file=sys.stderr)
        return 1
    print(f"{len(shared)} questions every run answered\n")
    print("| run | median wall s/q (q1-q3) | median LLM s/q | LLM calls/q | prompt tokens read anew/q | "
          "segments read/q | median against the first |")
    print("|---|---|---|---|---|---|---|")
    first_median = None
    for folder, found in runs.items():
        chosen = [found[qid] for qid in sorted(shared)]
        q1, median, q3 = quartiles([row["wall_s"] for row in chosen])
        llm = statistics.median(row["usage"]["seconds"] for row in chosen)
        calls = statistics.mean(row["usage"]["llm_calls"] for row in chosen)
        anew = statistics.mean(row["usage"]["prompt_tokens"] - row["usage"].get("reused_prompt_tokens", 0)
                               for row in chosen)
        segments = statistics.mean(row.get("segments_read") or 0 for row in chosen)
        first_median = median if first_median is None else first_median
        ratio = median / first_median if first_median else float("nan")
        print(f"| {folder.name} | {median:.1f} ({q1:.1f}-{q3:.1f}) | {llm:.1f} | {calls:.2f} | {anew:.0f} | "
              f"{segments:.1f} | {ratio:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
