"""Ask while indexing (vidagent.memory.glance) on the scripted perception: the coarse pass, refining a
window, the coverage said with the answer, and a full index that completes a partial memory being a
fresh full index."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fakes.library import fake_settings
from fakes.llm import ScriptedLLM
from fakes.perception import FakeClip, long_clip, scripted_perception, write_clip

from vidagent.agent.steps import ObservationStep
from vidagent.memory.builder import TEMPORAL_STAGES, MemoryBuilder
from vidagent.memory.coverage import Coverage, clock, merge_windows
from vidagent.memory.glance import Glance
from vidagent.memory.store import Library
from vidagent.memory.video_memory import VideoMemory
from vidagent.session import Session
from vidagent.video.video import Video

TABLES = {"frames": "time_s", "text_in_frame": "time_s, text", "speech": "start_s", "segments": "segment_id",
          "clips": "clip_id", "describers": "describer"}


@pytest.fixture(scope="module")
def clip() -> FakeClip:
    return long_clip()


@pytest.fixture()
def video(clip, tmp_path) -> Video:
    return Video(write_clip(clip, tmp_path / "videos"))


def _builder(library: Library, clip: FakeClip, home: Path) -> MemoryBuilder:
    return MemoryBuilder(library, scripted_perception(clip), fake_settings(home))


def _rows(library: Library, video_id: str, table: str) -> list[tuple]:
    return library.rows(f"SELECT * FROM {table} WHERE video_id=? ORDER BY {TABLES[table]}", (video_id,))


@pytest.fixture()
def full(clip, video, tmp_path) -> dict[str, list[tuple]]:
    """The tables of a fresh full index of the clip."""
    home = tmp_path / "full"
    with Library(home / "library.sqlite") as library:
        _builder(library, clip, home).build(video, TEMPORAL_STAGES, progress=False)
        return {table: _rows(library, video.content_hash, table) for table in TABLES}


def test_the_coarse_pass_describes_a_frame_every_interval_and_is_never_taken_for_a_full_memory(clip, video, tmp_path):
    home = tmp_path / "glance"
    with Library(home / "library.sqlite") as library:
        builder = _builder(library, clip, home)
        glance = Glance(builder, video, 10.0, speech=True)
        assert glance.needed()
        memory = glance.open()
        frames = [row[1] for row in _rows(library, video.content_hash, "frames")]
        # picks: the middle segment of every 10 s (segments 2, 7, 12, ...: 5 s, 15 s, ...); each is seen in
        # the keyframe nearest to it within 5 s, kept at the sample time of the segment showing that keyframe
        assert len(frames) == 6 and all(any(abs(t - pick) <= 5.0 for t in frames) for pick in range(5, 60, 10))
        # the first look is not the full build's result for those times: nothing a completion resumes from
        assert library.count_rows("stage_checkpoints", video.content_hash) == 0
        assert "frames" in builder.missing_stages(video) and "segments" in builder.missing_stages(video)
        assert library.stage_names(video.content_hash) == ["speech"]  # a partial memory's stages are not built
        assert not builder.missing_stages(video, ["speech"])  # speech is built whole, beside the frames
        assert memory.segment_count == 30  # the full memory's segment ids from the first answer on
        empty = [s for s in memory.segments if not (s.description or s.speech or s.on_screen_text)]
        assert empty and all(not s.embedding.any() for s in empty)
        coverage = memory.coverage
        assert coverage is not None and coverage.every_s == 10.0 and coverage.speech
        assert coverage.text().startswith("answered from 0:00-1:00 sampled every 10 s")
        assert VideoMemory(video, library).coverage == coverage  # read back from the stored config
        ranked = memory.rank_segments(memory.segments[12].embedding, top_k=30)
        assert ranked and all(r.segment.description or r.segment.speech for r in ranked)


def test_a_refined_window_equals_the_full_index_there(clip, video, tmp_path, full):
    home = tmp_path / "glance"
    with Library(home / "library.sqlite") as library:
        memory = Glance(_builder(library, clip, home), video, 10.0, speech=True).open()
        # the first look saw a frame near 25 s, not the full build's frames there: described in full now
        assert memory.refine(25.0, 30.0) == [(24.0, 30.0)]
        assert memory.refine(25.0, 30.0) == []  # described already: nothing to do
        refined = memory.refine(36.5, 39.0)
        # segments 18-19; 41 s takes the result of 37 s (a near-duplicate), so segment 20 comes with them
        assert refined == [(36.0, 42.0)]
        full_segments = {row[1]: row for row in full["segments"]}
        for segment in memory.segments_between(36.0, 42.0):
            row = full_segments[segment.segment_id]
            assert (segment.description, segment.speech, segment.on_screen_text) == row[4:7]
            assert np.array_equal(segment.embedding, np.frombuffer(row[7], np.float32))
        full_frames = {row[1]: row for row in full["frames"]}
        in_full = [row for row in _rows(library, video.content_hash, "frames") if 24.0 <= row[1] < 30.0 or 36.0 <= row[1] < 42.0]
        assert len(in_full) == 6 and all(row == full_frames[row[1]] for row in in_full)
        coverage = memory.coverage
        assert any(a <= 36.0 and b >= 42.0 for a, b in coverage.full) and coverage.refined == ((24.0, 30.0), *refined)
        assert memory.refine(40.0, 52.0) == [(42.0, 54.0)]
        assert "; 0:36-0:54 in full;" in memory.coverage.text()  # a window narrower than the interval goes unsaid


def test_a_full_index_completes_a_partial_memory_into_a_fresh_full_one(clip, video, tmp_path, full):
    home = tmp_path / "glance"
    with Library(home / "library.sqlite") as library:
        memory = Glance(_builder(library, clip, home), video, 10.0).open()
        memory.refine(40.0, 46.0)
        completed = _builder(library, clip, home).build(video, TEMPORAL_STAGES, progress=False)
        assert completed.coverage is None
        for table in TABLES:
            assert _rows(library, video.content_hash, table) == full[table], table
        assert library.count_rows("stage_checkpoints", video.content_hash) == 0


def test_react_answers_from_the_glance_refines_what_it_reads_and_says_its_coverage(clip, video, tmp_path):
    llm = ScriptedLLM([
        'Thought: read on\nAction: caption_retrieval\nAction Input: {"start_segment": 20, "end_segment": 24}',
        "Thought: I now know the final answer\nFinal Answer: a bowl",
    ])
    with Session(fake_settings(tmp_path / "home"), llm=llm, perception=scripted_perception(clip)) as session:
        answer = session.ask(video, "What is on the table after the bottle?", glance=10.0)
        observations = [s for s in answer.trace if isinstance(s, ObservationStep)]
        # the overview reads segments 0-14 whole: described at the full rate first (the first look's frames
        # are not the full build's)
        assert observations[0].artifacts["refined"] == [[0.0, 30.0]]
        assert "scene 1: a book" in observations[0].text and "scene 3: a vase" in observations[0].text
        # the model's read (40-50 s), with the key frames its near-duplicates take their results from (37 s for
        # 41 s, 43 s for 43-47 s, 49 s)
        assert observations[1].artifacts["refined"] == [[36.0, 54.0]]
        assert observations[1].summary().startswith("[refined for this read: 36-54 s] Observation: Segment 20")
        assert "Segment 20 (40.0-42.0 s): scene 6: a bowl" in observations[1].text
        assert "Segment 24 (48.0-50.0 s): scene 8: a teddy bear" in observations[1].text
        coverage = answer.artifacts["coverage"][video.content_hash]
        assert coverage["every_s"] == 10.0 and not coverage["speech"]  # the glance leaves speech to the index
        assert coverage["refined"] == [[0.0, 30.0], [36.0, 54.0]]
        assert coverage["text"] == "answered from 0:00-1:00 sampled every 10 s; 0:00-0:30, 0:36-0:54 in full; " \
            "no speech yet"
        session.index(video, TEMPORAL_STAGES, progress=False)
        assert session.library.stage_config(video.content_hash, "segments").get("glance") is None


def test_peil_narrates_from_the_glance_and_refines_the_clip_it_reads(clip, video, tmp_path):
    llm = ScriptedLLM([
        'Thought: after the bowl\nAction: temporal_reason("after: 40", visual[0])',
        'Thought: narrate the clip\nAction: video_narration(None, visual[1])',
        "Thought: I now know the final answer\nFinal Answer: a teddy bear",
        "Yes",  # the Learner's self-check
    ])
    with Session(fake_settings(tmp_path / "home"), llm=llm, perception=scripted_perception(clip)) as session:
        answer = session.ask(video, "What is on the table after the bowl?", planner="peil", glance=10.0)
    overview, cut, narration = [s for s in answer.trace if isinstance(s, ObservationStep)]
    # the automatic narration of the whole video (30 segments) is skimmed among those the glance looked at
    assert "refined" not in overview.artifacts
    stretches = [line for line in overview.text.splitlines() if " s: " in line]
    assert stretches and all(not line.endswith(" s: ") for line in stretches)
    assert cut.text.startswith("temporal_reason of visual[0]:\n'after: 40' is 45.0-52.5 s.")
    # the clip (segments 22-26) is read whole, with the key frames its near-duplicates take their results from
    assert narration.artifacts["refined"] == [[42.0, 54.0]]
    assert narration.summary().startswith("[refined for this read: 42-54 s] Observation: video_narration of visual[1]")
    assert "48.0-50.0 s: scene 8: a teddy bear" in narration.text
    assert answer.artifacts["coverage"][video.content_hash]["refined"] == [[42.0, 54.0]]


def test_assist_modules_refine_the_window_they_read(clip, video, tmp_path):
    from vidagent.tools.assist import AssistModules
    from vidagent.tools.media import video_media
    from vidagent.tools.vqa import DescribedFramesVQA

    perception = scripted_perception(clip)
    llm = ScriptedLLM(["a teddy bear", "still a teddy bear"])
    with Library(tmp_path / "library.sqlite") as library:
        memory = Glance(MemoryBuilder(library, perception, fake_settings(tmp_path)), video, 10.0).open()
        modules = AssistModules(perception.describer, perception.reader, perception.detector, perception.embedder,
                                DescribedFramesVQA(perception.describer, llm), llm)
        whole = video_media(memory)
        grounded = modules.narration_ground("a book", whole.clip(6.0, 12.0))  # 7-11 s: not seen by the glance
        assert grounded.artifacts["refined"] == [[6.0, 12.0]] and "scene 1: a book" in grounded.text
        read = modules.text_detect(None, whole.clip(18.0, 24.0))  # scene 3: "sign 3", not seen either
        assert read.artifacts["refined"] == [[18.0, 24.0]] and "sign 3" in read.text
        reasoned = modules.narration_reason("What is on the table?", whole.clip(48.0, 54.0))
        assert reasoned.artifacts["refined"] == [[48.0, 54.0]]
        assert "scene 8: a teddy bear" in llm.requests[0][-1].content  # the narration it reasoned over, refined
        assert "refined" not in modules.narration_reason("And now?", whole.clip(48.0, 54.0)).artifacts
        assert modules.video_narration(None, whole).artifacts == {}  # the whole video is skimmed, not refined


def test_coverage_windows_and_text():
    coverage = Coverage(1200.0, 10.0, merge_windows([(190.0, 200.0), (200.0, 220.0), (10.0, 12.0)]), False)
    assert coverage.full == ((10.0, 12.0), (190.0, 220.0))
    assert coverage.missing((180.0, 230.0)) == [(180.0, 190.0), (220.0, 230.0)]
    # a window shorter than the interval is a sample's own segment, said by "sampled every"
    assert coverage.text() == "answered from 0:00-20:00 sampled every 10 s; 3:10-3:40 in full; no speech yet"
    assert Coverage.from_dict(coverage.to_dict()) == coverage
    assert not coverage.complete and Coverage(4.0, 10.0, ((0.0, 4.0),), True).complete
    assert clock(3723) == "1:02:03"
    assert [Coverage(263.0, every).interval_text for every in (10.0, 52.608, 240.0, 1234.5)] == \
        ["10 s", "52.6 s", "240 s", "1234 s"]


def test_the_ask_command_glances_says_its_coverage_and_completes(clip, video, tmp_path, monkeypatch, capsys, full):
    import vidagent.llm.client
    from vidagent.cli import main as cli_main
    from vidagent.perception.suite import Perception

    monkeypatch.setenv("VIDAGENT_HOME", str(tmp_path / "cli"))
    monkeypatch.setattr(Perception, "from_settings", classmethod(lambda cls, settings: scripted_perception(clip)))
    replies = ["Thought: I now know the final answer\nFinal Answer: a cup"]
    monkeypatch.setattr(vidagent.llm.client, "build_llm", lambda settings: ScriptedLLM(list(replies)))
    assert cli_main(["ask", str(video.path), "What is first on the table?", "--glance", "-q"]) == 0
    printed = capsys.readouterr().out
    assert "Answer: a cup" in printed and "Coverage: answered from 0:00-1:00 sampled every 20 s; " in printed
    assert cli_main(["ask", str(video.path), "What is first on the table?", "--glance", "10", "--json", "-q",
                     "--complete"]) == 0
    payload = json.loads(capsys.readouterr().out)
    # the stored glance is taken up (its frames kept), sampled at the interval asked now
    assert payload["artifacts"]["coverage"][video.content_hash]["every_s"] == 10.0
    with Library(tmp_path / "cli" / "library.sqlite") as library:
        for table in TABLES:
            assert _rows(library, video.content_hash, table) == full[table], table


def test_visual_question_answering_refines_the_window_it_looks_at(clip, video, tmp_path):
    from vidagent.tools.temporal import TemporalTools
    from vidagent.tools.vqa import DescribedFramesVQA

    perception = scripted_perception(clip)
    llm = ScriptedLLM(["a clock", "still a clock"])
    with Library(tmp_path / "library.sqlite") as library:
        builder = MemoryBuilder(library, perception, fake_settings(tmp_path))
        memory = Glance(builder, video, 10.0).open()
        tools = TemporalTools(memory, perception.embedder, DescribedFramesVQA(perception.describer, llm), llm)
        looked = tools.visual_question_answering("What is on the table?", 9)  # segments 8-10: 16-22 s
        # 13 s is the key of 17 s (scene 2, 12-18 s), 19 s of 21 s
        assert not looked.is_error and looked.artifacts["refined"] == [[12.0, 24.0]]
        assert memory.coverage.refined == ((12.0, 24.0),)
        assert all(s.description for s in memory.segments_between(16.0, 22.0))
        again = tools.visual_question_answering("And now?", 9)
        assert "refined" not in again.artifacts


@pytest.mark.parametrize("after_s, glance, glanced", [
    (50.0, None, True),     # the default: a video at least glance_after_s long is glanced
    (90.0, None, False),    # ... a shorter one is indexed whole first
    (50.0, 0.0, False),     # glance=0 (--no-glance) asks the full way
    (0.0, None, False),     # glance_after_s 0: never by default
    (0.0, 10.0, True),      # an explicit glance, whatever the length
])
def test_a_long_video_not_indexed_yet_is_glanced_by_default(clip, video, tmp_path, after_s, glance, glanced):
    llm = ScriptedLLM(["Thought: I now know the final answer\nFinal Answer: a cup"] * 3)  # + the memory selection
    settings = fake_settings(tmp_path / "home", glance_after_s=after_s)
    with Session(settings, llm=llm, perception=scripted_perception(clip)) as session:
        answer = session.ask(video, "What is on the table?", planner="react", glance=glance)
        assert ("coverage" in answer.artifacts) is glanced
        built = session.library.stage_names(video.content_hash)
        assert ("segments" in built) is not glanced  # a glance writes no full stage; the full way builds them


def test_a_planner_reading_a_few_lines_evenly_is_glanced_at_no_more_stretches_than_it_reads(clip, video, tmp_path):
    """caption_only reading 2 lines of a 60-s video glances at one frame every 30 s (2 frames), not every 20 s
    (3 frames, one of them never read); a planner that may read any line keeps the default interval."""
    from vidagent.memory.coverage import DEFAULT_EVERY_S, glance_every

    assert glance_every(None, 1200.0, 120.0, looks=5) == 240.0  # the default's 5 lines of a 20-minute video
    assert glance_every(None, 60.0, 120.0, looks=5) == 0.0  # a short video is indexed whole, as before
    assert glance_every(None, 1200.0, 120.0, looks=100) == glance_every(None, 1200.0, 120.0) == DEFAULT_EVERY_S
    assert glance_every(10.0, 1200.0, 120.0, looks=5) == 10.0  # an interval asked for is kept
    llm = ScriptedLLM(["Answer: a cup"])
    settings = fake_settings(tmp_path / "home", glance_after_s=50.0)
    with Session(settings, llm=llm, perception=scripted_perception(clip)) as session:
        answer = session.ask(video, "What is on the table?", planner="caption_only", planner_options={"lines": 2})
        (coverage,) = answer.artifacts["coverage"].values()
        assert coverage["every_s"] == 30.0 and coverage["text"].startswith("answered from 0:00-1:00 sampled every 30 s")
        seen = [(s.start_s, s.end_s) for s in session.library.segments(video.content_hash) if s.description]
        read = [(item.start_s, item.end_s) for item in answer.evidence]
        assert len(seen) == 2 and read == seen  # a frame of each half (its keyframe), and every frame glanced is read
        assert seen[0][0] < 30.0 <= seen[1][0]
