"""What the memory can see (agent/memory_sight.py): a question of a kind no memory holds evidence of is answered
"the offline memory does not see X; give it a vision model", never guessed at as if it could."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from vidagent.agent.memory_sight import GIVE_IT_A_VISION_MODEL, unseen_reason
from vidagent.memory.coverage import Coverage


def memory(*, captioned: bool = False, text: bool = False, speech: bool = False,
           coverage: Coverage | None = None) -> SimpleNamespace:
    return SimpleNamespace(captioned=captioned, on_screen_text=[(1.0, 0, "SALE")] if text else [],
                           speech=[(0.0, 2.0, "hello")] if speech else [], coverage=coverage)


@pytest.mark.parametrize("question, kind", [
    ("What is the woman doing with the frying pan?", "actions"),
    ("Why is the man kneeling in the snow?", "actions"),
    ("What happens at the end of the video?", "actions"),
    ("What is the table made of?", "materials"),
    ("What kind of place is this?", "scenes or places"),
    ("What is the weather like?", "scenes or places"),
])
def test_scenes_materials_and_actions_are_not_seen_by_the_offline_detector(question, kind):
    reason = unseen_reason(question, [memory(text=True, speech=True)])
    assert reason.startswith(f"the offline memory does not see {kind}") and reason.endswith(GIVE_IT_A_VISION_MODEL)
    assert unseen_reason(question, [memory(captioned=True)]) == ""  # captions describe them
    assert unseen_reason(question, [memory(), memory(captioned=True)]) == ""  # one memory that can is enough


@pytest.mark.parametrize("question", [
    "How many people can be seen in the video?", "What colour is the mug?", "When does the dog first appear?",
    "What object does the woman throw for the dog?", "Where is the dog at the start?",
])
def test_objects_counts_colours_and_times_are_left_to_the_planner(question):
    assert unseen_reason(question, [memory()]) == ""


def test_a_question_about_text_needs_text_or_speech_read_or_a_captioner():
    question = "What word is printed on the box?"
    assert unseen_reason(question, [memory()]).startswith("the offline memory read no on-screen text or speech")
    assert unseen_reason(question, [memory(text=True)]) == ""
    assert unseen_reason(question, [memory(captioned=True)]) == ""  # captions may quote the text
    assert unseen_reason("What does the man say?", [memory(speech=True)]) == ""
    assert unseen_reason(question, []) == ""  # nothing read: no memory to judge


def test_a_glanced_memory_that_read_no_text_says_it_has_only_glanced_and_how_to_read_the_rest():
    question = "What word is printed on the box?"
    glanced = unseen_reason(question, [memory(coverage=Coverage(1200.0, 240.0))])
    assert glanced.startswith("the offline memory read no on-screen text or speech in the frames it has glanced at "
                              "so far (one frame every 240 s, no speech yet)")
    assert "vidagent index" in glanced and glanced.endswith(GIVE_IT_A_VISION_MODEL)
    whole = Coverage(60.0, 20.0, ((0.0, 60.0),), True)  # refined everywhere, speech read: as good as a full memory
    assert unseen_reason(question, [memory(coverage=whole)]).startswith(
        "the offline memory read no on-screen text or speech in this video")
