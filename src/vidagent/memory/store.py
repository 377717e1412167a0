"""The library database: one SQLite file holding the memory of many videos.

Stages are written atomically: a stage's rows and its ``stages`` row go in one transaction,
after the old rows of that stage are deleted. An interrupted build therefore leaves the
database exactly as it was before the build began.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from vidagent.errors import MemoryStoreError
from vidagent.memory.stored_video import CaptionProvenance, StoredVideo
from vidagent.perception.base import FrameDescription, Label, SeenObject, TextBox
from vidagent.perception.frame_words import distinct_lines, reading_order_by_rows, seen_words
from vidagent.sqlite import open_sqlite, table_columns
from vidagent.video.video import VideoInfo

# 4: frames keep what was seen as facts (caption, objects, labels, size) and the describer once per memory
# 5: actions per object (verbs with time spans) and one description line per object, each a stage of its own
SCHEMA_VERSION = 5

log = logging.getLogger(__name__)

# Which tables each build stage owns (deleted and rewritten together).
STAGE_TABLES: dict[str, tuple[str, ...]] = {
    "frames": ("frames", "text_in_frame", "describers"),
    "speech": ("speech",),
    "segments": ("segments", "clips", "caption_sources"),  # caption_sources: memories imported from captions
    "objects": ("detections", "tracks", "objects", "object_segments"),
    "motion": ("motion",),
    "camera": ("camera_path",),
    "actions": ("actions",),
    "descriptions": ("object_descriptions",),
}
ALL_TABLES: tuple[str, ...] = tuple(t for tables in STAGE_TABLES.values() for t in tables)
# Tables kept for the build's own later stages, no fact a question asks about (SQL over a memory does not read them).
BUILD_ONLY_TABLES: tuple[str, ...] = ("camera_path",)
# A partial memory's stages (vidagent.memory.glance) keep their coverage under this key of their config;
# BUILT_STAGE is the SQL condition on a `stages` row that leaves them out (they are not built).
GLANCE_KEY = "glance"
BUILT_STAGE = f"json_extract(config, '$.{GLANCE_KEY}') IS NULL"


def config_key(config: Mapping[str, Any]) -> str:
    """A stable short hash of a stage's configuration."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class Unsaved:
    """A value a frame stage keeps with a frame's result in memory only: the result's checkpoint holds null in its
    place, so a build resumed from checkpoints finds None there and does without it."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _unsaved_as_null(value: Any) -> None:
    if isinstance(value, Unsaved):
        return None
    raise TypeError(f"a checkpoint holds JSON values, not {type(value).__name__}")


@dataclass(frozen=True)
class SegmentRecord:
    """One segment of the temporal memory."""

    segment_id: int
    start_s: float
    end_s: float
    description: str
    speech: str
    on_screen_text: str
    embedding: np.ndarray

    def row(self) -> tuple[Any, ...]:
        """Its ``segments`` row (without video_id)."""
        return (self.segment_id, self.start_s, self.end_s, self.description, self.speech, self.on_screen_text,
                np.asarray(self.embedding, np.float32).tobytes())


@dataclass(frozen=True)
class FrameRecord:
    """One sampled frame of the memory: when, in which segment, and what was seen in it (facts;
    its ``on_screen_text`` and ``text_boxes`` come from ``text_in_frame``)."""

    time_s: float
    segment_id: int
    seen: FrameDescription

    @property
    def description(self) -> str:
        """What was seen, in words (``frame_words.seen_words``)."""
        return seen_words(self.seen)


@dataclass(frozen=True)
class DescriberRecord:
    """What described a memory's frames, said once per memory: its name, the mark its sentences
    begin with ("" for captions) and the note an LLM reading the descriptions is given."""

    describer: str
    label: str
    note: str


def frames_stage_rows(frames: Sequence[FrameRecord], describer: DescriberRecord) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of stage ``frames`` (tables ``frames``, ``text_in_frame``, ``describers``) for ``frames``,
    to hand to ``Library.write_stage``."""
    frame_rows: list[tuple[Any, ...]] = []
    text_rows: list[tuple[Any, ...]] = []
    for frame in frames:
        seen = frame.seen
        objects = [{"label": o.label, "score": o.score, "box": list(o.box), "colour": o.colour, "kind": o.kind,
                    "pose": o.pose} for o in seen.objects]
        labels = [[label.name, label.score] for label in seen.labels]
        frame_rows.append((frame.time_s, frame.segment_id, frame.description, seen.caption,
                           json.dumps(objects, ensure_ascii=False), json.dumps(labels, ensure_ascii=False),
                           seen.size[0], seen.size[1]))
        text_rows.extend((frame.time_s, frame.segment_id, box.text, *box.box, box.score) for box in seen.text_boxes)
    return {"frames": frame_rows, "text_in_frame": text_rows,
            "describers": [(describer.describer, describer.label, describer.note)]}


def segments_stage_rows(segments: Sequence[SegmentRecord], clips: Sequence[tuple[Any, ...]] = ()
                        ) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of stage ``segments`` for ``segments`` (and clip rows, as ``merge_into_clips`` makes them)."""
    return {"segments": [segment.row() for segment in segments], "clips": list(clips)}


@dataclass(frozen=True)
class ObjectRecord:
    """One re-identified object of the object memory."""

    object_id: int
    category: str
    first_s: float
    last_s: float
    frame_count: int
    appearance: str
    motion: str
    description: str
    embedding: np.ndarray


@dataclass(frozen=True)
class DetectionRecord:
    """One sampled detection of an object (stage ``objects``): when, which track, its box in pixels of
    the displayed video, and its run-length mask where a segmentation backend made one."""

    time_s: float
    track_id: int
    category: str
    score: float
    box: tuple[float, float, float, float]
    mask: str | None


class Library:
    """Read and write access to the library database at ``path`` (created on first use)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self._conn = open_sqlite(self.path, wal=True, foreign_keys=True, any_thread=True, autocommit=True)
            self._migrate()
        except sqlite3.DatabaseError as error:
            raise MemoryStoreError(f"cannot open the library database {self.path}: {error}") from error

    # -- lifecycle -------------------------------------------------------------------------
    def _migrate(self) -> None:
        schema = resources.files("vidagent.memory").joinpath("schema.sql").read_text()
        with self._lock:
            # one transaction: one write to disk, not one per table (a new library opens four times faster),
            # and a schema made whole or not at all
            self._conn.executescript(f"BEGIN;\n{schema}\nCOMMIT;")
            row = self._conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                self._conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) > SCHEMA_VERSION:
                raise MemoryStoreError(
                    f"{self.path} was written by a newer vidagent (schema {row[0]} > {SCHEMA_VERSION}); upgrade vidagent"
                )
            elif int(row[0]) < SCHEMA_VERSION:
                self._upgrade(schema)
                self._conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))

    def _upgrade(self, schema: str) -> None:
        """Bring an older library to this schema: older schemas lack tables (created by ``schema``: schema 4
        lacks ``actions`` and ``object_descriptions``, whose stages build when next needed), and schema 3's
        ``frames`` kept a sentence per frame: that table is dropped with its stage, which rebuilds when next
        needed (the frames stage's config names its facts version, so every stage reading it rebuilds once
        through its config hash too)."""
        if "caption" not in table_columns(self._conn, "frames"):
            self._conn.executescript("""BEGIN;
                DROP TABLE frames;
                DELETE FROM text_in_frame;
                DELETE FROM stages WHERE stage = 'frames';
                DELETE FROM stage_checkpoints WHERE stage = 'frames';
                COMMIT;""")
            self._conn.executescript(schema)
            log.info("%s: upgraded to schema %d; frame memories rebuild when next needed", self.path, SCHEMA_VERSION)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "Library":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- videos and stages -----------------------------------------------------------------
    def add_video(self, info: VideoInfo) -> None:
        """Register a video (or update where it was last seen)."""
        with self._lock:
            self._insert_video(info)

    def _insert_video(self, info: VideoInfo) -> None:
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._conn.execute(
            """INSERT INTO videos VALUES (?,?,?,?,?,?,?,?,?,?)
               ON CONFLICT(video_id) DO UPDATE SET path=excluded.path, duration_s=excluded.duration_s""",
            (info.content_hash, info.path, info.duration_s, info.fps, info.width, info.height,
             info.rotation, int(info.has_audio), info.codec, now),
        )

    def has_stage(self, video_id: str, stage: str, config: Mapping[str, Any]) -> bool:
        with self._lock:
            row = self._conn.execute(
                "SELECT 1 FROM stages WHERE video_id=? AND stage=? AND config_key=?",
                (video_id, stage, config_key(config)),
            ).fetchone()
        return row is not None

    def write_stage(
        self,
        video_id: str,
        stage: str,
        config: Mapping[str, Any],
        rows: Mapping[str, Iterable[Sequence[Any]]],
        seconds: float,
        *,
        video: VideoInfo | None = None,
        keep_checkpoints: bool = False,
    ) -> None:
        """Replace a stage's rows (``table -> row tuples without video_id``) in one transaction;
        with ``video``, the video's row is written in the same transaction (a memory that has no
        file is registered only together with its memory). A finished stage's write drops its
        checkpoints; a partial memory's (``keep_checkpoints``, ``vidagent.memory.glance``) keeps them for
        the full build that completes it."""
        owned = STAGE_TABLES[stage]
        unknown = set(rows) - set(owned)
        if unknown:
            raise ValueError(f"stage {stage!r} does not own tables {sorted(unknown)}")
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                if video is not None:
                    self._insert_video(video)
                for table in owned:
                    self._conn.execute(f"DELETE FROM {table} WHERE video_id=?", (video_id,))
                if not keep_checkpoints:
                    self._conn.execute("DELETE FROM stage_checkpoints WHERE video_id=? AND stage=?", (video_id, stage))
                for table, table_rows in rows.items():
                    materialised = [(video_id, *row) for row in table_rows]
                    if materialised:
                        marks = ",".join("?" * len(materialised[0]))
                        self._conn.executemany(f"INSERT INTO {table} VALUES ({marks})", materialised)
                self._conn.execute(
                    "INSERT OR REPLACE INTO stages VALUES (?,?,?,?,?,?)",
                    (video_id, stage, config_key(config), json.dumps(config, sort_keys=True), now, seconds),
                )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def stage_config(self, video_id: str, stage: str) -> dict[str, Any] | None:
        """The configuration a video's stage was built with (None: not built)."""
        with self._lock:
            row = self._conn.execute("SELECT config FROM stages WHERE video_id=? AND stage=?",
                                     (video_id, stage)).fetchone()
        return json.loads(row[0]) if row else None

    def stage_names(self, video_id: str) -> list[str]:
        """The stages built for a video (with whatever configuration; not a partial memory's stages)."""
        with self._lock:
            rows = self._conn.execute(f"SELECT stage FROM stages WHERE video_id=? AND {BUILT_STAGE} ORDER BY stage",
                                      (video_id,)).fetchall()
        return [row[0] for row in rows]

    # -- checkpoints of unfinished stages ----------------------------------------------------
    def save_checkpoint(self, video_id: str, stage: str, config: Mapping[str, Any], chunk_start_s: float,
                        payload: Any) -> None:
        """Keep one finished chunk of an unfinished stage (committed at once); an ``Unsaved`` value in it is kept
        as null."""
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO stage_checkpoints VALUES (?,?,?,?,?)",
                (video_id, stage, config_key(config), chunk_start_s, json.dumps(payload, default=_unsaved_as_null)),
            )

    def checkpoints(self, video_id: str, stage: str, config: Mapping[str, Any]) -> list[Any]:
        """Payloads of the chunks an earlier, interrupted build of this stage finished."""
        with self._lock:
            rows = self._conn.execute(
                """SELECT payload FROM stage_checkpoints WHERE video_id=? AND stage=? AND config_key=?
                   ORDER BY chunk_start_s""",
                (video_id, stage, config_key(config)),
            ).fetchall()
        return [json.loads(row[0]) for row in rows]

    # -- reads -----------------------------------------------------------------------------
    def video_row(self, video_id: str) -> dict[str, Any] | None:
        with self._lock:
            cursor = self._conn.execute("SELECT * FROM videos WHERE video_id=?", (video_id,))
            row = cursor.fetchone()
            names = [d[0] for d in cursor.description]
        return dict(zip(names, row)) if row else None

    def video_rows(self) -> list[dict[str, Any]]:
        """Every registered video (files and memories without one), with the stages built for it."""
        with self._lock:
            cursor = self._conn.execute(
                """SELECT v.*, (SELECT group_concat(stage, ',') FROM
                                  (SELECT stage FROM stages s WHERE s.video_id = v.video_id ORDER BY stage)) AS stages,
                          (SELECT captioner FROM caption_sources c WHERE c.video_id = v.video_id) AS captioner
                   FROM videos v ORDER BY v.added_at, v.video_id""")
            names = [d[0] for d in cursor.description]
            rows = cursor.fetchall()
        return [dict(zip(names, row)) for row in rows]

    def namespace_ids(self, namespace: str) -> set[str]:
        """The ids of the memories kept under ``namespace`` (``egoschema`` -> ``egoschema:...``)."""
        prefix = namespace.rstrip(":") + ":"
        with self._lock:
            rows = self._conn.execute("SELECT video_id FROM videos WHERE substr(video_id, 1, ?) = ?",
                                      (len(prefix), prefix)).fetchall()
        return {row[0] for row in rows}

    def has_namespace(self, namespace: str) -> bool:
        prefix = namespace.rstrip(":") + ":"
        with self._lock:
            row = self._conn.execute("SELECT 1 FROM videos WHERE substr(video_id, 1, ?) = ? LIMIT 1",
                                     (len(prefix), prefix)).fetchone()
        return row is not None

    def caption_provenance(self, video_id: str) -> CaptionProvenance | None:
        """Where an imported memory's captions came from (None for a memory built from a file)."""
        with self._lock:
            row = self._conn.execute(
                "SELECT captioner, file, sha256, format, note FROM caption_sources WHERE video_id=?", (video_id,)
            ).fetchone()
        return CaptionProvenance(*row) if row else None

    def stored_video(self, video_id: str) -> StoredVideo | None:
        """The memory ``video_id`` as a video without a file, when it was imported from captions."""
        provenance = self.caption_provenance(video_id)
        row = self.video_row(video_id)
        if provenance is None or row is None:
            return None
        return StoredVideo(row, provenance)

    def segments(self, video_id: str) -> list[SegmentRecord]:
        with self._lock:
            rows = self._conn.execute(
                """SELECT segment_id, start_s, end_s, description, speech, on_screen_text, embedding
                   FROM segments WHERE video_id=? ORDER BY segment_id""",
                (video_id,),
            ).fetchall()
        return [
            SegmentRecord(r[0], r[1], r[2], r[3], r[4], r[5], np.frombuffer(r[6], dtype=np.float32))
            for r in rows
        ]

    def frames(self, video_id: str) -> list[FrameRecord]:
        """The sampled frames in time order, each with what was seen in it (its text read too)."""
        with self._lock:
            rows = self._conn.execute(
                """SELECT time_s, segment_id, caption, objects, labels, width, height FROM frames
                   WHERE video_id=? ORDER BY time_s""", (video_id,)).fetchall()
            texts = self._conn.execute(
                "SELECT time_s, text, x1, y1, x2, y2, score FROM text_in_frame WHERE video_id=?", (video_id,)
            ).fetchall()
        boxes: dict[float, list[TextBox]] = {}
        for time_s, text, x1, y1, x2, y2, score in texts:
            boxes.setdefault(time_s, []).append(TextBox(text, (x1, y1, x2, y2), score))
        out = []
        for time_s, segment_id, caption, objects, labels, width, height in rows:
            read = tuple(reading_order_by_rows(boxes.get(time_s, [])))
            seen = FrameDescription(
                caption=caption,
                objects=tuple(SeenObject(o["label"], o["score"], tuple(o["box"]), o["colour"], o["kind"], o["pose"])
                              for o in json.loads(objects)),
                labels=tuple(Label(name, score) for name, score in json.loads(labels)),
                on_screen_text=distinct_lines(read), text_boxes=read, size=(width, height))
            out.append(FrameRecord(time_s, segment_id, seen))
        return out

    def describer(self, video_id: str) -> DescriberRecord | None:
        """What described the video's frames (None before the frames stage is built, or for an
        imported memory)."""
        with self._lock:
            row = self._conn.execute("SELECT describer, label, note FROM describers WHERE video_id=?",
                                     (video_id,)).fetchone()
        return DescriberRecord(*row) if row else None

    def objects(self, video_id: str) -> list[ObjectRecord]:
        with self._lock:
            rows = self._conn.execute(
                """SELECT object_id, category, first_s, last_s, frame_count, appearance, motion, description, embedding
                   FROM objects WHERE video_id=? ORDER BY object_id""",
                (video_id,),
            ).fetchall()
        return [ObjectRecord(*r[:8], np.frombuffer(r[8], dtype=np.float32)) for r in rows]

    def object_detections(self, video_id: str, object_id: int) -> list[DetectionRecord]:
        """Every sampled detection of one object, in time order (empty for an object that is not there)."""
        with self._lock:
            rows = self._conn.execute(
                """SELECT time_s, track_id, category, score, x1, y1, x2, y2, mask FROM detections
                   WHERE video_id=? AND object_id=? ORDER BY time_s, detection_id""",
                (video_id, int(object_id)),
            ).fetchall()
        return [DetectionRecord(r[0], r[1], r[2], r[3], (r[4], r[5], r[6], r[7]), r[8]) for r in rows]

    def detection_times(self, video_id: str) -> list[float]:
        """The distinct times of the frames the objects stage detected anything in, in order."""
        with self._lock:
            rows = self._conn.execute("SELECT DISTINCT time_s FROM detections WHERE video_id=? ORDER BY time_s",
                                      (video_id,)).fetchall()
        return [row[0] for row in rows]

    def speech(self, video_id: str) -> list[tuple[float, float, str]]:
        with self._lock:
            return self._conn.execute(
                "SELECT start_s, end_s, text FROM speech WHERE video_id=? ORDER BY start_s", (video_id,)
            ).fetchall()

    def text_in_frames(self, video_id: str) -> list[tuple[float, int, str]]:
        with self._lock:
            return self._conn.execute(
                "SELECT time_s, segment_id, text FROM text_in_frame WHERE video_id=? ORDER BY time_s, y1, x1",
                (video_id,),
            ).fetchall()

    def motion_phrases(self, video_id: str) -> dict[int, str]:
        """Segment id -> what the picture does in it (stage ``motion``; empty when not built)."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT segment_id, phrase FROM motion WHERE video_id=? ORDER BY segment_id", (video_id,)
            ).fetchall()
        return {segment_id: phrase for segment_id, phrase in rows}

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of a read query written by vidagent itself (not for user or LLM SQL: see memory.sql)."""
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def count_rows(self, table: str, video_id: str) -> int:
        if table not in set(ALL_TABLES) | {"stages", "stage_checkpoints"}:
            raise ValueError(f"unknown table {table!r}")
        with self._lock:
            return self._conn.execute(f"SELECT COUNT(*) FROM {table} WHERE video_id=?", (video_id,)).fetchone()[0]
