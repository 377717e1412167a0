"""What the library holds, as the server shows it: the videos a client may see, and each one's memory.

Only videos whose file lies in a folder the server reads (or in its upload folder) are visible; a
library shared with the CLI may hold others, and their paths stay private. A memory imported from
released captions (``vidagent import``, ``POST /api/import``) has no video file: it is visible when its
caption file lies in those folders, and is listed with where its captions came from.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from vidagent.memory.store import BUILT_STAGE, Library
from vidagent.memory.stored_video import is_memory_id
from vidagent.server.display import shown_segment
from vidagent.server.errors import NotFoundError
from vidagent.sqlite import open_sqlite

_LIST_SQL = """
SELECT v.video_id, v.path, v.duration_s, v.fps, v.width, v.height, v.has_audio, v.added_at,
       (SELECT group_concat(stage, ',') FROM stages s WHERE s.video_id = v.video_id AND {built}),
       c.captioner, c.format,
       CASE WHEN c.video_id IS NULL THEN 0 ELSE (SELECT COUNT(*) FROM segments g WHERE g.video_id = v.video_id) END
FROM videos v LEFT JOIN caption_sources c ON c.video_id = v.video_id ORDER BY v.added_at DESC, v.path
""".format(built=BUILT_STAGE)  # a partial memory's stages are not built
STAGE_ORDER = ("frames", "speech", "segments", "objects")


@dataclass(frozen=True)
class CaptionOrigin:
    """Where an imported memory's captions came from: it has no video file to play or cut."""

    captioner: str
    format: str
    captions: int

    def describe(self) -> str:
        return f"captions by {self.captioner}"


@dataclass(frozen=True)
class VideoEntry:
    """A visible video and the memory stages built for it (``imported``: a memory without a video file)."""

    video_id: str
    path: str
    duration_s: float
    fps: float
    width: int
    height: int
    has_audio: bool
    added_at: str
    stages: tuple[str, ...]
    imported: CaptionOrigin | None = None

    @property
    def has_file(self) -> bool:
        return self.imported is None

    @property
    def name(self) -> str:
        return Path(self.path).name if self.imported is None else self.video_id

    @property
    def file_path(self) -> str:
        """The file the entry's path names (a zip's member is named after a '!': the zip)."""
        return self.path if self.imported is None else self.path.split("!", 1)[0]

    def to_dict(self) -> dict[str, Any]:
        origin = self.imported
        return {"video_id": self.video_id, "name": self.name, "path": self.path,
                "duration_s": round(self.duration_s, 3), "fps": round(self.fps, 3), "width": self.width,
                "height": self.height, "has_audio": self.has_audio, "added_at": self.added_at,
                "stages": list(self.stages), "kind": "video" if origin is None else "captions",
                "has_file": origin is None, "origin": "video file" if origin is None else origin.describe(),
                "captioner": origin.captioner if origin else None, "caption_format": origin.format if origin else None,
                "captions": origin.captions if origin else None}


class Catalog:
    """Reads the library for listings; its own connection, so listing never waits on a build."""

    def __init__(self, library: Library, visible: Callable[[Path], bool]) -> None:
        self.library = library
        self._visible = visible
        self._seen: dict[str, bool] = {}
        self._lock = threading.Lock()

    def _is_visible(self, path: str) -> bool:
        with self._lock:
            known = self._seen.get(path)
        if known is None:
            file = path.split("!", 1)[0] if "!" in path and not Path(path).exists() else path  # a zip's member: the zip
            known = self._visible(Path(file))
            with self._lock:
                self._seen[path] = known
        return known

    def videos(self) -> list[VideoEntry]:
        entries = []
        for row in self.library.rows(_LIST_SQL):
            if self._is_visible(row[1]):
                stages = tuple(s for s in STAGE_ORDER if s in (row[8] or "").split(","))
                origin = CaptionOrigin(row[9], row[10], row[11]) if row[9] is not None else None
                entries.append(VideoEntry(row[0], row[1], row[2], row[3], row[4], row[5], bool(row[6]), row[7], stages,
                                          origin))
        return entries

    def video(self, video_id: str) -> VideoEntry:
        """The visible video with this id; ``NotFoundError`` otherwise."""
        row = self.library.video_row(video_id) if _looks_like_id(video_id) else None
        if row is None or not self._is_visible(row["path"]):
            raise NotFoundError(f"no video with id {video_id!r}: list them with GET /api/videos")
        names = set(self.library.stage_names(video_id))
        provenance = self.library.caption_provenance(video_id)
        origin = None if provenance is None else CaptionOrigin(provenance.captioner, provenance.format,
                                                              self.library.count_rows("segments", video_id))
        return VideoEntry(video_id, row["path"], row["duration_s"], row["fps"], row["width"], row["height"],
                          bool(row["has_audio"]), row["added_at"], tuple(s for s in STAGE_ORDER if s in names), origin)

    def remove(self, video_id: str) -> None:
        """Delete the video and everything kept about it: its memory (every table's rows go with the video's
        row, by the schema's ``ON DELETE CASCADE``) and the experience learned about it. Its own connection
        (the library's is for reading here); SQLite's WAL lets it write beside a build of another video."""
        with contextlib.closing(open_sqlite(self.library.path, foreign_keys=True)) as conn, conn:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "experience" in tables:
                conn.execute("DELETE FROM experience WHERE video_id=?", (video_id,))
            conn.execute("DELETE FROM videos WHERE video_id=?", (video_id,))

    def forget_path(self, path: str) -> None:
        with self._lock:
            self._seen.pop(path, None)

    def memory(self, video_id: str) -> dict[str, Any]:
        """The video's memory for a timeline: segments, speech, on-screen text and objects (with the
        segments each object appears in)."""
        entry = self.video(video_id)
        library = self.library
        appearances: dict[int, list[list[float]]] = {}
        for object_id, first_s, last_s in library.rows(
                "SELECT object_id, first_s, last_s FROM object_segments WHERE video_id=? ORDER BY object_id, first_s",
                (video_id,)):
            appearances.setdefault(object_id, []).append([round(first_s, 2), round(last_s, 2)])
        return {
            "video": entry.to_dict(),
            "segments": [{"segment_id": s.segment_id, "start_s": s.start_s, "end_s": s.end_s,
                          "description": s.description, "speech": s.speech, "on_screen_text": s.on_screen_text,
                          "text": shown_segment(s)}
                         for s in library.segments(video_id)],
            "speech": [{"start_s": start, "end_s": end, "text": text} for start, end, text in library.speech(video_id)],
            "text": [{"time_s": time_s, "segment_id": segment, "text": text}
                     for time_s, segment, text in library.text_in_frames(video_id)],
            "objects": [{"object_id": o.object_id, "category": o.category, "first_s": o.first_s, "last_s": o.last_s,
                         "frame_count": o.frame_count, "description": o.description,
                         "appearances": appearances.get(o.object_id, [[o.first_s, o.last_s]])}
                        for o in library.objects(video_id)],
        }


def _looks_like_id(video_id: str) -> bool:
    """A content hash (a video file's id) or a namespaced memory id (``egoschema:<q_uid>``)."""
    return (8 <= len(video_id) <= 128 and all(c in "0123456789abcdef" for c in video_id)) or is_memory_id(video_id)
