"""``vidagent import``: bring memories into the library without indexing a video.

    vidagent import CAPTIONS [--format llovi|videoagent|jsonl|csv] [--namespace NAME] [--captioner NAME]
                             [--only IDS_OR_QUESTIONS_FILE] [--json]
    vidagent import PACK                 (a memory pack written by `vidagent export`)

CAPTIONS is a caption set as a published system released it (a file, a folder, or a zip); each of
its videos becomes a memory named ``NAMESPACE:<video id>`` (see ``vidagent.memory.caption_import``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Callable

from vidagent.config import Settings
from vidagent.errors import VidagentError
from vidagent.memory.caption_formats import FORMATS, CaptionFormatError


def add_import_parser(subparsers: Any, settings_of: Callable[[argparse.Namespace], Settings]) -> None:
    parser = subparsers.add_parser(
        "import", help="import released captions (or a memory pack) as memories without video files",
        description="Build one memory per video of a caption set that a published system released (LLoVi's "
                    "LaViLa JSON, VideoAgent's *_cap.json folder or zip, or a generic JSONL/CSV of video_id, "
                    "start_s, end_s, caption), or import a memory pack written by `vidagent export`. Importing "
                    "again rebuilds nothing; a killed import resumes.")
    parser.add_argument("path", help="caption file, folder or zip, or a memory pack")
    parser.add_argument("--format", choices=FORMATS, help="caption format (default: told from the file)")
    parser.add_argument("--namespace", help="memory ids become NAMESPACE:<video id> (default: the benchmark the "
                                            "file name names, egoschema or nextqa)")
    parser.add_argument("--captioner", help="who wrote the captions (default: the format's known release)")
    parser.add_argument("--only", metavar="FILE",
                        help="import only the videos this file names: one id a line, or a benchmark question file "
                             "(EgoSchema questions.json, NExT-QA csv)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=lambda args: _cmd_import(args, settings_of(args)))


def _cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    from vidagent.memory.caption_import import ImportOptions, import_captions
    from vidagent.memory.packs import is_pack

    path = Path(args.path).expanduser()
    if is_pack(path):
        from vidagent.pack_cli import import_pack_command

        return import_pack_command(path, settings)
    from vidagent.memory.store import Library
    from vidagent.perception.suite import text_embedder

    options = ImportOptions(format=args.format, namespace=args.namespace, captioner=args.captioner,
                            only=_wanted_videos(Path(args.only)) if args.only else None)
    embedder = text_embedder(settings)
    try:
        with Library(settings.library_path) as library:
            report = import_captions(library, embedder, path, options, progress=not args.quiet)
    finally:
        close = getattr(embedder, "close", None)
        if callable(close):
            close()
    if report.imported:
        from vidagent.memory.library_search import refresh_search_index

        refresh_search_index(settings, progress=not args.quiet)
    if args.json:
        print(json.dumps({"source": str(report.source), "format": report.format, "namespace": report.namespace,
                          "imported": report.imported, "unchanged": report.unchanged, "captions": report.captions,
                          "seconds": round(report.seconds, 2), "library": str(settings.library_path)}, indent=2))
    else:
        print(f"{report.source.name} ({report.format}): {len(report.imported)} memories imported, "
              f"{len(report.unchanged)} unchanged, {report.captions} captions, in {report.seconds:.1f} s; "
              f"ask with e.g. `vidagent ask {(report.imported + report.unchanged)[0]} \"QUESTION\"`")
    return 0


def _wanted_videos(path: Path) -> set[str]:
    """The video ids a file names: a benchmark question file's videos, or one id a line."""
    if not path.is_file():
        raise CaptionFormatError(f"{path}: no such file (--only takes a file of video ids or a question file)")
    if path.suffix.lower() in (".json", ".csv", ".tsv", ".jsonl"):
        from vidagent.eval.loaders import load_dataset

        try:
            return {item.video for item in load_dataset(path).items}
        except VidagentError as error:
            raise CaptionFormatError(f"{path}: not a question file vidagent reads ({error})") from None
    return {line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}
