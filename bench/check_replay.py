"""The check (issue 23) measured on answers a finished eval run already holds, without asking again.

    flock /tmp/vidagent-cpu.lock .venv/bin/python bench/check_replay.py RUN_DIR [RUN_DIR ...] \
        --out OUT [--model NAME] [--limit N]

The check is a function of the question, its options, the answer and the evidence the answer cites,
drawn at temperature 0 by the same model: replaying it on an eval run's rows (``results.jsonl``, which
keeps each answer's evidence with its text) gives what ``vidagent eval --check`` would have given on
that run, at the check's cost alone instead of the planner's and the check's. Rows without evidence
(a run made before caption_only cited what it read) are counted and left out.

Per run it writes OUT/<run name>.jsonl (a row per question: the verdict, the option probabilities on
the cited evidence, the check's cost; a rerun resumes) and prints a table: how many answers abstain,
accuracy on those kept and on those abstained (their guess is still scored), expected calibration error
and accuracy at 50/80/100 % coverage of the check's confidence, and the check's calls, prompt tokens
and seconds per question beside the planner's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from vidagent.agent.answer import Answer
from vidagent.agent.evidence_check import check_answer
from vidagent.agent.task import Task
from vidagent.config import Settings
from vidagent.eval.metrics import calibration
from vidagent.llm.client import build_llm
from vidagent.llm.metered import MeteredChat
from vidagent.tools.base import Evidence


def replayed_answer(row: dict[str, Any]) -> Answer:
    """The answer a result row records, with its evidence, ready to be checked."""
    choices = tuple(row["choices"]) if row.get("choices") else None
    task = Task(question=row["question"], choices=choices, id=str(row["id"]))
    evidence = [Evidence(float(e["start_s"]), float(e["end_s"]), e.get("text", ""), e.get("source", ""),
                         e.get("where", "")) for e in row.get("evidence") or []]
    return Answer(task=task, text=str(row.get("prediction") or ""), planner=str(row.get("planner", "")),
                  choice_index=row.get("choice_index"), evidence=evidence)


def check_row(row: dict[str, Any], llm: MeteredChat) -> dict[str, Any]:
    before = replace(llm.usage)
    started = time.perf_counter()
    checked = check_answer(replayed_answer(row), llm)
    check = checked.check
    probability = check.probability(checked.choice_index) if check is not None else None
    return {
        "id": row["id"], "correct": row.get("correct"), "verdict": check.verdict if check else None,
        "abstained": bool(checked.abstained), "confidence": probability,
        "probabilities": check.to_dict()["probabilities"] if check else None,
        "read": len(check.read) if check else 0, "supporting": len(check.supporting) if check else 0,
        "calls": llm.usage.llm_calls - before.llm_calls,
        "prompt_tokens": llm.usage.prompt_tokens - before.prompt_tokens,
        "seconds": round(time.perf_counter() - started, 3),
        "planner_calls": (row.get("usage") or {}).get("llm_calls"),
        "planner_prompt_tokens": (row.get("usage") or {}).get("prompt_tokens"),
        "planner_seconds": (row.get("usage") or {}).get("seconds"),
    }


def summary(name: str, rows: list[dict[str, Any]], skipped: int) -> str:
    n = len(rows)
    if not n:
        return f"| {name} | 0 | (no rows with evidence; {skipped} without) |"
    kept = [r for r in rows if not r["abstained"]]
    dropped = [r for r in rows if r["abstained"]]

    def accuracy(part: list[dict[str, Any]]) -> str:
        return f"{100 * sum(bool(r['correct']) for r in part) / len(part):.1f}" if part else "-"

    rated = calibration([{"confidence": r["confidence"], "correct": r["correct"]} for r in rows])
    cal = (f"{rated['ece']:.3f} | {100 * rated['accuracy_at_50']:.1f} / {100 * rated['accuracy_at_80']:.1f} / "
           f"{100 * rated['accuracy_at_100']:.1f}") if rated else "- | -"
    mean = statistics.mean
    return (f"| {name} | {n} | {accuracy(rows)} | {len(dropped)} ({100 * len(dropped) / n:.0f} %) | {accuracy(kept)} "
            f"| {accuracy(dropped)} | {cal} | {mean(r['calls'] for r in rows):.2f} | "
            f"{mean(r['prompt_tokens'] for r in rows):.0f} | {mean(r['seconds'] for r in rows):.1f} | "
            f"{mean((r['planner_prompt_tokens'] or 0) for r in rows):.0f} |")


HEADER = ("| run | n | accuracy % (all guesses) | abstained | accuracy % kept | accuracy % abstained | ECE "
          "(check's option probability) | accuracy % at 50 / 80 / 100 % coverage | check calls/q | "
          "check prompt tok/q | check s/q | planner prompt tok/q |\n" + "|---" * 12 + "|")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="eval output folders (each with results.jsonl)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", help="the chat model (default: the configured one)")
    parser.add_argument("--limit", type=int, default=0, help="the first N rows of each run (0: all)")
    args = parser.parse_args()
    settings = Settings.from_env()
    if args.model:
        settings = settings.with_llm(model=args.model)
    llm = MeteredChat(build_llm(settings))
    args.out.mkdir(parents=True, exist_ok=True)
    lines = []
    for run in args.runs:
        rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines() if line.strip()]
        rows = rows[: args.limit] if args.limit else rows
        with_evidence = [r for r in rows if r.get("evidence") and not r.get("error")]
        target = args.out / f"{run.name}.jsonl"
        done = {json.loads(line)["id"]: json.loads(line) for line in target.read_text().splitlines()} \
            if target.exists() else {}
        with target.open("a") as sink:
            for number, row in enumerate(with_evidence, start=1):
                if row["id"] in done:
                    continue
                result = check_row(row, llm)
                done[row["id"]] = result
                sink.write(json.dumps(result) + "\n")
                sink.flush()
                print(f"{run.name} {number}/{len(with_evidence)} {result['verdict']} "
                      f"p={result['confidence']} correct={result['correct']}", flush=True)
        checked = [done[r["id"]] for r in with_evidence]
        lines.append(summary(run.name, checked, len(rows) - len(with_evidence)))
    table = HEADER + "\n" + "\n".join(lines)
    (args.out / "summary.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
