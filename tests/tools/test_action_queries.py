"""The sub-task tools and object_memory_querying read the actions and object lines (issue 25, items 2-3),
over the generated clip of tests/memory/test_actions.py built with the scripted perception."""

from __future__ import annotations

import pytest

from fakes import HashingEmbedder, ScriptedLLM, build_home, fake_settings
from test_actions import _shapes_clip
from vidagent.memory.sql import ReadOnlyQueries
from vidagent.memory.store import Library
from vidagent.memory.video_memory import VideoMemory
from vidagent.tools.sql_agent import SQLSubAgent, SQLTools
from vidagent.video.video import Video


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    home = tmp_path_factory.mktemp("action-queries")
    clip = _shapes_clip()
    settings = fake_settings(home)
    video = Video(build_home(home, [clip], ["objects"], settings=settings)[clip.name])
    library = Library(settings.library_path)
    with ReadOnlyQueries(settings.library_path, video.content_hash) as queries:
        yield VideoMemory(video, library), queries
    library.close()


def test_a_when_question_is_answered_from_the_actions(shapes):
    _, queries = shapes
    sql = ("SELECT a.start_s, a.end_s FROM actions a JOIN objects o ON o.object_id = a.object_id "
           "WHERE o.category = 'car' AND a.verb = 'stops'")
    llm = ScriptedLLM([sql, "The car stops at 3 s."])
    observation = SQLSubAgent("when", llm, queries).answer("When does the car stop?")
    assert not observation.is_error and "start_s | end_s\n3 | 3" in observation.text
    assert [(e.start_s, e.end_s) for e in observation.evidence] == [(3.0, 3.0)]
    request = llm.requests[0][0].content
    assert "actions(object_id, verb, start_s, end_s" in request and "a.verb = 'sits down'" in request


def test_verbs_are_the_memorys_words_not_video_text(shapes):
    _, queries = shapes
    llm = ScriptedLLM(["SELECT verb FROM actions WHERE verb = 'carries'", "The person carries something."])
    observation = SQLSubAgent("what", llm, queries).answer("What does the person do?")
    assert "verb\ncarries" in observation.text  # a fixed word of the memory, not quoted as video text


def test_object_retrieval_ranks_by_the_object_lines(shapes):
    memory, queries = shapes
    tools = SQLTools(memory, HashingEmbedder(), ScriptedLLM([]), queries)
    shown = tools._candidate_objects("Which thing is carried around?")
    first = shown.splitlines()[1]
    assert first.startswith("object ") and "handbag" in first and "is carried object" in first


def test_an_object_memory_without_actions_is_built_again(shapes, tmp_path):
    """A library whose objects stage was built before schema 5 lacks the actions and lines: the object
    tools build them (the builder brings them with the objects stage) instead of reading empty tables."""
    memory, queries = shapes
    built: list[int] = []
    tools = SQLTools(memory, HashingEmbedder(), ScriptedLLM([]), queries, build_objects=lambda: built.append(1))
    assert tools.ensure_objects() is None and built == []
    with Library(tmp_path / "library.sqlite") as library:
        library.add_video(memory.video.info)
        library.write_stage(memory.video_id, "objects", {"built": "before actions"}, {}, 0.1)
        old = SQLTools(VideoMemory(memory.video, library), HashingEmbedder(), ScriptedLLM([]), queries,
                       build_objects=lambda: built.append(2))
        assert old.ensure_objects() is None and built == [2]
