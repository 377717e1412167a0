"""What a TraveLER run spent its rounds on, and what more rounds bought: a run folder read back.

    .venv/bin/python bench/traveler_rounds.py RUN_FOLDER [RUN_FOLDER ...]

From each answer's trace, without another model call: how many rounds the questions took and how their
answers were reached (the Evaluator's verdict, the options' probabilities, or forced at the limit); seconds
per question in each stage (plan, retriever, extractor questions, visual QA, Summarizer, Evaluator); and, for
a run with ``evaluate_by=scores``, the accuracy of the leading option after each evaluation (the opening
frames are evaluation 0; a question that stopped earlier keeps its last lead), which shows whether the
rounds after the first changed answers for the better.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

STAGES = ("plan", "retrieve", "questions", "visual QA", "summarise", "evaluate")
_PROBABILITIES = re.compile(r"^\(option probabilities (.+?)(?:, options shifted \d+)?\)$")


def read_rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines() if line.strip()]


def stage_of(step: dict) -> str | None:
    """Which TraveLER stage a trace step's model time belongs to (None: no model time of its own)."""
    kind = step.get("type")
    if kind == "plan":
        return "questions" if str(step.get("text", "")).startswith("questions:") else "plan"
    if kind == "tool_call" and str(step.get("thought", "")).startswith("(retriever)"):
        return "retrieve"
    if kind == "observation" and step.get("tool") == "frame_question_answering":
        return "visual QA"
    if kind == "memory" and step.get("action") == "summarise":
        return "summarise"
    if kind == "evaluation":
        return "evaluate"
    return None


def leads(trace: list[dict], options: int) -> list[int]:
    """The leading option after each evaluation by scores: every ``options`` consecutive per-order
    probability steps averaged (an order naming no option is left out, as the planner does)."""
    blocks: list[list[list[float]]] = []
    for step in trace:
        text = str(step.get("text", ""))
        if step.get("type") != "evaluation" or not text.startswith("("):
            continue
        if "options shifted" not in text:  # the options as given: an evaluation's first order
            blocks.append([])
        match = _PROBABILITIES.match(text)
        if match:
            values = [0.0] * options
            for pair in match.group(1).split(", "):
                index, value = pair.split(": ")
                values[int(index)] = float(value)
            blocks[-1].append(values)
    found = []
    for block in blocks:
        if block:
            means = [sum(order[i] for order in block) / len(block) for i in range(options)]
            found.append(max(range(options), key=means.__getitem__))
    return found


def report(folder: Path) -> None:
    rows = [row for row in read_rows(folder) if row.get("trace") and row.get("error") is None]
    if not rows:
        print(f"{folder}: no answered question")
        return
    rounds = Counter(sum(1 for s in row["trace"] if s.get("type") == "plan"
                         and not str(s.get("text", "")).startswith("questions:")) for row in rows)
    how = Counter(next((s.get("how") for s in reversed(row["trace"]) if s.get("type") == "final_answer"), "?")
                  for row in rows)
    seconds: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    for row in rows:
        for step in row["trace"]:
            stage = stage_of(step)
            if stage and step.get("seconds"):
                seconds[stage] += step["seconds"]
                calls[stage] += 1
    n = len(rows)
    right = sum(bool(row["correct"]) for row in rows)
    wall = sum(row.get("wall_s") or 0.0 for row in rows) / n
    print(f"## {folder.name}: {n} questions, {100 * right / n:.1f} % right, {wall:.1f} wall s/q\n")
    print("rounds: " + ", ".join(f"{k} round{'s' * (k != 1)}: {v}" for k, v in sorted(rounds.items())))
    print("answer reached by: " + ", ".join(f"{k}: {v}" for k, v in how.most_common()) + "\n")
    print("| stage | model s/q | timed steps/q |")
    print("|---|---|---|")
    for stage in STAGES:
        print(f"| {stage} | {seconds[stage] / n:.1f} | {calls[stage] / n:.1f} |")
    scored = [(row, leads(row["trace"], len(row["choices"]))) for row in rows if row.get("choices")]
    scored = [(row, found) for row, found in scored if found and row["gold"].get("answer_index") is not None]
    if scored:
        deepest = max(len(found) for _, found in scored)
        print("\n| after evaluation | accuracy % (a question that stopped keeps its last lead) | questions still going |")
        print("|---|---|---|")
        for j in range(deepest):
            correct = sum(found[min(j, len(found) - 1)] == row["gold"]["answer_index"] for row, found in scored)
            going = sum(len(found) > j for _, found in scored)
            print(f"| {j} | {100 * correct / len(scored):.1f} | {going} |")
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+")
    for folder in parser.parse_args().runs:
        report(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
