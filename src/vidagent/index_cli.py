"""``vidagent index PATH... [--stage NAME ...] [--workers N] [--ray [ADDRESS]]``: build the memory of
videos and folders of videos ahead of questions, skipping what is already indexed."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Callable

from tqdm import tqdm

from vidagent.config import Settings
from vidagent.memory.builder import ALL_STAGES
from vidagent.memory.library_index import IndexOutcome, index_videos, plan_index
from vidagent.memory.library_search import refresh_search_index
from vidagent.memory.store import Library
from vidagent.memory.video_memory import VideoMemory
from vidagent.video.video import Video

STAGE_CHOICES = (*ALL_STAGES, "all")


def add_index_parser(sub: argparse._SubParsersAction, settings: Callable[[argparse.Namespace], Settings]) -> None:
    index = sub.add_parser("index", help="build the memory of videos (files or folders) ahead of questions",
                           description="Build the memory of each video given and of each video file under each "
                                       "folder given. Videos already indexed are skipped; a killed run resumes.")
    index.add_argument("paths", nargs="*", metavar="PATH", help="a video file or a folder of videos")
    index.add_argument("--list", action="store_true",
                       help="list the library's memories instead (videos indexed, and memories imported from captions)")
    index.add_argument("--stage", action="append", choices=STAGE_CHOICES,
                       help="build only this stage and what it needs (repeatable; default: all)")
    index.add_argument("--workers", type=int, default=None, metavar="N",
                       help="index N videos at once on local processes (with --ray: N Ray actors)")
    index.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                       help="index on Ray: a cluster address, or none for $RAY_ADDRESS or a local instance")
    index.add_argument("--json", action="store_true",
                       help="one JSON object per video on stdout (status, seconds, what was built, what models cost)")
    index.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    index.set_defaults(run=lambda args: run_index(args, settings(args)))


def run_index(args: argparse.Namespace, settings: Settings) -> int:
    if args.list:
        return list_memories(settings)
    if not args.paths:
        raise ValueError("give a video or a folder of videos to index, or --list to see the library")
    stages = ALL_STAGES if not args.stage or "all" in args.stage else tuple(args.stage)
    if args.workers is not None and args.workers < 1:
        raise ValueError("--workers must be at least 1")
    plan = plan_index(args.paths, settings, stages)
    for outcome in plan.skipped:
        _report(outcome, settings, as_json=args.json)
    total_s = sum(job.duration_s for job in plan.jobs)
    in_process = args.ray is None and (args.workers or 1) == 1
    started = time.perf_counter()
    outcomes: list[IndexOutcome] = []
    with tqdm(total=round(total_s, 1), unit="video s", desc=f"indexing {len(plan.jobs)} videos",
              disable=args.quiet or not plan.jobs or (in_process and len(plan.jobs) == 1), position=1 if in_process else 0,
              bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} video s [{elapsed}<{remaining}]") as bar:
        for outcome in index_videos(plan.jobs, settings, stages, workers=args.workers, ray=args.ray is not None,
                                    ray_address=args.ray or None, progress=not args.quiet):
            outcomes.append(outcome)
            bar.update(outcome.duration_s)
            _report(outcome, settings, as_json=args.json)
    wall = time.perf_counter() - started
    built = [o for o in outcomes if o.status == "built"]
    if built:
        refresh_search_index(settings, progress=not args.quiet)
    failed = [o for o in [*plan.skipped, *outcomes] if o.status == "failed"]
    if len(plan.jobs) > 1:
        video_s = sum(o.duration_s for o in built)
        print(f"indexed {len(built)} videos ({video_s:.0f} s of video) in {wall:.1f} s"
              f" ({video_s / wall if wall else 0:.2f} video s per s); "
              f"{len(plan.skipped) - sum(o.status == 'failed' for o in plan.skipped)} skipped, {len(failed)} failed", file=sys.stderr if args.json else sys.stdout)
    return 1 if failed else 0


def list_memories(settings: Settings) -> int:
    """One line per memory in the library: id, duration, stages, and its file or where its captions came from."""
    if not settings.library_path.is_file():
        print(f"no library at {settings.library_path} yet: index a video or import captions first")
        return 0
    with Library(settings.library_path) as library:
        rows = library.video_rows()
    for row in rows:
        origin = f"captions by {row['captioner']} ({row['path']})" if row["captioner"] else row["path"]
        print(f"{row['video_id']}\t{row['duration_s']:.1f} s\t{row['stages'] or 'nothing built'}\t{origin}")
    print(f"{len(rows)} memories in {settings.library_path}", file=sys.stderr)
    return 0


def _report(outcome: IndexOutcome, settings: Settings, *, as_json: bool = False) -> None:
    """One line for a video: what its memory holds and what its models cost, or why it failed (on stderr);
    ``as_json``: one JSON object on stdout instead."""
    record: dict[str, object] = {"path": outcome.path, "status": outcome.status,
                                 "duration_s": round(outcome.duration_s, 3), "seconds": round(outcome.seconds, 3),
                                 "message": outcome.message, "usage": outcome.usage}
    if outcome.status == "failed":
        if as_json:
            tqdm.write(json.dumps(record), file=sys.stdout)
        else:
            tqdm.write(f"vidagent: error: {outcome.message}{_usage_words(outcome.usage)}", file=sys.stderr)
        return
    video = Video(outcome.path)
    with Library(settings.library_path) as library:
        memory = VideoMemory(video, library)
        info = video.info
        record.update(video_id=memory.video_id, stages=list(memory.stages), segments=memory.segment_count,
                      frames=len(memory.frames), objects=len(memory.objects))
        if as_json:
            tqdm.write(json.dumps(record), file=sys.stdout)
            return
        built = ", ".join(memory.stages)
        note = f" ({outcome.message})" if outcome.status == "skipped" else \
            f" (built in {outcome.seconds:.1f} s, {info.duration_s / outcome.seconds:.2f}x real time)"
        tqdm.write(f"{info.path}: {info.duration_s:.1f} s, id {memory.video_id}; stages: {built}; "
                   f"{memory.segment_count} segments, {len(memory.frames)} frames described, "
                   f"{len(memory.objects)} objects{note}{_usage_words(outcome.usage)}", file=sys.stdout)


def _usage_words(usage: dict[str, dict[str, float]]) -> str:
    """``; captioner: 12 requests (3 cached), 4100 tokens, 31.2 s, $0.0012`` for each metered model that worked."""
    parts = []
    for role, counts in usage.items():
        if not counts.get("requests") and not counts.get("cached"):
            continue
        tokens = int(counts.get("prompt_tokens", 0) + counts.get("completion_tokens", 0))
        cost = f", ${counts['cost']:.4f}" if "cost" in counts else ""
        parts.append(f"; {role}: {int(counts['requests'])} requests ({int(counts['cached'])} cached), "
                     f"{tokens} tokens, {counts['seconds']:.1f} s{cost}")
    return "".join(parts)
