"""Read-only SQL over a library (built by the real builder with the scripted perception): reading works and is scoped to one video; writing, attaching,
loading extensions and runaway queries are refused with a clear error and change nothing."""

from __future__ import annotations

import json
import time
import subprocess
import sys
from pathlib import Path

import pytest

from vidagent.errors import MemoryStoreError, QueryRefusedError
from vidagent.memory.sql import QueryResult, ReadOnlyQueries
from vidagent.memory.store import Library
from vidagent.video.video import Video

from fakes import FakeClip, HashingEmbedder, Scene, write_clip


@pytest.fixture()
def home(scripted) -> Path:
    return scripted.home


@pytest.fixture()
def queries(scripted, home: Path):
    with ReadOnlyQueries(home / "library.sqlite", Video(scripted.toy).content_hash, timeout_s=1.0,
                         max_rows=50) as q:
        yield q


@pytest.fixture()
def short_limit(scripted, home: Path):
    """Queries stopped after a quarter of a second: the time limit's tests wait it out."""
    with ReadOnlyQueries(home / "library.sqlite", Video(scripted.toy).content_hash, timeout_s=0.25,
                         max_rows=50) as q:
        yield q


def _snapshot(home: Path) -> list:
    with Library(home / "library.sqlite") as library:
        return [library.rows(f"SELECT COUNT(*) FROM {t}") for t in ("videos", "segments", "frames", "stages")]


def test_reads_only_the_videos_own_rows(queries, home):
    result = queries.run("SELECT segment_id, start_s, end_s FROM segments ORDER BY segment_id")
    assert result.columns == ["segment_id", "start_s", "end_s"]
    assert [row[0] for row in result.rows] == [0, 1, 2]  # the 5 s clip, not the other video's 3 segments too
    assert queries.run("SELECT COUNT(*) FROM videos").rows == [(1,)]


@pytest.mark.parametrize("statement", [
    "SELECT video_id FROM main.videos",  # issue 41: every video's path
    "WITH x AS (SELECT video_id, path FROM main.videos) SELECT video_id FROM x",  # issue 55: a CTE's name as a source
    "WITH x AS (SELECT video_id FROM main.segments) SELECT DISTINCT video_id FROM x",
    "WITH x AS (SELECT * FROM segments WHERE video_id IN (SELECT video_id FROM main.videos)) SELECT video_id FROM x",
    "SELECT DISTINCT video_id FROM main.stages UNION SELECT video_id FROM temp.sqlite_master, main.frames",
])
def test_no_query_reaches_another_video(queries, statement):
    """By construction: the statements run on a private copy of this video's rows, nothing else is reachable."""
    assert {row[0] for row in queries.run(statement).rows} == {queries.video_id}


def test_tables_are_filled_when_first_read_whatever_the_statement(home, scripted):
    with ReadOnlyQueries(home / "library.sqlite", Video(scripted.toy).content_hash) as fresh:
        assert fresh.run("EXPLAIN QUERY PLAN SELECT * FROM segments").rows  # the user's own EXPLAIN still works
        assert fresh.run("SELECT (SELECT COUNT(*) FROM frames) > 0, EXISTS (SELECT 1 FROM segments)").rows == [(1, 1)]
        assert fresh.run("WITH s AS (SELECT segment_id FROM segments) SELECT COUNT(*) FROM s").rows == [(3,)]


def test_the_schema_and_pragmas_show_only_this_videos_tables(queries):
    tables = {row[0] for row in queries.run("WITH x AS (SELECT name FROM main.sqlite_master) SELECT * FROM x").rows}
    listed = {row[1] for row in queries.run("PRAGMA table_list").rows}
    assert "segments" in tables and "meta" not in tables and "stage_checkpoints" not in tables
    assert "meta" not in listed and "stage_checkpoints" not in listed
    assert {row[0] for row in queries.run("PRAGMA table_list").rows} == {"main", "temp"}  # the library: not attached
    assert queries.run("PRAGMA table_info(segments)").rows


@pytest.mark.parametrize("statement, message", [
    ("SELECT randomblob(1000000000)", "larger than 8 MB"),  # one allocation: no deadline stops it
    ("SELECT randomblob(5000000) || randomblob(5000000)", "larger than 8 MB"),
    ("SELECT length(zeroblob(2000000000))", "larger than 8 MB"),
    # issue 55: SQLite fills these one character at a time in one instruction (12 s each before)
    ("SELECT length(printf('%.*c', 2000000000, 'x')), length(format('%.*c', 2000000000, 'y'))", "larger than 8 MB"),
    ("SELECT printf('%.2000000000c', 'x')", "larger than 8 MB"),
    ("SELECT printf('%s %.*c', 'a', '2000000000', 'x')", "larger than 8 MB"),
])
def test_no_query_makes_a_huge_value(queries, statement, message):
    with pytest.raises(MemoryStoreError, match=message):
        queries.run(statement)
    assert queries.run("SELECT printf('%5.1f|%-3s|%.*c', 2.25, 'ab', 3, 'z')").rows == [("  2.3|ab |zzz",)]


def test_a_result_too_large_in_all_is_refused(queries):
    with pytest.raises(MemoryStoreError, match="SQL result larger than 64 MB"):
        queries.run("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 20) "
                    "SELECT zeroblob(8000000) FROM n")


@pytest.mark.parametrize("statement", [
    "DELETE FROM segments",
    "UPDATE segments SET description = 'x'",
    "INSERT INTO main.videos SELECT * FROM videos",
    "PRAGMA query_only = 0",
    "DROP TABLE main.segments",
    "CREATE TABLE t (x)",
    "ATTACH DATABASE ':memory:' AS other",
    "PRAGMA main.journal_mode = DELETE",
    "SELECT load_extension('libsqlite3_mod')",
    "VACUUM",
    "BEGIN",
])
def test_writes_are_refused_and_change_nothing(queries, home, statement):
    before = _snapshot(home)
    with pytest.raises(QueryRefusedError, match="SQL refused"):
        queries.run(statement)
    assert _snapshot(home) == before
    assert queries.run("SELECT COUNT(*) FROM segments").rows == [(3,)]  # still usable afterwards


def test_a_runaway_query_is_stopped_by_the_time_limit(short_limit):
    with pytest.raises(MemoryStoreError, match="stopped after 0.25 s"):
        short_limit.run("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT COUNT(*) FROM n")


@pytest.mark.parametrize("statement", [
    # issue 55: few instructions, each making a large value (20 s before: the deadline was checked every 2000)
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 400000) "
    "SELECT sum(length(randomblob(8000000))) FROM n",
    # issue 55: an ORDER BY over large blobs (3.2 GB in the CLI before)
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 100000) "
    "SELECT length(b) FROM (SELECT randomblob(8000000) AS b FROM n) ORDER BY b LIMIT 1",
])
def test_large_values_in_a_loop_are_stopped_by_the_time_limit(short_limit, statement):
    started = time.perf_counter()
    with pytest.raises(MemoryStoreError, match="stopped after 0.25 s"):
        short_limit.run(statement)
    assert time.perf_counter() - started < 2.25  # the limit, and at most a few values more


def test_a_million_rows_are_cut_to_the_row_limit_and_a_short_text(queries):
    result = queries.run("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n LIMIT 1000000) SELECT x FROM n")
    assert len(result.rows) == 50 and result.truncated
    text = result.to_text(max_rows=20)
    assert len(text.splitlines()) == 22 and "more rows not shown" in text and len(text) < 400


def test_errors_are_one_line(queries):
    with pytest.raises(MemoryStoreError, match="no such table: missing_table"):
        queries.run("SELECT * FROM missing_table")
    with pytest.raises(MemoryStoreError, match="one statement"):
        queries.run("SELECT 1; SELECT 2")
    with pytest.raises(ValueError, match="empty"):
        queries.run("  ;")


def test_blobs_are_summarised(queries):
    text = queries.run("SELECT embedding FROM segments LIMIT 1").to_text()
    assert f"<{4 * HashingEmbedder.dim}-byte blob>" in text  # float32


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vidagent.cli", "--home", str(home), "sql", *args],
                          capture_output=True, text=True, timeout=120)


def test_cli_prints_rows_as_json_and_refuses_writes(scripted, home):
    clip = str(scripted.text)
    done = _cli(home, clip, "SELECT DISTINCT text FROM text_in_frame", "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["columns"] == ["text"]
    assert any("clideo" in row[0].lower() for row in payload["rows"])  # the watermark, read by (scripted) OCR
    refused = _cli(home, clip, "DELETE FROM segments")
    assert refused.returncode == 6 and refused.stdout == ""
    assert refused.stderr.strip().startswith("vidagent: error: SQL refused") and len(refused.stderr.splitlines()) == 1


def test_cli_explains_an_unindexed_video(tmp_path, home):
    other = str(write_clip(FakeClip("unindexed", [Scene("a dog on a lawn")]), tmp_path))
    done = _cli(home, other, "SELECT 1")
    assert done.returncode == 5 and "not indexed yet" in done.stderr


def test_infinities_nan_and_blobs_format_as_text_and_valid_json():
    result = QueryResult("SELECT ...", ["a", "b", "c", "d", "e", "f"],
                         [(float("inf"), float("-inf"), float("nan"), b"\x00\xff\x01", 2.5, 1e300)], False, 0.0)
    assert result.to_text().splitlines()[1] == "inf | -inf | nan | <3-byte blob> | 2.5 | 1e+300"
    payload = json.dumps(result.to_json(), allow_nan=False)  # raises on a bare Infinity or NaN
    assert json.loads(payload)["rows"] == [["inf", "-inf", "nan", "<3-byte blob>", 2.5, 1e300]]


def test_cli_formats_an_overflowing_float_instead_of_crashing(scripted, home, capsys):
    from vidagent.cli import main

    clip = str(scripted.toy)
    query = "SELECT 1e999 AS big, -1e999 AS small, x'00ff' AS raw"
    assert main(["--home", str(home), "sql", clip, query]) == 0
    assert capsys.readouterr().out.splitlines() == ["big | small | raw", "inf | -inf | <2-byte blob>"]
    assert main(["--home", str(home), "sql", clip, query, "--json"]) == 0
    out = capsys.readouterr().out
    assert "Infinity" not in out
    assert json.loads(out)["rows"] == [["inf", "-inf", "<2-byte blob>"]]


@pytest.mark.parametrize("statement", ["DROP TABLE objects", "DROP VIEW segments", "CREATE VIEW v AS SELECT 1"])
def test_a_change_of_schema_is_refused_saying_so(queries, statement):
    with pytest.raises(QueryRefusedError, match="tried to change the schema: create, drop or alter"):
        queries.run(statement)


def test_a_stored_value_longer_than_a_statement_may_make_is_refused_only_where_it_is_read(scripted, home, tmp_path):
    """A library written before caption caps may hold a 10 MB description: the video's other rows stay readable."""
    import shutil
    import sqlite3

    library = shutil.copy(home / "library.sqlite", tmp_path / "library.sqlite")
    video_id = Video(scripted.toy).content_hash
    with sqlite3.connect(library) as db:
        db.execute("UPDATE segments SET description = ? WHERE video_id = ? AND segment_id = 1",
                   ("x" * (10 * 2**20), video_id))
    with ReadOnlyQueries(library, video_id) as fresh:
        assert fresh.run("SELECT segment_id FROM segments ORDER BY segment_id").rows == [(0,), (1,), (2,)]
        with pytest.raises(MemoryStoreError, match="larger than 8 MB"):
            fresh.run("SELECT description FROM segments WHERE segment_id = 1")
        assert fresh.run("SELECT length(description) < 1000 FROM segments WHERE segment_id = 0").rows == [(1,)]
