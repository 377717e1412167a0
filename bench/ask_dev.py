"""Benchmark planners side by side on the checked dev question set: accuracy per type and cost per question.

    .venv/bin/python bench/ask_dev.py [--planner react --planner caption_only --planner "mcts n=4"] [--limit N]
                                      [--model NAME] [--out bench/results/eval_dev] [--cache] [--threads N]
                                      [--experience none|semantic|procedural|all]

A planner is a name followed by its options (``"mcts n=4 strategy=dfs"``). For search planners
(answers with several candidates and a first chain), the report adds how often the final answer
differs from the first chain's answer and how many candidates a question had.

Runs ``vidagent eval`` (the resumable runner in ``vidagent.eval``) once per planner on the same questions,
after indexing every video first so no planner pays for indexing, with the LLM response cache off so every
call is measured. Each run's folder holds results.jsonl (one row per question, with its trace),
summary.md and accuracy.png; the comparison is written to OUT/compare.md and OUT/compare.png and printed.
A rerun resumes unfinished runs; delete OUT to measure again.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tqdm import tqdm

from vidagent.agent.planner import parse_options
from vidagent.config import Settings
from vidagent.eval.loaders import load_dataset
from vidagent.eval.report import write_comparison
from vidagent.eval.runner import RunConfig, resolve_videos, run_eval
from vidagent.session import Session

DEFAULT_QA = Path(__file__).resolve().parents[2] / "shared" / "data" / "qa" / "dev.jsonl"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qa", type=Path, default=DEFAULT_QA)
    parser.add_argument("--planner", action="append", help="planners to compare (default: react, caption_only)")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--model", help="local model name (default from settings)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "eval_dev")
    parser.add_argument("--cache", action="store_true", help="reuse cached LLM responses (cost is then not measured)")
    parser.add_argument("--experience", choices=("none", "semantic", "procedural", "all"), default="none",
                        help="memory across questions (default none: each planner measured on its own)")
    parser.add_argument("--threads", type=int, help="LLM threads (default: all CPUs; 1 is faster on a busy machine)")
    args = parser.parse_args()

    settings = Settings.from_env().with_llm(cache=args.cache)
    if args.model:
        settings = settings.with_llm(model=args.model)
    if args.threads:
        settings = settings.with_llm(threads=args.threads)
    planners = [_planner_spec(text) for text in args.planner or ["react", "caption_only"]]

    base = RunConfig(dataset=args.qa, limit=args.limit)
    dataset = load_dataset(args.qa)
    dataset = type(dataset)(dataset.source, dataset.format, dataset.items[: args.limit] if args.limit else dataset.items)
    items, _ = resolve_videos(dataset, base)
    with Session(settings) as session:
        for video in tqdm(sorted({item.video_path for item in items if item.video_path}), desc="indexing", unit="video"):
            session.index(video, progress=False)

    folders = []
    for name, options in planners:
        label = "-".join([name] + [f"{k}_{v}" for k, v in options]
                         + ([f"experience_{args.experience}"] if args.experience != "none" else []))
        config = RunConfig(dataset=args.qa, limit=args.limit, planner=name, planner_options=options,
                           out=args.out / label, experience=args.experience)
        result = run_eval(config, settings)
        folders.append(result.out)
        for summary in (_search_summary(result.rows), _frames_summary(result.rows), _learner_summary(result.rows),
                        _experience_summary(result.rows)):
            if summary:
                print(f"{label}: {summary}")
    paths = write_comparison(folders, args.out)
    print(paths["markdown"].read_text(encoding="utf-8"))
    print(" ".join(f"{kind}: {path}" for kind, path in paths.items()))
    return 0


def _planner_spec(text: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    name, *pairs = text.split()
    return name, tuple(parse_options(pairs).items())


def _frames_summary(rows: list[dict]) -> str:
    """For planners that look at frames themselves (TraveLER): frames and windows viewed per question."""
    viewed = [r for r in rows if "frames_viewed" in (r.get("artifacts") or {})]
    if not viewed:
        return ""
    frames = sum(len(r["artifacts"]["frames_viewed"]) for r in viewed) / len(viewed)
    windows = sum(len(r["artifacts"]["windows"]) for r in viewed) / len(viewed)
    return f"{frames:.1f} frames viewed per question ({windows:.1f} windows besides the 5 opening frames)"


def _experience_summary(rows: list[dict]) -> str:
    """With memory across questions: how many questions had something replayed, and how many answers
    passed validation (and so were kept as valid memories)."""
    memory = [[s for s in r.get("trace") or [] if s["type"] == "memory"] for r in rows]
    if not any(memory):
        return ""
    replayed = sum(1 for steps in memory if any(s["action"] == "replayed" for s in steps))
    kept = sum(1 for steps in memory if any(s["action"] == "stored" and "[rejected" not in s["text"] for s in steps))
    rejected = sum(1 for steps in memory if any("[rejected" in s["text"] for s in steps))
    right_kept = sum(1 for r, steps in zip(rows, memory)
                     if r.get("correct") and any(s["action"] == "stored" and "[rejected" not in s["text"] for s in steps))
    return (f"experience replayed for {replayed} of {len(rows)} questions; {kept} answers kept as valid "
            f"({right_kept} of them right), {rejected} rejected by validation")


def _learner_summary(rows: list[dict]) -> str:
    """For a planner with a Learner (PEIL): retries per question, how often a retry changed the answer and
    whether that helped."""
    checked = [r for r in rows if (r.get("artifacts") or {}).get("checks")]
    if not checked:
        return ""
    retries = sum(len(r["artifacts"]["checks"]) - 1 for r in checked)
    changed = [r for r in checked if r["artifacts"]["checks"][0]["answer"] != r["prediction"]]
    passed_first = sum(1 for r in checked if r["artifacts"]["checks"][0]["passed"])
    return (f"{retries / len(checked):.2f} learner retries per question; the first attempt passed its check in "
            f"{passed_first} of {len(checked)}; a retry changed the answer in {len(changed)} of {len(checked)} "
            f"({sum(1 for r in changed if r.get('correct'))} of those final answers right)")


def _search_summary(rows: list[dict]) -> str:
    """For a search planner: how often the final answer is not the first chain's, and candidates per question."""
    searched = [r for r in rows if (r.get("artifacts") or {}).get("search")]
    if not searched:
        return ""
    differs = answered_first = 0
    for row in searched:
        first = row["artifacts"]["search"]["first_answer"]
        if first is None:
            continue
        answered_first += 1
        if row["choices"]:
            differs += first["choice_index"] != row["choice_index"]
        else:
            differs += " ".join(first["text"].lower().split()) != " ".join(row["prediction"].lower().split())
    candidates = sum(len(r["candidates"]) for r in searched) / len(searched)
    forced = sum(1 for r in searched if r["artifacts"]["search"]["first_answer"] is None and
                 all(it["failed"] for it in r["artifacts"]["search"]["iterations"]))
    return (f"final answer differs from the first chain's in {differs} of {answered_first} questions whose first "
            f"chain answered; {candidates:.2f} candidates per question; {forced} of {len(searched)} questions "
            "had no chain answer (forced)")


if __name__ == "__main__":
    sys.exit(main())
