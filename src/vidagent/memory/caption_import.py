"""Memories without pixels: one memory per video of a released caption set.

``import_captions`` reads a caption set (``caption_formats``), checks all of it, and then writes,
video by video, a memory with no file: the video's row (``<namespace>:<video>``, its duration, the
caption file as its path) and its ``segments`` stage, one segment per caption with the caption's
own times, a text embedding (the same embedder as every other memory) and the merged clips, plus
where the captions came from (``caption_sources``). Each video is one transaction, so a killed
import leaves whole memories only and resumes where it stopped; a video whose captions, embedder
and namespace are unchanged is left as it is (importing the same file twice rebuilds nothing).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Collection, Sequence

import numpy as np
from tqdm import tqdm

from vidagent.memory.caption_formats import CaptionedVideo, CaptionFormatError, read_caption_set
from vidagent.memory.stages.segments import CLIP_MERGE_SIMILARITY, merge_into_clips
from vidagent.memory.store import Library, SegmentRecord, segments_stage_rows
from vidagent.memory.stored_video import memory_id
from vidagent.perception.base import TextEmbedder
from vidagent.prompts import prompt
from vidagent.video.video import VideoInfo

log = logging.getLogger(__name__)

IMPORT_VERSION = 1  # bump when what an import writes changes: every imported memory is rewritten once
EMBED_BATCH = 256
# The most of a caption the text embedder reads (UTF-8 bytes; the caption is stored whole). The embedder's work grows
# with a text's tokens (its 512-token windows are averaged, none dropped): one 8,000-character caption took 10-21 s,
# 200 of them over 400 s (issue 55). Every released caption is read whole (LaViLa's are under 200 bytes, CogAgent's
# NExT-QA captions under 900), and 1,000 bytes are at most about 760 tokens of any script (random base64; CJK about
# 340), so a file's embedding work grows with its number of captions and bytes no faster than ordinary captions'.
MAX_EMBEDDED_BYTES = 1000


@dataclass(frozen=True)
class ImportOptions:
    """How to import a caption set. ``namespace`` prefixes every video id (default: guessed from the
    file name for the benchmarks whose captions were released, else required); ``captioner`` and
    ``note`` override the format's own; ``only`` keeps only those dataset video ids."""

    format: str | None = None
    namespace: str | None = None
    captioner: str | None = None
    note: str | None = None
    only: Collection[str] | None = None


@dataclass
class ImportReport:
    source: Path
    format: str
    namespace: str
    imported: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    captions: int = 0
    seconds: float = 0.0

    @property
    def videos(self) -> int:
        return len(self.imported) + len(self.unchanged)


@lru_cache(maxsize=1)
def _presets() -> dict[str, dict[str, str]]:
    return json.loads(resources.files("vidagent.memory").joinpath("caption_presets.json").read_text(encoding="utf-8"))


def guess_namespace(path: Path) -> str | None:
    """The benchmark a released caption file is for, from its name (``egoschema``, ``nextqa``), or None."""
    name = path.name.lower().replace("-", "").replace("_", "")
    for hint, namespace in (("egoschema", "egoschema"), ("lavila", "egoschema"), ("nextqa", "nextqa")):
        if hint in name:
            return namespace
    return None


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, or of a folder's caption files (names and bytes, in name order)."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            digest.update(str(file.relative_to(path)).encode() + b"\0")
        with file.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class PreparedImport:
    """A caption set read and checked in full, ready to write: nothing of it is written yet."""

    source: Path
    format: str
    namespace: str
    videos: tuple[CaptionedVideo, ...]
    ids: dict[str, str]  # dataset video id -> memory id
    captioner: str
    note: str
    sha256: str

    @property
    def captions(self) -> int:
        return sum(len(video.captions) for video in self.videos)


VideoDone = Callable[[int, int, str, bool], None]  # (videos done, of, memory id, whether it was written)


def prepare_import(source: Path, options: ImportOptions = ImportOptions()) -> PreparedImport:
    """Read and check the caption set at ``source`` (every record, the namespace, the ids): a
    ``CaptionFormatError`` naming the file and record for any bad input; nothing is written."""
    source = Path(source).expanduser().resolve()  # provenance names the file wherever the import ran from
    format, videos = read_caption_set(source, options.format)
    namespace = options.namespace or guess_namespace(source)
    if not namespace:
        raise CaptionFormatError(f"{source}: give a namespace for its videos (--namespace NAME), e.g. the "
                                 "benchmark's name; memory ids are NAME:<video id>")
    if options.only is not None:
        wanted = {str(v) for v in options.only}
        videos = [video for video in videos if video.video in wanted]
        if not videos:
            raise CaptionFormatError(f"{source}: none of the {len(wanted)} videos asked for is in this caption set")
    ids = {video.video: memory_id(namespace, video.video) for video in videos}  # every id checked before writing
    preset = _presets()[format]
    captioner = options.captioner or preset["captioner"] or source.stem
    note = options.note or prompt("vidagent.memory", "memory_note_imported").render(
        captioner=captioner, covers=preset["covers"], conventions=preset["conventions"]).strip()
    return PreparedImport(source, format, namespace, tuple(videos), ids, captioner, note, file_sha256(source))


def write_import(library: Library, embedder: TextEmbedder, prepared: PreparedImport, *, progress: bool = False,
                 on_video: VideoDone | None = None) -> ImportReport:
    """Write a prepared caption set, one transaction per video; ``on_video`` hears of each video done."""
    started = time.perf_counter()
    source = prepared.source
    report = ImportReport(source, prepared.format, prepared.namespace)
    total = len(prepared.videos)
    for done, video in enumerate(tqdm(prepared.videos, desc=f"importing {source.name}", unit="video",
                                      disable=not progress, dynamic_ncols=True), 1):
        video_id = prepared.ids[video.video]
        config = _config(video, prepared.format, embedder, prepared.captioner, prepared.note)
        report.captions += len(video.captions)
        written = not library.has_stage(video_id, "segments", config)
        if written:
            began = time.perf_counter()
            rows = _memory_rows(video, embedder)
            file = video.member or str(source)
            rows["caption_sources"] = [(prepared.captioner, file, prepared.sha256, prepared.format, prepared.note)]
            info = VideoInfo(path=file, content_hash=video_id, duration_s=video.duration_s, fps=0.0, width=0,
                             height=0, rotation=0, has_audio=False, codec="captions", container="none")
            library.write_stage(video_id, "segments", config, rows, time.perf_counter() - began, video=info)
        (report.imported if written else report.unchanged).append(video_id)
        if on_video is not None:
            on_video(done, total, video_id, written)
    report.seconds = time.perf_counter() - started
    log.info("imported %d and kept %d memories from %s in %.1f s", len(report.imported), len(report.unchanged),
             source, report.seconds)
    return report


def import_captions(library: Library, embedder: TextEmbedder, source: Path, options: ImportOptions = ImportOptions(),
                    *, progress: bool = False, on_video: VideoDone | None = None) -> ImportReport:
    """Import the caption set at ``source`` into ``library`` (see the module's description)."""
    started = time.perf_counter()
    report = write_import(library, embedder, prepare_import(source, options), progress=progress, on_video=on_video)
    report.seconds = time.perf_counter() - started
    return report


def _config(video: CaptionedVideo, format: str, embedder: TextEmbedder, captioner: str, note: str) -> dict[str, Any]:
    """The imported ``segments`` stage's configuration: what would change the stored memory."""
    captions = json.dumps([(c.start_s, c.end_s, c.text) for c in video.captions], separators=(",", ":"))
    return {
        "import": format, "import_version": IMPORT_VERSION, "embedder": embedder.name,
        "captions": hashlib.sha256(captions.encode()).hexdigest()[:16],
        "captioner": captioner, "note": hashlib.sha256(note.encode()).hexdigest()[:16],
        "clip_merge_similarity": CLIP_MERGE_SIMILARITY,
    }


def _memory_rows(video: CaptionedVideo, embedder: TextEmbedder) -> dict[str, list[Any]]:
    rows: list[list[Any]] = [[index, caption.start_s, caption.end_s, caption.text, "", ""]
                             for index, caption in enumerate(video.captions)]
    embeddings = _embed_unique([embedded_text(caption.text) for caption in video.captions], embedder)
    segments = [SegmentRecord(*row, vector) for row, vector in zip(rows, embeddings)]  # captions: no facts
    return segments_stage_rows(segments, merge_into_clips(rows, embeddings))


def embedded_text(text: str) -> str:
    """The part of a caption the embedder reads: its first ``MAX_EMBEDDED_BYTES`` bytes of UTF-8, whole characters."""
    data = text.encode("utf-8")
    if len(data) <= MAX_EMBEDDED_BYTES:
        return text
    return data[:MAX_EMBEDDED_BYTES].decode("utf-8", errors="ignore")


def _embed_unique(texts: Sequence[str], embedder: TextEmbedder) -> np.ndarray:
    """Embeddings of ``texts``, each distinct text embedded once (captions repeat: 42 % of EgoSchema's
    LaViLa captions repeat another caption)."""
    distinct = list(dict.fromkeys(texts))
    vectors: list[np.ndarray] = []
    for start in range(0, len(distinct), EMBED_BATCH):
        vectors.append(np.asarray(embedder.embed_passages(distinct[start:start + EMBED_BATCH]), np.float32))
    table = dict(zip(distinct, np.concatenate(vectors)))
    return np.stack([table[text] for text in texts])
