"""Reading the caption sets that published video-QA systems released, in their own formats.

A caption set is a file (or a folder, or a zip) that gives, for many videos, timed captions. Every
reader returns the same thing: a list of ``CaptionedVideo`` (the dataset's own video id and its
captions in time order), after checking the whole input, so that an import writes nothing when any
part of it is wrong. Every error is a ``CaptionFormatError`` on one line naming the file and the
record.

Formats (``detect_caption_format`` tells them apart by shape):
- ``llovi``: LLoVi's JSON, ``{video_id: [caption, ...]}``; caption *i* describes the 1-second clip
  ``[i, i+1)`` s (LLoVi's LaViLa captions of EgoSchema; its NExT-QA release has the same shape).
- ``videoagent``: VideoAgent (Wang et al.)'s per-video ``<video>_cap.json`` files keyed by second
  (``{"0": "...", "1": ...}``; the caption of second *k* describes ``[k, k+1)`` s), in a folder or
  in the zip as released.
- ``jsonl`` / ``csv``: the generic form, one caption a line or row with ``video_id, start_s, end_s,
  caption`` (a header row for CSV; TSV when the file ends in ``.tsv``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from vidagent.errors import VidagentError
from vidagent.memory.stored_video import is_memory_id

FORMATS = ("llovi", "videoagent", "jsonl", "csv")
VIDEOAGENT_SUFFIX = "_cap.json"
GENERIC_COLUMNS = ("video_id", "start_s", "end_s", "caption")
# The longest caption read (characters): the released captions are sentences (LaViLa's under 200, CogAgent's under
# 2,000); a line of 100 KB took the text embedder over a minute of CPU (issue 41), so one is refused before any work.
MAX_CAPTION_CHARS = 8000
# The most a VideoAgent zip's member may inflate to, and by how much it may inflate (a zip bomb is refused before
# it is read): one video's captions are a few hundred KB, JSON compresses about 5-10 times.
MAX_MEMBER_BYTES = 64 * 1024 * 1024
MAX_INFLATION = 100


class CaptionFormatError(VidagentError):
    """A caption set that cannot be read as its format says."""

    exit_code = 2


@dataclass(frozen=True)
class Caption:
    start_s: float
    end_s: float
    text: str


@dataclass(frozen=True)
class CaptionedVideo:
    """One video of a caption set: the dataset's id for it and its captions in time order."""

    video: str
    captions: tuple[Caption, ...]
    member: str = ""  # the file inside a folder or zip it came from ('' for one-file formats)

    @property
    def duration_s(self) -> float:
        return max(caption.end_s for caption in self.captions)


# Not eval.loaders.detect_benchmark_format: that one tells benchmarks' annotation files apart, this one caption sets.
def detect_caption_format(path: Path) -> str:
    """The format of ``path`` from its shape: a zip or folder of ``*_cap.json`` files is ``videoagent``,
    ``.jsonl`` is ``jsonl``, ``.csv``/``.tsv`` is ``csv``, a JSON object of lists is ``llovi``."""
    if path.is_dir() or zipfile.is_zipfile(path) or path.suffix.lower() == ".zip":
        return "videoagent"
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return "jsonl"
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix == ".json":
        return "llovi"
    raise CaptionFormatError(f"{path}: cannot tell its caption format from its name; give --format "
                             f"({', '.join(FORMATS)})")


def read_caption_set(path: Path, format: str | None = None) -> tuple[str, list[CaptionedVideo]]:
    """``(format, videos)`` for the caption set at ``path``, every record checked."""
    if not path.exists():
        raise CaptionFormatError(f"{path}: no such file or folder")
    chosen = format or detect_caption_format(path)
    readers = {"llovi": _read_llovi, "videoagent": _read_videoagent, "jsonl": _read_jsonl, "csv": _read_csv}
    if chosen not in readers:
        raise CaptionFormatError(f"unknown caption format {chosen!r}; the formats are {', '.join(FORMATS)}")
    videos = readers[chosen](path)
    if not videos:
        raise CaptionFormatError(f"{path}: holds no videos")
    return chosen, videos


# -- LLoVi ---------------------------------------------------------------------------------------
def _read_llovi(path: Path) -> list[CaptionedVideo]:
    data = _json(path.read_bytes(), str(path))
    if not isinstance(data, dict):
        raise CaptionFormatError(f"{path}: expected a JSON object of video id -> list of captions (LLoVi's format)")
    videos = []
    for video, captions in data.items():
        where = f"{path}: video {video!r}"
        if not isinstance(captions, list):
            raise CaptionFormatError(f"{where}: expected a list of captions, found {type(captions).__name__}")
        if not captions:
            raise CaptionFormatError(f"{where}: has no captions")
        texts = [_caption_text(text, f"{where} caption {index}") for index, text in enumerate(captions)]
        videos.append(CaptionedVideo(_video_id(video, where),
                                     tuple(Caption(float(i), float(i + 1), text) for i, text in enumerate(texts))))
    return videos


# -- VideoAgent (Wang et al.) ------------------------------------------------------------------------
def _read_videoagent(path: Path) -> list[CaptionedVideo]:
    videos = [_videoagent_file(name, data) for name, data in _videoagent_members(path)]
    _no_repeats(videos, str(path))
    return videos


def _videoagent_members(path: Path) -> Iterable[tuple[str, bytes]]:
    if path.is_dir():
        files = sorted(path.rglob(f"*{VIDEOAGENT_SUFFIX}"))
        if not files:
            raise CaptionFormatError(f"{path}: no *{VIDEOAGENT_SUFFIX} files in this folder (VideoAgent's format)")
        return [(str(file), file.read_bytes()) for file in files]
    try:
        with zipfile.ZipFile(path) as archive:
            names = sorted(n for n in archive.namelist() if n.endswith(VIDEOAGENT_SUFFIX) and not n.startswith("__MACOSX"))
            if not names:
                raise CaptionFormatError(f"{path}: no *{VIDEOAGENT_SUFFIX} files in this zip (VideoAgent's format)")
            for name in names:
                _check_member_size(archive.getinfo(name), f"{path}!{name}")
            return [(f"{path}!{name}", archive.read(name)) for name in names]
    except (zipfile.BadZipFile, EOFError, zipfile.LargeZipFile) as error:
        raise CaptionFormatError(f"{path}: not a readable zip ({error}); is it truncated?") from None
    except OSError as error:  # a member's data cut short, a CRC that does not match
        raise CaptionFormatError(f"{path}: cannot read the zip ({error}); is it truncated?") from None


def _check_member_size(info: zipfile.ZipInfo, where: str) -> None:
    """Refuse a member that declares more than ``MAX_MEMBER_BYTES`` or inflates more than ``MAX_INFLATION`` times
    (zipfile reads no more than a member declares, so the declaration bounds the work)."""
    if info.file_size > MAX_MEMBER_BYTES:
        raise CaptionFormatError(f"{where}: inflates to {info.file_size:,} bytes (at most {MAX_MEMBER_BYTES:,})")
    if info.file_size > 1024 * 1024 and info.file_size > MAX_INFLATION * max(1, info.compress_size):
        raise CaptionFormatError(f"{where}: inflates {info.file_size // max(1, info.compress_size):,} times "
                                 f"(at most {MAX_INFLATION}): not a caption file")


def _videoagent_file(name: str, data: bytes) -> CaptionedVideo:
    base = name.replace("\\", "/").rsplit("!", 1)[-1].rsplit("/", 1)[-1]  # a zip's member at its top level too
    video = base[: -len(VIDEOAGENT_SUFFIX)]
    where = f"{name}"
    record = _json(data, where)
    if not isinstance(record, dict):
        raise CaptionFormatError(f"{where}: expected a JSON object of second -> caption (VideoAgent's format)")
    if not record:
        raise CaptionFormatError(f"{where}: has no captions")
    captions = []
    previous = -1
    for key, text in record.items():
        try:
            second = int(key)
        except ValueError:
            raise CaptionFormatError(f"{where}: key {key!r} is not a whole second") from None
        if second < 0:
            raise CaptionFormatError(f"{where}: key {key!r} is negative")
        if second <= previous:
            raise CaptionFormatError(f"{where}: second {second} comes after second {previous} (times must increase)")
        previous = second
        captions.append(Caption(float(second), float(second + 1), _caption_text(text, f"{where} second {key}")))
    return CaptionedVideo(_video_id(video, where), tuple(captions), member=name)


# -- generic JSONL / CSV ------------------------------------------------------------------------------
def _read_jsonl(path: Path) -> list[CaptionedVideo]:
    rows = []
    for number, line in enumerate(_text(path).splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}: line {number}"
        record = _json(line.encode(), where)
        if not isinstance(record, dict):
            raise CaptionFormatError(f"{where}: expected an object with {', '.join(GENERIC_COLUMNS)}")
        rows.append((where, record))
    return _generic(rows, str(path))


def _read_csv(path: Path) -> list[CaptionedVideo]:
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    reader = csv.DictReader(io.StringIO(_text(path)), delimiter=delimiter)
    try:  # the csv module refuses a field over its limit (128 KiB): a caption is far shorter, so the file is bad
        missing = [c for c in GENERIC_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise CaptionFormatError(f"{path}: the header lacks {', '.join(missing)} "
                                     f"(columns: {', '.join(GENERIC_COLUMNS)})")
        rows = [(f"{path}: line {number}", row) for number, row in enumerate(reader, 2)]
    except csv.Error as error:
        raise CaptionFormatError(f"{path}: line {reader.line_num}: not a caption row ({error}; a caption is at most "
                                 f"{MAX_CAPTION_CHARS:,} characters)") from None
    return _generic(rows, str(path))


def _generic(rows: list[tuple[str, dict[str, Any]]], source: str) -> list[CaptionedVideo]:
    by_video: dict[str, list[Caption]] = {}
    for where, record in rows:
        missing = [c for c in GENERIC_COLUMNS if record.get(c) in (None, "")]
        if missing:
            raise CaptionFormatError(f"{where}: lacks {', '.join(missing)}")
        video = _video_id(record["video_id"], where)
        start, end = _seconds(record["start_s"], where, "start_s"), _seconds(record["end_s"], where, "end_s")
        if end <= start:
            raise CaptionFormatError(f"{where}: end_s {end:g} is not after start_s {start:g}")
        captions = by_video.setdefault(video, [])
        if captions and start < captions[-1].start_s:
            raise CaptionFormatError(f"{where}: video {video!r} starts at {start:g} s after a caption at "
                                     f"{captions[-1].start_s:g} s (times must not go back)")
        if captions and start == captions[-1].start_s and end == captions[-1].end_s:
            raise CaptionFormatError(f"{where}: video {video!r} has a second caption for {start:g}-{end:g} s")
        captions.append(Caption(start, end, _caption_text(record["caption"], where)))
    return [CaptionedVideo(video, tuple(captions)) for video, captions in by_video.items()]


# -- checks ---------------------------------------------------------------------------------------
def _json(data: bytes, where: str) -> Any:
    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in pairs:
            if key in seen:
                raise CaptionFormatError(f"{where}: key {key!r} appears twice")
            seen[key] = value
        return seen

    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=unique_keys)
    except UnicodeDecodeError:
        raise CaptionFormatError(f"{where}: not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise CaptionFormatError(f"{where}: not valid JSON ({error.msg} at line {error.lineno}, column {error.colno}); "
                                 "is it truncated?") from None


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CaptionFormatError(f"{path}: not UTF-8 text") from None


def _caption_text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise CaptionFormatError(f"{where}: a caption must be text, found {type(value).__name__}")
    if len(value) > MAX_CAPTION_CHARS:
        raise CaptionFormatError(f"{where}: a caption of {len(value):,} characters (at most {MAX_CAPTION_CHARS:,})")
    text = " ".join(value.split())
    if not text:
        raise CaptionFormatError(f"{where}: the caption is empty")
    return text


def _video_id(value: Any, where: str) -> str:
    text = str(value).strip()
    if not is_memory_id(f"video:{text}"):
        raise CaptionFormatError(f"{where}: {text!r} is not a usable video id (letters, digits and . _ ~ + = @ -)")
    return text


def _seconds(value: Any, where: str, column: str) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise CaptionFormatError(f"{where}: {column} {value!r} is not a number of seconds") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise CaptionFormatError(f"{where}: {column} {value!r} is not a time in the video")
    return seconds


def _no_repeats(videos: list[CaptionedVideo], source: str) -> None:
    seen: dict[str, str] = {}
    for video in videos:
        if video.video in seen:
            raise CaptionFormatError(f"{source}: video {video.video!r} appears twice ({seen[video.video]} and "
                                     f"{video.member})")
        seen[video.video] = video.member
