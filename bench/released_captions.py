"""Released caption sets as memories: what importing one costs, and what a question costs on one core vs two.

    .venv/bin/python bench/released_captions.py import [--captions FILE ...] [--only QUESTIONS_FILE]
    .venv/bin/python bench/released_captions.py threads [--questions FILE] [--planner NAME] [--limit N]

``import`` imports each caption set into a fresh library (in a temporary folder) and reports seconds,
captions per second, the library's size and bytes per caption, then imports it again (nothing to rebuild).
Default: LLoVi's EgoSchema captions and VideoAgent's NExT-QA captions in ../shared/data/benchmarks, each
limited to its development split's videos (``--only``; ``--all`` imports every video).

``threads`` imports the questions' memories once, then answers the same questions with the embedded model on
1 and on 2 CPU threads, one run after the other, LLM cache off, and prints seconds per question side by side
(run it on an otherwise idle machine: llama.cpp's threads run in lock-step).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from vidagent.config import Settings
from vidagent.eval.runner import RunConfig, run_eval
from vidagent.memory.caption_import import ImportOptions, import_captions
from vidagent.memory.store import Library
from vidagent.perception.suite import text_embedder

BENCHMARKS = Path(__file__).resolve().parents[2] / "shared" / "data" / "benchmarks"
SETS = {  # caption set -> its development split's question file
    BENCHMARKS / "egoschema" / "lavila_subset.json": BENCHMARKS / "egoschema" / "questions_dev.json",
    BENCHMARKS / "nextqa" / "nextqa_allcaps_1fps.zip": BENCHMARKS / "nextqa" / "val_dev.csv",
}


def _videos_of(questions: Path, limit: int | None = None) -> set[str]:
    """The videos the questions ask about (the first ``limit`` questions only, when given)."""
    from vidagent.eval.loaders import load_dataset

    return {item.video for item in load_dataset(questions).items[:limit]}


def _library_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def bench_import(captions: list[Path], all_videos: bool) -> None:
    settings = Settings.from_env()
    embedder = text_embedder(settings)
    print("| caption set | videos | captions | import s | captions/s | library MB | bytes/caption | again s |")
    print("|---|---|---|---|---|---|---|---|")
    for source in captions:
        only = None if all_videos or source not in SETS else _videos_of(SETS[source])
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "library.sqlite"
            with Library(path) as library:
                report = import_captions(library, embedder, source, ImportOptions(only=only), progress=True)
                library.rows("PRAGMA wal_checkpoint(TRUNCATE)")
                again = import_captions(library, embedder, source, ImportOptions(only=only))
            size = _library_bytes(path)
            print(f"| {source.name} | {report.videos} | {report.captions} | {report.seconds:.1f} | "
                  f"{report.captions / report.seconds:.1f} | {size / 1e6:.1f} | {size / report.captions:.0f} | "
                  f"{again.seconds:.1f} |")


def bench_threads(questions: Path, planner: str, limit: int, out: Path) -> None:
    base = Settings.from_env()  # a fresh library and home in ``out``; the models stay where they are installed
    settings = replace(base, home=out / "home", models=base.models_dir, library=None)
    captions = next(c for c, q in SETS.items() if q.resolve() == questions.resolve())
    with Library(settings.library_path) as library:
        import_captions(library, text_embedder(settings), captions, ImportOptions(only=_videos_of(questions, limit)))
    seconds = {}
    for threads in (1, 2):
        run = run_eval(RunConfig(dataset=questions, planner=planner, limit=limit, out=out / f"threads{threads}",
                                 progress=True), settings.with_llm(threads=threads, cache=False))
        rows = run.rows
        seconds[threads] = sum(r["wall_s"] for r in rows) / len(rows)
    print(json.dumps({"planner": planner, "questions": limit, "seconds_per_question": seconds,
                      "two_over_one": round(seconds[1] / seconds[2], 2)}, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    imports = commands.add_parser("import")
    imports.add_argument("--captions", type=Path, action="append")
    imports.add_argument("--all", action="store_true", help="every video of each set, not only the dev split's")
    threads = commands.add_parser("threads")
    threads.add_argument("--questions", type=Path, default=BENCHMARKS / "egoschema" / "questions_dev.json")
    threads.add_argument("--planner", default="caption_only")
    threads.add_argument("--limit", type=int, default=5)
    threads.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="captions-threads-")))
    args = parser.parse_args()
    started = time.perf_counter()
    if args.command == "import":
        bench_import(args.captions or list(SETS), args.all)
    else:
        bench_threads(args.questions, args.planner, args.limit, args.out)
    print(f"(bench took {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
