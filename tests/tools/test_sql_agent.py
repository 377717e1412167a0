"""The SQL sub-agents (object_memory_querying, When/Why/What/How/Count/Other) over a stored memory built
by the real builder with the scripted perception, with a scripted LLM so every step is deterministic."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vidagent.memory.sql import ReadOnlyQueries
from vidagent.memory.store import Library
from vidagent.memory.video_memory import VideoMemory
from vidagent.prompts import load_prompt
from vidagent.tools.sql_agent import SUBTASK_KINDS, SQLSubAgent, SQLTools, extract_sql, tool_descriptions
from vidagent.video.video import Video

from fakes import HashingEmbedder, ScriptedLLM


@pytest.fixture()
def queries(scripted):
    with ReadOnlyQueries(scripted.home / "library.sqlite", Video(scripted.text).content_hash) as q:
        yield q


@pytest.mark.parametrize("reply, expected", [
    ("SELECT COUNT(*) FROM objects", "SELECT COUNT(*) FROM objects"),
    ("```sql\nSELECT text\nFROM text_in_frame;\n```\nThis finds the text.", "SELECT text FROM text_in_frame"),
    ("SQL: select * from speech where text like '%hi%';", "select * from speech where text like '%hi%'"),
    ("WITH a AS (SELECT 1 AS x) SELECT x FROM a\n\nThis query ...", "WITH a AS (SELECT 1 AS x) SELECT x FROM a"),
    ("I cannot write SQL for that.", None),
])
def test_extract_sql(reply, expected):
    assert extract_sql(reply) == expected


def test_every_kind_has_examples_and_a_description():
    descriptions = tool_descriptions()
    for kind in SUBTASK_KINDS:
        assert descriptions[kind].startswith("Useful")
        assert load_prompt("vidagent.tools", f"sql_examples_{kind}").count("SQL: SELECT") >= 2
    assert "object_memory_querying" in descriptions


def test_sub_agent_writes_sql_runs_it_and_answers_from_the_rows(queries):
    llm = ScriptedLLM(["SELECT time_s, text FROM text_in_frame ORDER BY time_s LIMIT 3",
                       "The screen shows the clideo.com watermark."])
    observation = SQLSubAgent("what", llm, queries).answer("What is written on the screen?")
    assert not observation.is_error
    assert "clideo" in observation.text.lower()  # the stored OCR rows are in the observation
    assert "text\n1 | <video_text>clideo" in observation.text  # read in the video: quoted as data
    assert observation.text.endswith("Answer: <video_text>The screen shows the clideo.com watermark.</video_text>")
    assert observation.evidence and all(e.start_s == e.end_s for e in observation.evidence)  # time_s spans
    assert observation.artifacts["sql"].startswith("SELECT time_s")
    request = llm.requests[0][0].content
    assert "text_in_frame(time_s" in request and "What is written on the sign?" in request  # schema + examples
    assert "Question: What is written on the screen?" in llm.requests[1][0].content


def test_a_failed_or_writing_query_is_retried_once_with_the_error(queries):
    llm = ScriptedLLM(["DELETE FROM segments", "SELECT COUNT(*) AS n FROM segments", "There are 3 segments."])
    observation = SQLSubAgent("count", llm, queries).answer("How many segments are there?")
    assert not observation.is_error
    assert observation.text.startswith("SQL: SELECT COUNT(*) AS n FROM segments\nResult:\nn\n3\n")
    retry = llm.requests[1][-1].content
    assert "SQL refused" in retry or "read-only" in retry


def test_two_failures_give_an_error_observation_not_an_exception(queries):
    llm = ScriptedLLM(["no idea", "SELECT * FROM missing_table"])
    observation = SQLSubAgent("other", llm, queries).answer("Who slides farther?")
    assert observation.is_error and "missing_table" in observation.text


def test_object_tools_without_an_object_memory_fail_instead_of_counting_zero(scripted, queries):
    """The clip's object memory is not built and cannot be here: a count over the empty object tables
    is a failed call, not a confident 0 (issue 24, item 2)."""
    video = Video(scripted.text)
    with Library(scripted.home / "library.sqlite") as library:
        memory = VideoMemory(video, library)
        assert "objects" not in memory.stages
        llm = ScriptedLLM(["SELECT COUNT(*) AS n FROM objects WHERE category = 'teddy bear'"])
        tools = SQLTools(memory, HashingEmbedder(), llm, queries)
        by_name = {tool.name: tool for tool in tools.tools(("object",) + SUBTASK_KINDS)}
        querying = by_name["object_memory_querying"].function("How many teddy bears are there?")
        count = by_name["count"].function("How many teddy bears are there?")
    assert querying.is_error and querying.text == "No object memory: this video's object memory is not built."
    assert count.is_error and "No object memory" in count.text and "n\n0" not in count.text
    assert len(llm.requests) == 1  # the count's SQL; no answer was made up from empty tables


def test_a_sub_task_tool_builds_the_object_memory_its_sql_reads(queries):
    built: list[str] = []

    class Memory:  # stands in for a VideoMemory whose object stage is built on the first call
        stages = ["frames", "speech", "segments"]

    def build() -> None:
        built.append("objects")
        Memory.stages = Memory.stages + ["objects"]

    llm = ScriptedLLM(["SELECT COUNT(*) AS n FROM segments", "3 segments.",
                       "SELECT COUNT(*) AS n FROM detections", "None."])
    tools = SQLTools(Memory(), None, llm, queries, build_objects=build)  # type: ignore[arg-type]
    count = next(tool for tool in tools.tools(SUBTASK_KINDS) if tool.name == "count")
    assert not count.function("How many segments?").is_error and built == []  # time tables need no objects
    count.function("How many detections?")
    assert built == ["objects"]


@pytest.mark.parametrize("replies, said", [
    (["SELECT start_s, end_s FROM segments WHERE description LIKE '%unicorn%'"], "Result: no rows."),
    (["SELECT start_s, end_s FROM segments LIMIT 1", "No such information."], "Answer: <video_text>No such"),
])
def test_an_sql_result_that_holds_nothing_is_a_failed_call(queries, replies, said):
    """DoraemonGPT's A.2: a sub-question the memory has no information for is a failed attempt."""
    llm = ScriptedLLM(replies)
    observation = SQLSubAgent("when", llm, queries).answer("When does the unicorn appear?")
    assert observation.is_error and said in observation.text
    assert "The memory has no such information" in observation.text and not llm.replies


@pytest.mark.parametrize("sql, answer", [
    ("SELECT COUNT(*) AS segments FROM segments", "Answer: 3"),
    ("SELECT MAX(end_s) FROM segments", "Answer: 6.1"),
])
def test_a_result_that_is_one_number_is_the_answer_whatever_the_model_reading_it_says(queries, sql, answer):
    """Asked to read "dogs / 2" for "How many dogs appear?", the 1.5B model replied "No such information" and the
    count was lost in an error step (issue 52): a single number is the SQL's answer as it stands."""
    llm = ScriptedLLM([sql, "No such information."])
    observation = SQLSubAgent("count", llm, queries).answer("How many segments are there?")
    assert not observation.is_error and observation.text.endswith(answer)
    assert "Answer: No such" not in observation.text and not llm.replies


def test_the_schema_prompt_lists_every_table_the_sql_can_read():
    from vidagent.memory.store import ALL_TABLES, BUILD_ONLY_TABLES

    schema = load_prompt("vidagent.tools", "sql_schema")
    listed = {line.split("(")[0] for line in schema.splitlines()[1:]}
    # what wrote the memory is its note, said once; the build's own tables are not read by SQL
    assert set(ALL_TABLES) - {"caption_sources", "describers"} - set(BUILD_ONLY_TABLES) <= listed
    assert "tracks(track_id, object_id" in schema and "motion(segment_id, start_s, end_s, camera" in schema


def _library_with_objects(scripted, tmp_path: Path, appearance: str,
                          objects: list[tuple[int, str, str, np.ndarray]]) -> Path:
    """A copy of the temporal library whose TEMPORAL_TEXT memory holds these objects (id, category,
    description, feature), as an objects stage built with the appearance model named."""
    import json
    import shutil
    import sqlite3

    home = tmp_path / "home"
    shutil.copytree(scripted.home, home)
    video_id = Video(scripted.text).content_hash
    embeddings = HashingEmbedder().embed_passages([description for _, _, description, _ in objects])
    with sqlite3.connect(home / "library.sqlite") as db:
        db.execute("INSERT INTO stages VALUES (?, 'objects', 'k', ?, '2026-01-01', 1.0)",
                   (video_id, json.dumps({"appearance": appearance})))
        for (object_id, category, description, feature), embedding in zip(objects, embeddings):
            db.execute("INSERT INTO objects VALUES (?,?,?,0.0,6.0,4,'','',?,?,?)",
                       (video_id, object_id, category, description, np.asarray(embedding, np.float32).tobytes(),
                        np.asarray(feature, np.float32).tobytes()))
    return home / "library.sqlite"


@pytest.mark.models  # CLIP and DINOv2 backends (tiny random weights)
def test_object_retrieval_is_by_clip_text_to_feature_similarity_when_the_features_are_clip(tmp_path, scripted):
    """VideoAgent's feature table (issue 24, item 6): the words the question names, embedded by CLIP's
    text tower, against the objects' stored CLIP features, not the question against generated text."""
    from hf_tiny_models import save_clip, save_dinov2

    from vidagent.perception.hf.embedders import ClipDinoAppearance, ClipEmbedder, DinoEmbedder
    from vidagent.tools.sql_agent import object_query

    question = "When does the shiny thing appear on the left?"
    assert object_query(question) == "shiny thing left"
    appearance = ClipDinoAppearance(ClipEmbedder(str(save_clip(tmp_path / "clip"))),
                                    DinoEmbedder(str(save_dinov2(tmp_path / "dino"))))
    wanted = appearance.text_features(["shiny thing left"])[0]
    other = appearance.text_features(["zzzz"])[0]
    assert float(wanted @ other) < 0.99  # two different CLIP rows
    dino = np.zeros(8, np.float32)
    path = _library_with_objects(scripted, tmp_path, appearance.name, [
        (1, "bottle", "a shiny thing on the left, a bottle", np.concatenate([other, dino])),
        (2, "vase", "a dull vase on the right", np.concatenate([wanted, dino])),
    ])
    video = Video(scripted.text)
    with Library(path) as library, ReadOnlyQueries(path, video.content_hash) as queries:
        memory = VideoMemory(video, library)
        by_text = SQLTools(memory, HashingEmbedder(), ScriptedLLM([]), queries)._candidate_objects(question)
        by_clip = SQLTools(memory, HashingEmbedder(), ScriptedLLM([]), queries,
                           appearance=appearance)._candidate_objects(question)
        other_model = ClipDinoAppearance(ClipEmbedder(str(tmp_path / "clip")), DinoEmbedder("another/dino"))
        not_comparable = SQLTools(memory, HashingEmbedder(), ScriptedLLM([]), queries,
                                  appearance=other_model)._candidate_objects(question)
    assert by_text.splitlines()[1].startswith("object 1: ")  # descriptions: the bottle's line says it
    assert by_clip.splitlines()[1].startswith("object 2: ")  # CLIP features: the vase's matches the words
    assert not_comparable.splitlines()[1].startswith("object 1: ")  # features of another model: not read
