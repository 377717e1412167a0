"""Benchmark `vidagent ask` on the checked dev question set: accuracy and cost per question.

    .venv/bin/python bench/ask_dev.py [--limit N] [--model qwen2.5-1.5b] [--out bench/results/ask_dev.jsonl]

Results stream to a JSONL file (a rerun skips questions already answered); a summary table is
printed at the end. Scoring: multiple choice by index; open-ended by normalised text against the
answer and its accept list; localization by the predicted time falling in the span ± 0.5 s.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

from tqdm import tqdm

from vidagent.config import Settings
from vidagent.errors import VidagentError
from vidagent.eval.metrics import localization_correct, open_ended_correct
from vidagent.session import Session

DEFAULT_QA = Path(__file__).resolve().parents[2] / "shared" / "data" / "qa" / "dev.jsonl"


def score(item: dict, answer: dict) -> bool:
    if item["choices"]:
        return answer["choice_index"] == item["answer_index"]
    if item["type"] == "localization":
        return localization_correct(answer["answer"], item["span_s"])
    return open_ended_correct(answer["answer"], item["answer"], item.get("accept", []))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qa", type=Path, default=DEFAULT_QA)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--model", help="local model name (default from settings)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "ask_dev.jsonl")
    args = parser.parse_args()

    items = [json.loads(line) for line in args.qa.read_text().splitlines() if line.strip()]
    items = items[: args.limit] if args.limit else items
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    if args.out.exists():
        done = {r["id"]: r for r in map(json.loads, args.out.read_text().splitlines()) if r.get("id")}
    settings = Settings.from_env()
    if args.model:
        settings = settings.with_llm(model=args.model)

    results = [done[i["id"]] for i in items if i["id"] in done]
    with Session(settings) as session, args.out.open("a") as sink:
        bar = tqdm([i for i in items if i["id"] not in done], desc="dev questions", unit="q")
        for item in bar:
            started = time.perf_counter()
            video = args.qa.parent.parent / item["video"]
            try:
                answer = session.ask(video, item["question"], item["choices"]).to_dict()
                error = None
            except VidagentError as failure:
                answer, error = {"answer": "", "choice_index": None, "usage": {}}, str(failure)
            row = {
                "id": item["id"], "type": item["type"], "multiple_choice": bool(item["choices"]),
                "correct": error is None and score(item, answer), "prediction": answer["answer"],
                "choice_index": answer["choice_index"], "usage": answer["usage"],
                "wall_s": round(time.perf_counter() - started, 2), "error": error,
                "steps": [s["action"] for s in answer.get("trace", [])],
            }
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            results.append(row)
            bar.set_postfix(acc=f"{sum(r['correct'] for r in results) / len(results):.2f}")
    print(summary(results))
    return 0


def summary(results: list[dict]) -> str:
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in results:
        groups[row["type"]].append(row)
        groups["mc" if row["multiple_choice"] else "open"].append(row)
        groups["all"].append(row)
    lines = ["| group | n | accuracy | LLM calls/q | prompt tok/q | completion tok/q | wall s/q |",
             "|---|---|---|---|---|---|---|"]
    for name in sorted(groups, key=lambda g: (g != "all", g)):
        rows = groups[name]
        n = len(rows)
        mean = lambda key: sum(r["usage"].get(key, 0) for r in rows) / n  # noqa: E731
        lines.append(f"| {name} | {n} | {sum(r['correct'] for r in rows) / n:.3f} | {mean('llm_calls'):.1f} | "
                     f"{mean('prompt_tokens'):.0f} | {mean('completion_tokens'):.0f} | "
                     f"{sum(r['wall_s'] for r in rows) / n:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
