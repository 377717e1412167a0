"""``vidagent eval``: run a planner over a benchmark, or compare finished runs.

    vidagent eval DATASET_FILE [--videos DIR | --memories NAMESPACE] [--planner NAME] [--planner-option K=V ...]
                  [--limit N] [--workers N] [--ray [ADDRESS]] [--out DIR] [--judge] [--format NAME]
    vidagent eval --compare RUN_DIR RUN_DIR ... [--out DIR]
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from vidagent.eval.errors import EvalUsageError

DEFAULT_COMPARE_OUT = Path("eval-runs") / "compare"


def add_planner_options(parser: argparse.ArgumentParser, names: Sequence[str], default: str | None = "react",
                        default_note: str = "react") -> None:
    """``--planner NAME`` and ``--planner-option KEY=VALUE``, shared by ``vidagent ask`` and ``eval``."""
    parser.add_argument("--planner", default=default,
                        help=f"planner: {', '.join(names)} or package.module:Class (default {default_note})")
    parser.add_argument("--planner-option", action="append", metavar="KEY=VALUE",
                        help="a planner setting, e.g. n=4 or strategy=dfs for mcts (repeatable)")


def add_eval_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``eval`` command to the ``vidagent`` parser's subcommands."""
    from vidagent.eval.loaders import LOADERS
    from vidagent.agent.learning.keeper import MODES as EXPERIENCE_MODES
    from vidagent.agent.planner import default_description, planner_names

    parser = subparsers.add_parser(
        "eval", help="evaluate a planner on a benchmark, or compare runs",
        description="Answer every question of an annotation file, score it and write a report. Results stream to "
                    "OUT/results.jsonl; rerunning the same command resumes where a run stopped.",
        epilog="formats: " + "; ".join(f"{name} ({loader.description})" for name, loader in LOADERS.items()),
    )
    parser.add_argument("dataset", nargs="?", help="annotation file (format detected from its content)")
    parser.add_argument("--videos", action="append", metavar="DIR",
                        help="folder holding the videos, found by id/name anywhere below it (repeatable; "
                             "default: the annotation file's folder)")
    parser.add_argument("--memories", metavar="NAMESPACE",
                        help="answer from memories imported from captions (`vidagent import`) as NAMESPACE:<video id>, "
                             "e.g. egoschema (default: the benchmark's, when no --videos is given and the library "
                             "holds it)")
    parser.add_argument("--format", choices=sorted(LOADERS), help="annotation format (default: detected)")
    parser.add_argument("--id-map", metavar="FILE", help="JSON/CSV map from video id to path (e.g. NExT-QA's "
                                                        "map_vid_vidorID.json; found automatically beside the data)")
    add_planner_options(parser, planner_names(), default=None,
                        default_note=f"as vidagent ask: {default_description()}")
    parser.add_argument("--limit", type=int, metavar="N", help="only the first N questions")
    parser.add_argument("--budget", metavar="calls=N,tokens=T,seconds=S,frames=F",
                        help="bound each question's model work; a planner that spends it answers with what it has")
    parser.add_argument("--check", action=argparse.BooleanOptionalAction, default=None,
                        help="check each answer against the evidence it cites; an unsupported one abstains, its "
                             "guess still scored (default: off, or on with VIDAGENT_CHECK=1)")
    parser.add_argument("--workers", type=int, metavar="N",
                        help="parallel workers, each with its own models (default 1; with --ray, one per CPU)")
    parser.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                        help="run on Ray: a cluster address, or none for $RAY_ADDRESS / a local instance")
    parser.add_argument("--out", metavar="DIR", help="run folder (default eval-runs/<dataset>-<planner>; "
                                                     "for --compare, eval-runs/compare)")
    parser.add_argument("--judge", action="store_true", help="also grade open-ended answers with the LLM")
    parser.add_argument("--teach", action="store_true",
                        help="give learning planners (peil) each known answer to check theirs against and keep what "
                             "worked as examples; such a run's accuracy is not a measurement (it saw the answers)")
    parser.add_argument("--experience", choices=EXPERIENCE_MODES,
                        help="memory across questions (default: none, or $VIDAGENT_EXPERIENCE); a run keeps its own, "
                             "emptied when it starts afresh")
    parser.add_argument("--keep-experience", action="store_true",
                        help="replay and add to the user's experience instead of the run's own")
    parser.add_argument("--no-clips", action="store_true",
                        help="ask about whole videos even where the dataset names a part (STAR, TVQA)")
    parser.add_argument("--compare", nargs="+", metavar="RUN_DIR", help="compare finished runs side by side")
    parser.add_argument("--model", help="local model name or endpoint model id")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    parser.add_argument("--api-key", help="API key for the endpoint")
    parser.add_argument("--no-cache", action="store_true", help="do not reuse cached LLM responses")
    parser.add_argument("--threads", type=int, metavar="N",
                        help="CPU threads per local LLM (default: all CPUs; with several workers, CPUs / workers)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=_cmd_eval)
    return parser


def _cmd_eval(args: argparse.Namespace) -> int:
    from vidagent.eval.report import write_comparison

    if args.compare:
        if args.dataset:
            raise EvalUsageError("give either a dataset file or --compare RUN_DIR ..., not both")
        paths = write_comparison([Path(p) for p in args.compare], Path(args.out) if args.out else DEFAULT_COMPARE_OUT)
        print(paths["markdown"].read_text(encoding="utf-8"))
        print(" ".join(f"{kind}: {path}" for kind, path in paths.items()))
        return 0
    if not args.dataset:
        raise EvalUsageError("give an annotation file to evaluate, or --compare RUN_DIR ...")
    from vidagent.config import Settings
    from vidagent.eval.runner import RunConfig, run_eval

    settings = Settings.from_env().with_overrides(
        home=getattr(args, "home", None), base_url=args.base_url, model=args.model, api_key=args.api_key,
        cache=False if args.no_cache else None)
    planner, options = chosen_planner(args.planner, args.planner_option, settings)
    config = RunConfig(
        dataset=Path(args.dataset), videos=tuple(Path(v) for v in args.videos or ()), format=args.format,
        id_map=Path(args.id_map) if args.id_map else None, planner=planner,
        planner_options=tuple((key, str(value)) for key, value in options.items()), limit=args.limit,
        workers=args.workers, ray=args.ray is not None, ray_address=args.ray or None,
        out=Path(args.out) if args.out else None, judge=args.judge, cut_clips=not args.no_clips,
        progress=not args.quiet, teach=args.teach, experience=args.experience,
        keep_experience=args.keep_experience, memories=args.memories, budget=args.budget,
    )
    if args.check is not None:
        settings = replace(settings, check=args.check)
    threads = args.threads
    if threads is None and (args.workers or 1) > 1 and args.ray is None:
        threads = max(1, (os.cpu_count() or 1) // args.workers)  # local workers share this machine's CPUs
    if threads is not None:
        if threads < 1:
            raise EvalUsageError("--threads must be at least 1")
        settings = settings.with_llm(threads=threads)
    result = run_eval(config, settings)
    print(result.reports["markdown"].read_text(encoding="utf-8"))
    print(" ".join(f"{kind}: {path}" for kind, path in result.reports.items()) + f" results: {result.out / 'results.jsonl'}")
    return 0


def chosen_planner(name: str | None, raw_options: Sequence[str] | None, settings: Any) -> tuple[str, dict[str, Any]]:
    """The planner a run uses and its options: the one named, or what ``vidagent ask`` answers one video with for
    the model in use (with the embedded model, caption_only's five scored lines; react with an endpoint)."""
    from vidagent.agent.planner import default_choice, parse_options

    options = parse_options(raw_options)
    if name is not None:
        return name, options
    return default_choice(["video"], options, embedded=settings.llm.backend == "local")
