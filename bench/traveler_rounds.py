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
from dataclasses import dataclass
from pathlib import Path

RULES = ((1, 1.0), (2, 1.0), (3, 1.0), (0, 0.3), (0, 0.4), (0, 0.5), (1, 0.4), (2, 0.4), (0, 1.0))
STAGES = ("plan", "retrieve", "questions", "visual QA", "summarise", "evaluate")
_VERDICT = re.compile(r"^round (\d+): .*?option (\d+) leads with (\d+)%")
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


@dataclass(frozen=True)
class Evaluation:
    """One evaluation by scores: the leading option, its averaged probability, and the model seconds the
    question had spent when it was done."""

    lead: int
    probability: float
    seconds: float


def evaluations(trace: list[dict], options: int, row_artifacts: dict | None = None) -> list[Evaluation]:
    """Each evaluation by scores, in order: its per-order probability steps averaged (an order naming no
    option is left out, as the planner does); from the answer's ``evaluations`` artifact where it has one
    (the trace's steps round each probability to two places, so a near tie may be read the other way; an
    evaluation after a round takes the lead its verdict names, which the planner computed unrounded)."""
    orders_of: list[list[list[float]]] = []  # per evaluation: each order's probabilities
    seconds_at: list[float] = []  # per evaluation: the model seconds spent when its last order was read
    verdicts: dict[int, tuple[int, float]] = {}  # evaluation -> the lead its verdict names (computed unrounded)
    spent = 0.0
    for step in trace:
        spent += step.get("seconds") or 0.0
        text = str(step.get("text", ""))
        said = _VERDICT.match(text) if step.get("type") == "evaluation" else None
        if said:
            verdicts[int(said.group(1))] = (int(said.group(2)), int(said.group(3)) / 100)
        if step.get("type") != "evaluation" or not text.startswith("("):
            continue
        if "options shifted" not in text:  # the options as given: an evaluation's first order
            orders_of.append([])
            seconds_at.append(spent)
        seconds_at[-1] = spent
        match = _PROBABILITIES.match(text)
        if match:
            values = [0.0] * options
            for pair in match.group(1).split(", "):
                index, value = pair.split(": ")
                values[int(index)] = float(value)
            orders_of[-1].append(values)
    found = []
    exact = (row_artifacts or {}).get("evaluations") or []  # full precision, where the run kept them
    for number, (orders, seconds) in enumerate(zip(orders_of, seconds_at)):
        if number < len(exact):
            lead = max(range(options), key=exact[number].__getitem__)
            found.append(Evaluation(lead, exact[number][lead], seconds))
            continue
        if orders:
            means = [sum(order[i] for order in orders) / len(orders) for i in range(options)]
            lead = max(range(options), key=means.__getitem__)
            found.append(Evaluation(lead, means[lead], seconds))
    return [Evaluation(*verdicts[j], e.seconds) if j in verdicts and j >= len(exact) else e
            for j, e in enumerate(found)]


def stop_at(found: list[Evaluation], stable: int, confidence: float) -> int:
    """The evaluation at which the planner's rule (``stable``, ``confidence``) would have ended the rounds."""
    held = 0
    for j in range(1, len(found)):
        held = held + 1 if found[j].lead == found[j - 1].lead else 0
        if (0 < stable <= held) or found[j].probability >= confidence:
            return j
    return len(found) - 1


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
    scored = [(row, evaluations(row["trace"], len(row["choices"]), row.get("artifacts"))) for row in rows if row.get("choices")]
    scored = [(row, found) for row, found in scored if found and row["gold"].get("answer_index") is not None]
    if scored:
        deepest = max(len(found) for _, found in scored)
        print("\n| after evaluation | accuracy % (a question that stopped keeps its last lead) | questions still going |")
        print("|---|---|---|")
        for j in range(deepest):
            correct = sum(found[min(j, len(found) - 1)].lead == row["gold"]["answer_index"] for row, found in scored)
            going = sum(len(found) > j for _, found in scored)
            print(f"| {j} | {100 * correct / len(scored):.1f} | {going} |")
        print("\nStop rules replayed (exact for a run made with `stable=0 confidence=1`: a rule changes nothing "
              "before it stops):\n")
        print("| stable | confidence | accuracy % | rounds/q | model s/q to the stop |")
        print("|---|---|---|---|---|")
        for stable, confidence in RULES:
            stops = [(row, found, stop_at(found, stable, confidence)) for row, found in scored]
            correct = sum(found[j].lead == row["gold"]["answer_index"] for row, found, j in stops)
            print(f"| {stable} | {confidence:g} | {100 * correct / len(stops):.1f} | "
                  f"{sum(j for _, _, j in stops) / len(stops):.2f} | "
                  f"{sum(found[j].seconds for _, found, j in stops) / len(stops):.1f} |")
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+")
    for folder in parser.parse_args().runs:
        report(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
