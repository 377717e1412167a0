"""``vidagent clip | highlight | remove | frames | segment``: DoraemonGPT's utility tools and referring
object segmentation as commands, for people who want the result without asking a question.

vidagent clip VIDEO START END [-o OUT]          the START-END stretch (seconds) as an mp4, with its sound
vidagent highlight VIDEO OBJECT_ID [-o OUT]     the object's box, label and path drawn where it is seen
vidagent remove VIDEO OBJECT_ID [-o OUT]        the video with the object painted out
vidagent frames VIDEO START END [-o DIR] [--fps N] [--format jpg|png]   the frames as images
vidagent segment VIDEO EXPRESSION [-o DIR] [--json] [--no-model]   the object EXPRESSION refers to ("the black
                                                dog on the left"): its masks as PNG images, masks.json and overlay.mp4

VIDEO is a video file, or the id of an indexed video (or the start of one). OUT is the mp4 to write (or a
folder to write it into); without ``-o`` the output goes under the library's artifacts folder, named by
what made it, and the same request is answered with the file made before. Object ids are the object
memory's (``vidagent sql VIDEO "SELECT object_id, category, description FROM objects"`` lists them);
the object memory is built first when it is missing. The output's path is printed when it is done.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

from tqdm import tqdm

from vidagent.config import Settings
from vidagent.errors import VideoError
from vidagent.memory.packs import resolve_video_id
from vidagent.memory.store import Library
from vidagent.tools.edits import Edit, VideoEdits, object_track
from vidagent.video.editing import IMAGE_FORMATS, Progress
from vidagent.video.video import Video

VIDEO_HELP = "a video file, or an indexed video's id (or the start of one)"


def add_utility_parsers(sub: Any, settings_of: Callable[[argparse.Namespace], Settings]) -> None:
    def command(name: str, help: str, run: Callable[[argparse.Namespace, Settings], Edit]) -> argparse.ArgumentParser:
        parser = sub.add_parser(name, help=help, description=f"{help[0].upper()}{help[1:]}. Without -o the output "
                                "goes under the library's artifacts folder, named by content (made once).")
        parser.add_argument("video", metavar="VIDEO", help=VIDEO_HELP)
        parser.set_defaults(run=lambda args: _report(run(args, settings_of(args))))
        return parser

    def window(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("start", type=float, metavar="START", help="seconds from the start")
        parser.add_argument("end", type=float, metavar="END", help="seconds from the start")

    def output(parser: argparse.ArgumentParser, metavar: str, help: str) -> None:
        parser.add_argument("-o", "--output", metavar=metavar, default=None,
                            help=f"{help} (default: the library's artifacts folder)")
        parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")

    clip = command("clip", "cut the START-END stretch of a video into an mp4 (with its sound)", _clip)
    window(clip)
    output(clip, "OUT", "the mp4 file to write, or a folder to write it into")

    for name, help, run in (("highlight", "draw an object's box, label and path on the stretch it is seen in",
                             _highlight),
                            ("remove", "paint an object out of a video (OpenCV's inpainting over its boxes)", _remove)):
        parser = command(name, help, run)
        parser.add_argument("object_id", type=int, metavar="OBJECT_ID",
                            help="an object_id of the video's object memory (built first when missing)")
        output(parser, "OUT", "the mp4 file to write, or a folder to write it into")

    frames = command("frames", "save the frames of the START-END stretch as images", _frames)
    window(frames)
    output(frames, "DIR", "the folder to write the images into (new, or empty)")
    frames.add_argument("--fps", type=float, default=1.0, help="images a second (default 1)")
    frames.add_argument("--format", choices=IMAGE_FORMATS, default="jpg", help="image format (default jpg)")
    add_segment_parser(sub, settings_of)


def add_segment_parser(sub: Any, settings_of: Callable[[argparse.Namespace], Settings]) -> None:
    parser = sub.add_parser("segment", help="find the object an expression refers to and save its masks",
                            description="Find the one object of the video's object memory that EXPRESSION refers to "
                            "(\"the black dog\", \"the second cup from the left\", \"the person who sits down\") and "
                            "save its mask in each sampled frame (masks/<frame>.png), masks.json and overlay.mp4 (the "
                            "mask drawn over the video) in one folder. The object memory is built first when missing; "
                            "the chat model reads only what the parser cannot. Without -o the folder goes under the "
                            "library's artifacts folder, named by content (made once).")
    parser.add_argument("video", metavar="VIDEO", help=VIDEO_HELP)
    parser.add_argument("expression", metavar="EXPRESSION", help="words naming one object")
    parser.add_argument("-o", "--output", metavar="DIR", default=None,
                        help="the folder to write into (new, or empty; default: the library's artifacts folder)")
    parser.add_argument("--json", action="store_true", help="print what was found as one JSON object, with every mask")
    parser.add_argument("--no-model", action="store_true",
                        help="never ask the chat model: an expression the parser cannot resolve is an error")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    parser.set_defaults(run=lambda args: _segment(args, settings_of(args)))


def _segment(args: argparse.Namespace, settings: Settings) -> int:
    from vidagent.session import Session

    video = open_video(args.video, settings)
    with Session(settings) as session, _ProgressBar(args, "drawing the masks") as progress:
        found = session.refer_object(video, args.expression, target=args.output, use_model=not args.no_model,
                                     progress=not args.quiet, on_overlay=progress)
    if args.json:
        print(json.dumps(found.to_dict()))
        return 0
    start, end = found.edit.window
    made = "made before" if found.edit.reused else f"in {found.edit.seconds:.1f} s"
    print(f"{found.folder}: object {found.referent.object_id} ({found.referent.fact.category}) by the "
          f"{found.referent.how}{', ambiguous' if found.referent.ambiguous else ''}, {len(found.masks)} masks "
          f"({found.mask_source}) over {start:.2f}-{end:.2f} s, {made}")
    return 0


def open_video(given: str, settings: Settings) -> Video:
    """The video ``given`` names: a file, or an indexed video's id (its file as the library last saw it)."""
    path = Path(given).expanduser()
    if path.exists() or not settings.library_path.is_file():
        return Video(path)
    with Library(settings.library_path) as library:
        video_id = resolve_video_id(library, given)
        row = library.video_row(video_id)
        stored = library.stored_video(video_id)
    if stored is not None:
        raise VideoError(f"{video_id} is a memory imported from captions: it has no video file to cut, draw on "
                         "or save frames of")
    assert row is not None
    if not Path(row["path"]).is_file():
        raise VideoError(f"{video_id}: its file {row['path']} is gone")
    return Video(row["path"])


def _clip(args: argparse.Namespace, settings: Settings) -> Edit:
    edits, target = _edits(open_video(args.video, settings), args.output, settings)
    with _ProgressBar(args, "cutting") as progress:
        return edits.clip(args.start, args.end, target=target, progress=progress)


def _highlight(args: argparse.Namespace, settings: Settings) -> Edit:
    return _object_edit(args, settings, "drawing", "highlight")


def _remove(args: argparse.Namespace, settings: Settings) -> Edit:
    return _object_edit(args, settings, "painting out", "remove")


def _object_edit(args: argparse.Namespace, settings: Settings, doing: str, kind: str) -> Edit:
    from vidagent.session import Session

    video = open_video(args.video, settings)
    edits, target = _edits(video, args.output, settings)
    with Session(settings) as session:
        memory = session.index(video, ["objects"], progress=not args.quiet)
        found = object_track(memory, args.object_id)
    with _ProgressBar(args, f"{doing} {found.label}") as progress:
        make = edits.highlight if kind == "highlight" else edits.remove
        return make(found, target=target, progress=progress)


def _frames(args: argparse.Namespace, settings: Settings) -> Edit:
    edits = VideoEdits(open_video(args.video, settings), settings.artifacts_dir)
    target = Path(args.output).expanduser() if args.output else None
    with _ProgressBar(args, "saving frames") as progress:
        return edits.frames(args.start, args.end, args.fps, image_format=args.format, target=target,
                            progress=progress)


def _edits(video: Video, output: str | None, settings: Settings) -> tuple[VideoEdits, Path | None]:
    """Where ``-o`` sends an edited video: the file it names, or (a folder) its content name in that folder;
    without ``-o``, its content name in the library's artifacts folder."""
    if not output:
        return VideoEdits(video, settings.artifacts_dir), None
    path = Path(output).expanduser()
    if path.is_dir():
        return VideoEdits(video, path), None
    if path.suffix.lower() not in (".mp4", ".m4v", ".mov"):
        raise VideoError(f"{output}: the output is an mp4 video: name it .mp4 (or give a folder)")
    return VideoEdits(video, settings.artifacts_dir), path


def _report(edit: Edit) -> int:
    start, end = edit.window
    what = f"{edit.count} images" if edit.kind == "frames" else f"{edit.count} frames"
    made = "made before" if edit.reused else f"in {edit.seconds:.1f} s"
    print(f"{edit.path}: {edit.kind} of {start:.2f}-{end:.2f} s, {what}, {made}")
    return 0


class _ProgressBar:
    """A progress bar over the stretch's seconds (on stderr; none with -q or when stderr is no terminal)."""

    def __init__(self, args: argparse.Namespace, label: str) -> None:
        self.bar = tqdm(total=None, desc=label, unit="s", disable=args.quiet or not sys.stderr.isatty(),
                        bar_format="{l_bar}{bar}| {n:.1f}/{total:.1f} video s [{elapsed}<{remaining}]")

    def __enter__(self) -> Progress:
        def progress(done: float, total: float) -> None:
            if self.bar.total is None:
                self.bar.total = round(total, 1)
            self.bar.update(round(done, 1) - self.bar.n)
        return progress

    def __exit__(self, *exc: object) -> None:
        self.bar.close()
