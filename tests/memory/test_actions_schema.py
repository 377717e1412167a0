"""Schema 5: a library of schema 4 gains the actions and object-description tables, and they are the
stages' own (written and replaced together, read through the read-only SQL views)."""

from __future__ import annotations

import sqlite3

import numpy as np

from vidagent.memory.sql import ReadOnlyQueries
from vidagent.memory.store import SCHEMA_VERSION, STAGE_TABLES, Library
from vidagent.video.video import VideoInfo

VIDEO_ID = "0" * 32


def _info() -> VideoInfo:
    return VideoInfo(path="/clips/toy.mp4", content_hash=VIDEO_ID, duration_s=6.0, fps=10.0, width=160, height=120,
                     rotation=0, has_audio=False, codec="h264", container="mp4")


def test_a_schema_4_library_gains_the_actions_tables(tmp_path):
    path = tmp_path / "library.sqlite"
    with Library(path) as library:
        library.add_video(_info())
        library.write_stage(VIDEO_ID, "speech", {}, {"speech": [(0.5, 1.5, "hi")]}, 0.1)
    connection = sqlite3.connect(path)
    connection.executescript("""DROP TABLE actions; DROP TABLE object_descriptions;
        UPDATE meta SET value = '4' WHERE key = 'schema_version';""")
    connection.close()
    with Library(path) as library:
        assert SCHEMA_VERSION == 5
        assert library.rows("SELECT value FROM meta WHERE key = 'schema_version'") == [("5",)]
        assert library.stage_names(VIDEO_ID) == ["speech"]  # nothing else is touched
        assert library.count_rows("actions", VIDEO_ID) == 0 and library.count_rows("object_descriptions", VIDEO_ID) == 0


def test_the_actions_stages_own_their_tables_and_sql_reads_them(tmp_path):
    assert STAGE_TABLES["actions"] == ("actions",) and STAGE_TABLES["descriptions"] == ("object_descriptions",)
    path = tmp_path / "library.sqlite"
    with Library(path) as library:
        library.add_video(_info())
        library.write_stage(VIDEO_ID, "actions", {"v": 1}, {"actions": [
            (0, 1, "moves", 0.0, 2.5, "trajectory", 0.9, None), (1, 1, "stops", 2.5, 2.5, "trajectory", 0.8, None)]}, 0.1)
        library.write_stage(VIDEO_ID, "descriptions", {"v": 1}, {"object_descriptions": [
            (1, "red car, medium; moves, then stops at 2.5 s", None, 1.0, np.ones(4, np.float32).tobytes())]}, 0.1)
    rows = ReadOnlyQueries(path, VIDEO_ID).run(
        "SELECT a.verb, a.start_s, d.line FROM actions a JOIN object_descriptions d USING (object_id) ORDER BY a.start_s"
    ).rows
    assert [row[0] for row in rows] == ["moves", "stops"] and rows[0][2].startswith("red car")
