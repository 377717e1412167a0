"""``vidagent export VIDEO [-o PACK]`` writes a video's memory as a portable pack; ``vidagent import
PACK`` (through ``import_pack_command``) reads one into the library. See ``vidagent.memory.packs``.

VIDEO is a video file (its content names it), a stored id (``egoschema:0074f737-...``) or the start
of one. PACK is a file, or a folder to write ``<video>-<pack id>.vidpack`` into (the default: here).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any, Callable

from vidagent.config import Settings
from vidagent.memory.library_search import refresh_search_index
from vidagent.memory.packs import export_pack, import_pack, resolve_video_id
from vidagent.memory.store import Library


def add_export_parser(subparsers: Any, settings_of: Callable[[argparse.Namespace], Settings]) -> None:
    parser = subparsers.add_parser(
        "export", help="write a video's memory as a portable pack (vidagent import PACK reads it)",
        description="Write every stage of a video's memory, with its configuration, into one pack file named "
                    "by its content; `vidagent import PACK` checks it and adds it to another library.")
    parser.add_argument("video", metavar="VIDEO", help="a video file, a stored video id, or the start of one")
    parser.add_argument("-o", "--output", default=".", metavar="PACK",
                        help="the pack file to write, or a folder for <video>-<pack id>.vidpack (default: here)")
    parser.set_defaults(run=lambda args: export_command(args.video, args.output, settings_of(args)))


def export_command(video: str, output: str, settings: Settings) -> int:
    """Export ``video``'s memory to ``output`` (a file, or a folder: one that exists or ends in a slash)."""
    started = time.perf_counter()
    out = Path(output).expanduser()
    if output.endswith(("/", os.sep)):
        out.mkdir(parents=True, exist_ok=True)
    with Library(settings.library_path) as library:
        video_id = resolve_video_id(library, video)
        path = export_pack(library, video_id, out)
        stages = ", ".join(library.stage_names(video_id))
    size = path.stat().st_size
    print(f"{path}: memory of {video_id} (stages: {stages}), {_size(size)}, "
          f"in {time.perf_counter() - started:.2f} s")
    return 0


def import_pack_command(path: str | Path, settings: Settings) -> int:
    """Import the pack at ``path`` into the settings' library and say what it did (``vidagent import``)."""
    with Library(settings.library_path) as library:
        result = import_pack(library, Path(path))
    if result.status == "unchanged":
        print(f"{path}: {result.video_id} unchanged (stages {', '.join(result.stages)} already in the library)")
    else:
        kept = [stage for stage in result.stages if stage not in result.written]
        note = f"; {', '.join(kept)} already there" if kept else ""
        print(f"{path}: imported {result.video_id} (stages {', '.join(result.written)}{note}), "
              f"{result.rows} rows in {result.seconds:.2f} s")
        refresh_search_index(settings)
    return 0


def _size(count: int) -> str:
    return f"{count / 1e6:.1f} MB" if count >= 1e6 else f"{count / 1e3:.1f} kB"
