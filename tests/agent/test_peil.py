"""The PEIL planner (AssistGPT) through ``Session.ask`` over real stored memories and the real
offline perception, with a scripted chat model: wrong calls reaching the planner as precise
errors, clips cut by grounding becoming new sources, the Learner's retries and its example bank.
The rule-based temporal reasoning and the source handling are tested on their own."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image as PILImage

from vidagent.agent.steps import EvaluationStep, InspectionStep, MemoryStep, ObservationStep
from vidagent.agent.task import Question, Reference
from vidagent.config import Settings
from vidagent.errors import PlannerError, ToolInputError, VideoError
from vidagent.session import Session
from vidagent.tools.assist import _temporal_window
from vidagent.tools.media import ImageMedia
from vidagent.video.image import Image, open_media
from vidagent.video.source import Source

from conftest import TEMPORAL_TEXT, TEMPORAL_TOY, frame_at, video_path
from fakes import FakeClip, Scene, ScriptedLLM, scripted_perception, write_clip

CHOICES = ["a guitar", "a car", "a house"]
PLAIN = {"look_first": False}  # no automatic first steps: every step below is the script's


@pytest.fixture()
def settings(scripted, tmp_path: Path) -> Settings:
    """The scripted memory of the two clips, in a library copy of this test's own (the example bank writes to it)."""
    import shutil

    home = tmp_path / "home"
    shutil.copytree(scripted.home, home)
    # procedural experience holds the Learner's kept traces; the semantic part would add a summary call per answer
    return scripted.settings(home, experience="procedural")


@pytest.fixture()
def photo(scripted, tmp_path: Path) -> Path:
    path = tmp_path / "drawing.png"
    PILImage.fromarray(scripted.clips[0].image_at(4.0)).save(path)  # the toy clip's last scene
    return path


def observations(answer) -> list[ObservationStep]:
    return [step for step in answer.trace if isinstance(step, ObservationStep)]


def test_the_sources_are_summarised_and_wrong_calls_come_back_as_precise_errors(scripted, settings, photo):
    llm = ScriptedLLM([
        'Thought: caption the video\nAction: caption("what is drawn?", visual[0])',
        'Thought: try a source that is not there\nAction: caption(None, visual[7])',
        'Thought: the image then\nAction: asr(None, visual[2])',
        "Thought: I now know the final answer\nFinal Answer: a guitar",
        "Yes",
    ])
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask([scripted.toy, scripted.text, photo], "What is drawn?",
                             CHOICES, planner="peil", planner_options=PLAIN)
    first_prompt = llm.requests[0][-1].content
    assert "visual[0] (toy.mp4): a 5.0 s video, given by the user; audio: none" in first_prompt
    assert f"visual[1] ({Path(scripted.text).name}): a 6.1 s video, given by the user" in first_prompt
    assert f"visual[2] ({Path(photo).name}): a 224x224 image, given by the user; text: " in first_prompt
    system = llm.requests[0][0].content
    # the module list invites a query where the module uses one (the paper's caption(query, visual[i]))
    assert 'caption("query", visual[i])' not in first_prompt and 'caption("query", visual[i])' in system
    assert 'object_detect("query", visual[i])' in system and 'text_detect(None, visual[i])' in system
    errors = [step.text for step in observations(answer)]
    assert errors[0].startswith("Error: caption takes image or crop sources, but visual[0] is a video.")
    assert "get_frame" in errors[0]
    assert errors[1] == "Error: visual[7] does not exist; there are visual[0] to visual[2]."
    assert errors[2].startswith("Error: asr takes video or clip sources, but visual[2] is an image.")
    assert all(step.is_error for step in observations(answer))
    assert errors[0] in llm.requests[1][-1].content  # the planner saw the error as its observation
    inspections = [step for step in answer.trace if isinstance(step, InspectionStep)]
    assert [step.label for step in inspections] == ["visual[0]", "visual[1]", "visual[2]"]
    assert [s.kind for s in answer.task.sources] == ["video", "video", "image"]
    assert answer.choice_index == 0 and answer.artifacts["attempts"] == 1


def test_a_clip_cut_by_grounding_becomes_the_next_source(scripted, settings):
    llm = ScriptedLLM([
        'Thought: the start\nAction: temporal_reason("beginning", visual[0])',
        'Thought: narrate the clip\nAction: video_narration(None, visual[1])',
        "Thought: I now know the final answer\nFinal Answer: a guitar",
        "Yes",
    ])
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask([scripted.toy], "What is drawn first?", CHOICES, planner="peil",
                             planner_options=PLAIN)
    cut, narration = observations(answer)
    assert cut.text.startswith("temporal_reason of visual[0]:\n'beginning' is 0.0-1.0 s.")
    assert "New source: visual[1]: a 1.0 s clip (0.0-1.0 s of visual[0]), cut by temporal_reason from visual[0]" \
        in cut.text
    inspection = next(step for step in answer.trace if isinstance(step, InspectionStep) and step.label == "visual[1]")
    assert inspection.parent_id == cut.id and inspection.source["kind"] == "clip"
    assert inspection.source["parent"] == answer.task.sources[0].id and inspection.source["window"] == [0.0, 1.0]
    assert narration.text.startswith("video_narration of visual[1]:\n0.0-2.0 s: ")
    assert "2.0-4.0 s" not in narration.text  # only the clip's segment
    assert {e.source for e in answer.evidence} == {answer.task.sources[0].id, inspection.source["id"]}
    assert "New source: visual[1]" in llm.requests[1][-1].content


def test_each_video_is_narrated_and_each_image_captioned_before_the_model_speaks(scripted, settings, photo):
    llm = ScriptedLLM(["Thought: I now know the final answer\nFinal Answer: a guitar", "Yes"])
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask([scripted.toy, photo], "What is drawn?", CHOICES, planner="peil")
    narration, caption = observations(answer)
    calls = [step for step in answer.trace if step.kind == "tool_call"]
    assert [(c.tool, c.automatic, c.raw_arguments) for c in calls] == [
        ("video_narration", True, "None, visual[0]"), ("caption", True, "None, visual[1]")]
    assert narration.text.startswith("video_narration of visual[0]:\n0.0-2.0 s: ")
    lines = [line for line in narration.text.splitlines()[1:] if " s: " in line]
    # each stretch shown is its own evidence: what the answer can cite, and what an evaluation counts as read
    assert [f"{e.start_s:.1f}-{e.end_s:.1f} s: {e.text}" for e in narration.evidence] == lines
    assert caption.text.startswith("caption of visual[1]:\nDescription: ")
    conversation = llm.requests[0]
    assert conversation[2].role == "assistant" and 'video_narration(None, visual[0])' in conversation[2].content
    assert conversation[3].content == f"Observation: {narration.text}"
    assert answer.evidence and answer.choice_index == 0


def test_the_learner_retries_and_keeps_a_trace_that_worked_after_a_failure(scripted, settings):
    first = ScriptedLLM([
        'Thought: narrate\nAction: video_narration(None, visual[0])',
        "Thought: I now know the final answer\nFinal Answer: a car",
        # attempt 2, told why the first failed
        'Thought: look at the end\nAction: temporal_reason("end", visual[0])',
        "Thought: I now know the final answer\nFinal Answer: a guitar",
    ])
    with Session(settings, perception=scripted_perception(), llm=first) as session:
        asked = Question("What is being drawn on the tablet?", tuple(CHOICES), reference=Reference("a guitar", 0))
        answer = session.ask([scripted.toy], asked, planner="peil", planner_options=PLAIN)
        kept = session.experience_store.count("trace")
    assert answer.choice_index == 0 and answer.artifacts["attempts"] == 2
    assert [c["passed"] for c in answer.artifacts["checks"]] == [False, True]
    assert first.sampling[0]["temperature"] is None and first.sampling[2]["temperature"] == 0.7
    assert 'An earlier attempt answered "a car"' in first.requests[2][-1].content
    verdicts = [step for step in answer.trace if isinstance(step, EvaluationStep)]
    assert [v.score for v in verdicts] == [0.0, 1.0, 1.0]  # the Learner's two, then the experience's validation
    assert verdicts[-1].text == "validation: the planner's check passed this answer (reused)"  # no third model call
    assert any(isinstance(s, MemoryStep) and s.action == "stored" for s in answer.trace)
    assert kept == 1
    assert {c.text: c.votes for c in answer.candidates} == {"a car": 1, "a guitar": 1}

    later = ScriptedLLM(["Thought: I now know the final answer\nFinal Answer: a guitar", "Yes"])
    with Session(settings, perception=scripted_perception(), llm=later) as session:
        answer = session.ask([scripted.toy], "What is being drawn on the iPad?", CHOICES,
                             planner="peil", planner_options=PLAIN)
    system = later.requests[0][0].content
    assert "Here are solved questions like this one" in system
    assert 'temporal_reason("end", visual[0])' in system and "Final Answer: a guitar" in system
    assert answer.artifacts["examples_used"] == 1
    assert any(isinstance(s, MemoryStep) and s.action == "replayed" for s in answer.trace)


def test_the_example_bank_is_peils_own_and_works_with_experience_off(scripted, settings):
    """AssistGPT's Learner keeps and recalls traces: no --experience needed (issue 24, item 1). A retry that
    passes only the model's self-check (no known answer) is not kept by default (issue 42: the self-check kept a
    wrong trace); with keep_self_checked it is kept and shown later."""
    plain = replace(settings, experience="none")
    script = [
        "Thought: I now know the final answer\nFinal Answer: a car", "No: nothing was looked at",
        'Thought: look at the end\nAction: temporal_reason("end", visual[0])',
        "Thought: I now know the final answer\nFinal Answer: a guitar", "Yes",
    ]
    with Session(plain, perception=scripted_perception(), llm=ScriptedLLM(list(script))) as session:
        answer = session.ask(scripted.toy, "What is being drawn on the tablet?", CHOICES,
                             planner="peil", planner_options=PLAIN)
        assert [c["passed"] for c in answer.artifacts["checks"]] == [False, True]
        assert session.experience_store.entries(kind="trace") == []  # passed only the self-check: not kept
    first = ScriptedLLM(list(script))
    with Session(plain, perception=scripted_perception(), llm=first) as session:
        answer = session.ask(scripted.toy, "What is being drawn on the tablet?", CHOICES,
                             planner="peil", planner_options={**PLAIN, "keep_self_checked": True})
        kept = session.experience_store.entries(kind="trace")
    assert [c["passed"] for c in answer.artifacts["checks"]] == [False, True]
    assert len(kept) == 1 and kept[0].checked_by == "self_check" and len(first.requests) == 5  # no other model call
    assert not any(s.kind == "memory" and "semantic" in getattr(s, "text", "") for s in answer.trace)

    later = ScriptedLLM(["Thought: I now know the final answer\nFinal Answer: a guitar", "Yes"])
    with Session(plain, perception=scripted_perception(), llm=later) as session:
        answer = session.ask(scripted.toy, "What is being drawn on the iPad?", CHOICES,
                             planner="peil", planner_options=PLAIN)
    assert answer.artifacts["examples_used"] == 1 and 'temporal_reason("end", visual[0])' in later.requests[0][0].content

    off = ScriptedLLM(["Thought: I now know the final answer\nFinal Answer: a guitar", "Yes"])
    with Session(plain, perception=scripted_perception(), llm=off) as session:
        answer = session.ask(scripted.toy, "What is being drawn on the iPad?", CHOICES,
                             planner="peil", planner_options={**PLAIN, "examples": 0})
    assert answer.artifacts["examples_used"] == 0 and "solved questions" not in off.requests[0][0].content


def test_a_taught_eval_run_teaches_the_users_example_bank(tmp_path):
    """``vidagent eval --teach`` is how known answers reach the Learner; what it keeps is the user's."""
    from vidagent.eval.runner import RunConfig, _experience_settings

    base = replace(Settings.from_env(), home=tmp_path)
    taught = _experience_settings(RunConfig(tmp_path / "q.jsonl", teach=True), base, tmp_path / "run")
    measured = _experience_settings(RunConfig(tmp_path / "q.jsonl"), base, tmp_path / "run")
    run_scope = f"eval:{(tmp_path / 'run').resolve()}"  # other memories stay the run's own (emptied per run)
    assert (taught.experience_scope, taught.examples_scope) == (run_scope, "")
    assert (measured.experience_scope, measured.examples_scope) == (run_scope, None)


def test_when_no_attempt_passes_the_self_check_the_most_given_answer_wins(scripted, settings):
    llm = ScriptedLLM([
        "Thought: I now know the final answer\nFinal Answer: a car", "No: nothing was looked at",
        "Thought: I now know the final answer\nFinal Answer: a guitar", "No: still nothing looked at",
        "Thought: I now know the final answer\nFinal Answer: a guitar", "Maybe",
    ])
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask(scripted.toy, "What is drawn?", CHOICES, planner="peil", planner_options=PLAIN)
    checks = answer.artifacts["checks"]
    assert [c["passed"] for c in checks] == [False, False, False]
    assert checks[0]["reason"] == "nothing was looked at" and "unclear check (Maybe)" in checks[2]["reason"]
    assert answer.text == "a guitar" and answer.choice_index == 0
    assert "nothing was looked at" in llm.requests[2][-1].content


def test_single_video_planners_refuse_several_sources_and_images(scripted, settings, photo):
    with Session(settings, perception=scripted_perception(), llm=ScriptedLLM([])) as session:
        with pytest.raises(PlannerError, match="answers about one video, and was given 2 sources; .* peil"):
            session.ask([scripted.toy, scripted.text], "What?", planner="react")
        with pytest.raises(PlannerError, match="was given an image"):
            session.ask(photo, "What?", planner="caption_only")


def test_an_unreadable_source_among_several_is_named_before_any_work(settings, tmp_path):
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(200))
    new_video = write_clip(FakeClip("yoga", [Scene("a woman does yoga on a mat")]), tmp_path)
    llm = ScriptedLLM([])
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        with pytest.raises(VideoError, match="broken.mp4"):
            session.ask([new_video, broken], "What?", planner="peil", planner_options=PLAIN)
        with pytest.raises(VideoError, match="missing.png: no such file"):
            session.ask([new_video, tmp_path / "missing.png"], "What?", planner="peil", planner_options=PLAIN)
        with pytest.raises(VideoError, match="the same file as"):
            session.ask([new_video, new_video], "What?", planner="peil", planner_options=PLAIN)
        assert session.library.stage_names(open_media(new_video).content_hash) == []  # nothing was indexed
    assert llm.requests == []


def test_images_open_by_content_and_bad_images_are_clear_errors(tmp_path):
    photo = tmp_path / "photo.mp4"  # a PNG with a video's name
    PILImage.fromarray(np.full((20, 30, 3), 200, np.uint8)).save(photo, format="PNG")
    opened = open_media(photo)
    assert isinstance(opened, Image) and (opened.width, opened.height) == (30, 20)
    text = tmp_path / "notes.jpg"
    text.write_text("not an image")
    with pytest.raises(VideoError, match="notes.jpg: cannot read as an image"):
        open_media(text)
    other = tmp_path / "notes.txt"
    other.write_text("plain text")
    with pytest.raises(VideoError, match="notes.txt: neither a video nor an image"):
        open_media(other)


def test_crops_and_clips_have_ids_that_name_their_parent():
    image = ImageMedia(Source("abc", "image", "a.png"), np.zeros((40, 60, 3), np.uint8))
    crop = image.crop((10.4, 5, 30, 25))
    assert crop.source.id == "abc[10,5,30,25]" and crop.source.parent == "abc" and crop.pixels.shape == (20, 20, 3)
    with pytest.raises(ToolInputError, match="empty"):
        image.crop((10, 10, 10, 30))
    with pytest.raises(ToolInputError, match="empty"):
        image.crop((100, 100, 200, 200))  # wholly outside the image
    clip = Source("vid", "video", "v.mp4").clip(2, 4.5)
    assert clip.id == "vid@2-4.5s" and clip.parent == "vid" and clip.window == (2.0, 4.5)
    frame = clip.crop((0, 0, 8, 8), 3.0)
    assert frame.id == "vid@3s[0,0,8,8]" and frame.parent == clip.id and frame.window == (3.0, 3.0)


@pytest.mark.parametrize("query, window", [
    ("beginning", (0.0, 8.0)), ("in the middle of the video", (16.0, 24.0)), ("the end", (32.0, 40.0)),
    ("before: 12", (5.0, 10.0)), ("after: 12-14", (15.0, 20.0)), ("after 39", None), ("before 2", None),
    ("sometime", None), ("before: 50", (35.0, 40.0)), ("after: 40", None), ("before: 40", (35.0, 40.0)),
])
def test_temporal_reason_follows_assistgpts_rule(query, window):
    if window is None:
        with pytest.raises(ToolInputError):
            _temporal_window(query, (0.0, 40.0))
    else:
        assert _temporal_window(query, (0.0, 40.0)) == pytest.approx(window)


def test_eval_teaching_gives_the_known_answer_as_the_reference():
    from vidagent.eval.dataset import LOCALIZATION, MULTIPLE_CHOICE, OPEN_ENDED, EvalItem
    from vidagent.eval.worker import reference

    choice = EvalItem("q1", "v.mp4", "What?", MULTIPLE_CHOICE, choices=("a", "b"), answer_index=1)
    assert reference(choice) == Reference("b", 1)
    assert reference(EvalItem("q2", "v.mp4", "What?", OPEN_ENDED, answer="a dog")) == Reference("a dog")
    assert reference(EvalItem("q3", "v.mp4", "When?", LOCALIZATION, spans=((1.0, 2.0),))) is None


@pytest.fixture()
def real_settings(temporal_library: Path, models_dir: Path, tmp_path: Path) -> Settings:
    """The real memory of the two shared clips (built by the real models), in a copy of this test's own."""
    import shutil

    home = tmp_path / "real-home"
    shutil.copytree(temporal_library, home)
    return replace(Settings.from_env(), home=home, models=models_dir, experience="procedural")


def test_the_modules_over_real_memories_and_models(real_settings):
    """Each AssistGPT module a scripted planner calls runs on the real memory, detector and OCR."""
    settings = real_settings
    llm = ScriptedLLM([
        'Thought: t\nAction: narration_ground("a hand drawing on a tablet", visual[0])',
        'Thought: t\nAction: get_frame("3", visual[0])',
        'Thought: t\nAction: object_detect("person", visual[3])',
        'Thought: t\nAction: region_ground("person", visual[3])',
        'Thought: t\nAction: text_detect(None, visual[1])',
        'Thought: t\nAction: get_frame("middle", visual[1])',
        'Thought: t\nAction: text_ground("clideo", visual[5])',
        'Thought: t\nAction: text_detect(None, visual[6])',
        'Thought: t\nAction: asr(None, visual[0])',
        'Thought: t\nAction: subtitle_ground("hello", visual[0])',
        'Thought: t\nAction: knowledge_reason("What is a guitar?", None)', "A string instrument.",
        "Thought: I now know the final answer\nFinal Answer: a guitar", "Yes",
    ])
    with Session(settings, llm=llm) as session:
        answer = session.ask([video_path(TEMPORAL_TOY), video_path(TEMPORAL_TEXT)], "What is drawn?", CHOICES,
                             planner="peil", planner_options={**PLAIN, "max_steps": 12})
    (ground, frame, detect, region, video_text, still, text_crop, crop_text, asr, subtitles,
     knowledge) = [step.text for step in observations(answer)]
    assert ground.startswith("narration_ground of visual[0]:\nThe best match is 2.0-4.0 s (similarity 0.")
    assert "Cut the clip 0.0-5.0 s around it.\nNew source: visual[2]: a 5.0 s clip (0.0-5.0 s of visual[0])" in ground
    assert "Took the frame at 3.0 s.\nNew source: visual[3]: a 224x224 crop of visual[0] at 3.0 s" in frame
    assert "1 person found. Detected: 1 person." in detect
    assert "Found person (match 0." in region
    assert "New source: visual[4]: a " in region and " crop of visual[3]" in region
    assert video_text.startswith("text_detect of visual[1]:\n1.0 s: <video_text>clideo.com")  # quoted as data
    assert "visual[5]: a 640x360 crop of visual[1] at 3.0 s" in still and "text: yes" in still
    assert "Found <video_text>clideo.com</video_text> at [" in text_crop and "New source: visual[6]:" in text_crop
    assert crop_text == "text_detect of visual[6]:\nText: <video_text>clideo.com</video_text>"
    assert asr == "asr of visual[0]:\nThis video has no audio track."
    assert subtitles.endswith("Warning: no speech in this source, so no clip was found by its subtitles.")
    assert knowledge == "A string instrument." and "What is a guitar?" in llm.requests[-3][-1].content
    kinds = [step.source["kind"] for step in answer.trace if isinstance(step, InspectionStep)]
    assert kinds == ["video", "video", "clip", "crop", "crop", "crop", "crop"]
    assert not any(step.is_error for step in observations(answer))


def test_the_reasoning_modules_read_the_narration_speech_and_frames(scripted, settings, photo):
    llm = ScriptedLLM([
        'Thought: t\nAction: narration_reason("What is drawn?", visual[0])', "A guitar, most likely.",
        'Thought: t\nAction: subtitle_reason("What is said?", visual[0])',
        'Thought: t\nAction: caption("What is drawn?", visual[1])', "A guitar outline.",
        "Thought: I now know the final answer\nFinal Answer: a guitar", "Yes",
    ])
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask([scripted.toy, photo], "What is drawn?", CHOICES, planner="peil",
                             planner_options=PLAIN)
    narration, speech, caption = [step.text for step in observations(answer)]
    assert narration == "narration_reason of visual[0]:\nAnswer: <video_text>A guitar, most likely.</video_text>"
    reasoning_prompt = llm.requests[1][-1].content
    assert "Narration:\n0.0-2.0 s: " in reasoning_prompt and "Question: What is drawn?" in reasoning_prompt
    assert speech == "subtitle_reason of visual[0]:\nThis video has no audio track. There is nothing to reason over."
    assert caption.startswith("caption of visual[1]:\nDescription: 0.0 s: ")
    assert caption.endswith("Answer: <video_text>A guitar outline.</video_text>")
    assert "Frame descriptions:" in llm.requests[4][-1].content  # the offline VQA: describer + the chat model


def test_knowledge_reason_sees_the_question_and_the_results_so_far(scripted, settings):
    """AssistGPT: "infer the answer based on the question and results of all previous reasoning steps"."""
    llm = ScriptedLLM([
        'Thought: read the screen\nAction: text_detect(None, visual[0])',
        'Thought: what is that site?\nAction: knowledge_reason("What kind of website is it?", None)',
        "An online video editor.",
        "Thought: I now know the final answer\nFinal Answer: a video editor", "Yes",
    ])
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        session.ask(scripted.text, "Which website made this video?", planner="peil",
                    planner_options=PLAIN)
    prompt = llm.requests[2][-1].content
    assert "Question: Which website made this video?" in prompt
    assert "text_detect('', visual[0]) -> 1.0 s: <video_text>clideo.com" in prompt
    assert "Query: What kind of website is it?" in prompt


@pytest.mark.models
def test_the_reasoners_read_a_long_videos_whole_narration(tmp_path):
    """narration_reason over a 3-minute memory (90 segments) reads all of it, not 15 lines."""
    import json

    from vidagent.memory.caption_import import ImportOptions, import_captions
    from vidagent.memory.store import Library
    from vidagent.memory.video_memory import VideoMemory
    from vidagent.perception.text_embedding import E5TextEmbedder
    from vidagent.tools.assist import AssistModules
    from vidagent.tools.media import video_media

    captions = tmp_path / "long.jsonl"
    captions.write_text("".join(json.dumps({"video_id": "v1", "start_s": 2 * i, "end_s": 2 * i + 2,
                                            "caption": f"step {i}: the cook adds ingredient {i}"}) + "\n"
                                for i in range(90)))
    embedder = E5TextEmbedder()
    with Library(tmp_path / "lib.sqlite") as library:
        import_captions(library, embedder, captions, ImportOptions(namespace="test", captioner="people"))
        media = video_media(VideoMemory(library.stored_video("test:v1"), library))
        llm = ScriptedLLM(["The cook adds ninety ingredients."])
        modules = {m.name: m for m in AssistModules(None, None, None, embedder, None, llm).tools()}  # type: ignore[arg-type]
        answer = modules["narration_reason"].function("What does the cook add last?", media)
        narration = modules["video_narration"].function("", media)
    prompt = llm.requests[0][-1].content
    assert "step 0: the cook" in prompt and "step 47: the cook" in prompt and "step 89: the cook" in prompt
    assert "of 90 stretches" not in prompt and answer.text.endswith("ninety ingredients.</video_text>")
    assert narration.text.startswith("(15 of 90 stretches, evenly spread)")  # the planner's own view stays short


def test_text_ground_finds_the_text_on_the_object_named(perception, tmp_path):
    """AssistGPT's ``text[:object_name]``: of two "EXIT" signs, the one on the person."""
    from PIL import ImageDraw, ImageFont

    from vidagent.tools.assist import AssistModules

    canvas = PILImage.new("RGB", (640, 360), "white")
    canvas.paste(PILImage.fromarray(frame_at(TEMPORAL_TOY, 3.0)).resize((336, 336)), (10, 12))
    draw = ImageDraw.Draw(canvas)
    for x, y in ((460, 40), (120, 200)):  # the sign away from the person is read first (higher up)
        draw.rectangle((x - 6, y - 4, x + 110, y + 44), fill="white")
        draw.text((x, y), "EXIT", fill="black", font=ImageFont.load_default(size=36))
    image = ImageMedia(Source("signs", "image", str(tmp_path / "signs.png")), np.asarray(canvas))
    modules = {m.name: m for m in AssistModules(perception.describer, perception.reader, perception.detector,
                                                perception.embedder, None, ScriptedLLM([])).tools()}  # type: ignore[arg-type]
    plain = modules["text_ground"].function("exit", image)
    on_person = modules["text_ground"].function("exit: person", image)
    no_such = modules["text_ground"].function("exit: bicycle", image)
    assert plain.text.startswith("Found <video_text>EXIT</video_text> at [45")
    assert on_person.text.startswith("Found <video_text>EXIT</video_text> at [11") and "(on the person)" in on_person.text
    assert on_person.media[0].source.box[0] < 320  # the crop is the sign on the person
    assert "no bicycle was found to choose by" in no_such.text


def test_an_open_vocabulary_detector_serves_object_detect_and_region_ground(tmp_path, perception, models_dir):
    """The Grounding DINO backend (VIDAGENT_GROUNDING) finds what the query names for PEIL's modules."""
    from hf_tiny_models import save_grounding_dino

    from vidagent.config import BackendSettings
    from vidagent.perception.hf.detector import GroundingDinoDetector
    from vidagent.perception.suite import Perception
    from vidagent.tools.assist import AssistModules

    assert Settings.from_env({"VIDAGENT_GROUNDING": "hf"}).backends == BackendSettings(grounding="hf")
    grounder = GroundingDinoDetector(str(save_grounding_dino(tmp_path / "gd")), threshold=0.0)
    image = ImageMedia(Source("photo", "image", str(tmp_path / "p.png")), frame_at(TEMPORAL_TOY, 3.0))
    modules = {m.name: m for m in AssistModules(perception.describer, perception.reader, perception.detector,
                                                perception.embedder, None, ScriptedLLM([]),  # type: ignore[arg-type]
                                                grounder=grounder).tools()}
    counted = modules["object_detect"].function("dog", image)
    region = modules["region_ground"].function("dog", image)
    assert counted.text.endswith("dog found (open-vocabulary detection of the query).")
    assert region.text.startswith("Found dog (score ") and region.media and region.media[0].source.kind == "crop"
    assert "open vocabulary" in modules["object_detect"].description
    configured = Perception.from_settings(replace(Settings.from_env(), models=models_dir,
                                                  backends=BackendSettings(grounding=f"hf:{tmp_path / 'gd'}")))
    assert isinstance(configured.grounder, GroundingDinoDetector)
    configured.close()


def test_an_answer_naming_a_source_says_the_user_s_file_not_the_planner_s_label(scripted, settings, tmp_path):
    photo = tmp_path / "dogphoto.jpg"
    PILImage.fromarray(np.full((64, 64, 3), 200, np.uint8)).save(photo)
    llm = ScriptedLLM(["Thought: I now know the final answer\nFinal Answer: visual[2], not visual [0]", "Yes"])
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask([scripted.toy, scripted.text, photo], "Which source shows the dog?", planner="peil",
                             planner_options=PLAIN)
    assert answer.text == f"dogphoto.jpg, not {Path(scripted.toy).name}"


def test_scored_attempts_choose_their_options_and_give_the_answer_a_confidence(scripted, settings):
    """With ``choose_by`` scoring, each attempt's option is the one its scores favour after its answer, and the
    answer's confidence is that option's mean probability over the attempts (a single attempt has one too)."""
    from vidagent.llm.base import Completion

    def scored(*pairs: tuple[str, float]) -> Completion:
        return Completion(pairs[0][0], 50, 1, 0.01, first_token_logprobs=tuple(pairs))

    llm = ScriptedLLM(["Thought: I now know the final answer\nFinal Answer: a car", scored(("0", -0.1), ("1", -2.0)),
                       "Yes: the drawing was described"])
    with Session(settings, perception=scripted_perception(), llm=llm) as session:
        answer = session.ask(scripted.toy, "What is drawn?", CHOICES, planner="peil",
                             planner_options={**PLAIN, "choose_by": "likelihood", "attempts": "1"})
    guitar = 1 / (1 + math.exp(-1.9))
    assert answer.choice_index == 0 and answer.text == "a guitar"  # the scores overrule the named "a car"
    assert answer.confidence == pytest.approx(guitar, abs=1e-4)
    assert llm.requests[1][-2].role == "assistant" and "Final Answer: a car" in llm.requests[1][-2].content
