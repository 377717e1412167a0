"""``vidagent search QUERY [--video V] [--kind K] [--category C] [--since WHEN] [--limit N] [--json]
[--thumbnails DIR]``: ranked moments across every memory of the library; ``--rebuild`` makes the index anew."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

from vidagent.config import Settings
from vidagent.errors import OutputError, VideoError
from vidagent.memory.library_search import LibrarySearch, since_time, video_ids_for
from vidagent.memory.search_index import SearchFilters, SearchIndex
from vidagent.memory.search_moments import Moment
from vidagent.memory.search_lines import LINE_KINDS

LINES_SHOWN = 2  # lines of a moment printed under it (--json has them all)


def add_search_parser(sub: argparse._SubParsersAction, settings: Callable[[argparse.Namespace], Settings]) -> None:
    search = sub.add_parser(
        "search", help="find moments across every video of the library (objects, on-screen text, speech, scenes)",
        description="Rank the moments of every memory in the library for QUERY: by meaning (text embeddings), by "
                    "words (full text) and by the object categories QUERY names, fused. The index follows the "
                    "library: videos indexed, imported or removed since the last search are taken in first.")
    search.add_argument("query", nargs="?", metavar="QUERY", help="what to find, e.g. dog, 'a red car', 'sail 42'")
    search.add_argument("--video", action="append", metavar="V",
                        help="only this video: its id, path or file name (repeatable)")
    search.add_argument("--kind", action="append", choices=LINE_KINDS, help="only lines of this kind (repeatable)")
    search.add_argument("--category", action="append", metavar="C",
                        help="only lines of objects of this category, e.g. dog (repeatable)")
    search.add_argument("--since", metavar="WHEN", help="only videos added since WHEN: a date, a time or an age "
                                                        "(12h, 3d, 2w)")
    search.add_argument("-n", "--limit", type=int, default=10, help="moments to list (default 10)")
    search.add_argument("--json", action="store_true", help="one JSON object: the moments with every line")
    search.add_argument("--thumbnails", metavar="DIR", type=Path,
                        help="write a JPEG of each moment's middle frame into DIR (videos with a file)")
    search.add_argument("--rebuild", action="store_true", help="make the index anew from the library first")
    search.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    search.set_defaults(run=lambda args: run_search(args, settings(args)))


def run_search(args: argparse.Namespace, settings: Settings) -> int:
    if not args.query and not args.rebuild:
        raise ValueError("give what to search for: vidagent search QUERY (or --rebuild to make the index anew)")
    if args.rebuild:  # made anew from the library, even from a damaged file
        SearchIndex.remove(settings.search_index_path)
    with LibrarySearch.open(settings) as search:
        if args.rebuild:
            report = search.sync(progress=not args.quiet, rebuild=True)
            print(f"search index rebuilt: {len(report.updated)} videos, {report.lines} lines in {report.seconds:.1f} s",
                  file=sys.stderr)
            if not args.query:
                return 0
        filters = SearchFilters(videos=video_ids_for(search.library, args.video or ()),
                                kinds=tuple(args.kind or ()), categories=tuple(args.category or ()),
                                since=since_time(args.since) if args.since else "")
        found = search.search(args.query, filters, limit=args.limit, progress=not args.quiet)
    thumbnails = write_thumbnails(found, args.thumbnails) if args.thumbnails else {}
    if args.json:
        print(json.dumps({"query": args.query, "moments": [
            {**moment.to_dict(), **({"thumbnail": str(thumbnails[i])} if i in thumbnails else {})}
            for i, moment in enumerate(found)]}, indent=2, ensure_ascii=False))
        return 0
    if not found:
        print("nothing found")
        return 0
    for rank, moment in enumerate(found, 1):
        print(moment_heading(rank, moment) + (f"  [{thumbnails[rank - 1]}]" if rank - 1 in thumbnails else ""))
        for line in moment.distinct_lines(LINES_SHOWN):
            print(f"      {line.kind:<7} {line.text[:110]}")
    return 0


def when_text(moment: Moment) -> str:
    """Where in the video: its spans (``0.0-3.5, 6.0-8.0 s``)."""
    return ", ".join(f"{a:.1f}" if abs(b - a) < 0.05 else f"{a:.1f}-{b:.1f}" for a, b in moment.spans) + " s"


def moment_heading(rank: int, moment: Moment) -> str:
    name = Path(moment.path).name if moment.path else moment.video_id
    return f"{rank:>2}. {name}  {when_text(moment)}  ({', '.join(moment.kinds)}; by {', '.join(moment.matched_by)})"


def write_thumbnails(found: list[Moment], folder: Path) -> dict[int, Path]:
    """A JPEG of each moment's middle frame in ``folder`` (moments of videos without a readable file left out)."""
    from vidagent.video.thumbnail import frame_jpeg
    from vidagent.video.video import Video

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputError(folder, f"cannot make the folder ({error.strerror})") from error
    written: dict[int, Path] = {}
    for rank, moment in enumerate(found):
        if not moment.path or not Path(moment.path).is_file():
            continue
        try:
            data = frame_jpeg(Video(moment.path), (moment.start_s + moment.end_s) / 2)
        except VideoError:
            continue
        if data is not None:
            target = folder / f"{rank + 1:02d}-{Path(moment.path).stem}-{moment.start_s:.1f}.jpg"
            target.write_bytes(data)
            written[rank] = target
    return written
