"""The ReAct parser and the multiple-choice extractor never raise and read sloppy output."""

from __future__ import annotations

import random
import string

import pytest

from vidagent.agent.parsing import extract_choice, parse_react

TOOLS = ["caption_retrieval", "segment_localization", "visual_question_answering"]
CHOICES = ["a black leash", "a rope toy", "a long scarf", "a garden hose", "nothing is attached"]


@pytest.mark.parametrize("text, action, action_input", [
    ("Thought: look\nAction: caption_retrieval\nAction Input: 0, 4", "caption_retrieval", "0, 4"),
    ("thought: look\naction: `caption_retrieval`\naction input: (0, 4)", "caption_retrieval", "(0, 4)"),
    ("**Thought:** look\n**Action:** segment_localization\n**Action Input:** dog jumps", "segment_localization", "dog jumps"),
    ("Thought: x\nAction: caption_retrieval(0, 4)", "caption_retrieval", "0, 4"),
    ("I will call caption_retrieval(2, 3) now.", "caption_retrieval", "2, 3"),
    ("Thought: x\nAction: Visual_Question_Answering\nAction_Input: what colour?, 1", "visual_question_answering",
     "what colour?, 1"),
    ("Thought: x\nAction: caption_retrieval\nAction Input: 0, 4\nObservation: made up\nFinal Answer: 2",
     "caption_retrieval", "0, 4"),
])
def test_actions(text, action, action_input):
    parsed = parse_react(text, TOOLS)
    assert parsed.error is None and parsed.final_answer is None
    assert (parsed.action, parsed.action_input) == (action, action_input)


@pytest.mark.parametrize("text, answer", [
    ("Thought: I now know the final answer\nFinal Answer: 2", "2"),
    ("final answer: a ball", "a ball"),
    ("**Final Answer:** 0. a black leash", "0. a black leash"),
    ("Thought: done\nFinal_Answer: at 1.5 seconds", "at 1.5 seconds"),
])
def test_final_answers(text, answer):
    parsed = parse_react(text, TOOLS)
    assert parsed.final_answer == answer and parsed.error is None


@pytest.mark.parametrize("text, fragment", [
    ("I am not sure what to do.", "No 'Action:'"),
    ("Thought: x\nAction: watch_video\nAction Input: 1", "Unknown tool"),
    ("Final Answer:", "empty"),
    ("", "No 'Action:'"),
])
def test_malformed_output_becomes_an_error_message(text, fragment):
    parsed = parse_react(text, TOOLS)
    assert parsed.error is not None and fragment in parsed.error


def test_parser_fuzz_never_raises():
    rng = random.Random(1234)
    pieces = ["Thought:", "Action:", "Action Input:", "Final Answer:", "Observation:", "caption_retrieval", "(", ")",
              "**", "`", "\n", " ", "0, 4", "segment", ":", "final", "answer", "\x00", "ü", "{", "}"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces + [rng.choice(string.printable)]) for _ in range(rng.randint(0, 30)))
        parsed = parse_react(text, TOOLS)
        assert (parsed.error is None) == (parsed.action is not None or parsed.final_answer is not None)
        if parsed.action is not None:
            assert parsed.action in TOOLS


@pytest.mark.parametrize("answer, index", [
    ("0", 0), ("3", 3), ("(c)", 2), ("C.", 2), ("b", 1), ("B)", 1), ("option 3", 3), ("Answer: 1", 1),
    ("A black leash", 0), ("The dog has a rope toy attached.", 1), ("4. nothing is attached", 4),
    ("The answer is 3", 3), ("leash", 0), ("garden hose", 3), ("Choice B", 1), ("I think it is option (b)", 1),
])
def test_choice_extraction(answer, index):
    assert extract_choice(answer, CHOICES) == index


@pytest.mark.parametrize("answer", ["A dog runs", "5", "", "I cannot tell", "Final: E"])
def test_choice_extraction_declines_when_unsure(answer):
    assert extract_choice(answer, CHOICES) is None


def test_choice_extraction_fuzz_never_raises():
    rng = random.Random(99)
    for _ in range(2000):
        text = "".join(rng.choice(string.printable) for _ in range(rng.randint(0, 40)))
        index = extract_choice(text, CHOICES)
        assert index is None or 0 <= index < len(CHOICES)


@pytest.mark.parametrize("answer", ["4", " 4.0-9.6 s", "2, 3", "(1)", "12 seconds"])
def test_bare_numbers_name_no_option_when_text_was_asked_for(answer):
    choices = ["a ball", "a stick", "a frisbee", "a shoe", "nothing"]
    assert extract_choice(answer, choices, bare_numbers=False) is None
    assert extract_choice("a stick", choices, bare_numbers=False) == 1
    assert extract_choice("Option 3", choices, bare_numbers=False) == 3


def test_a_numeric_option_is_still_chosen_by_its_text():
    assert extract_choice("2", ["1", "2", "3", "4", "5"], bare_numbers=False) == 1


def test_an_answer_that_is_only_an_option_number_names_that_option():
    from vidagent.agent.parsing import lone_option_number

    assert [lone_option_number(text, 5) for text in ("4", "0.", "(2)", " 3 ")] == [4, 0, 2, 3]
    # out of range, times, counts and words are not option numbers
    assert [lone_option_number(text, 5) for text in ("7", "4.0-6.0 s", "12", "3 dogs", "a")] == [None] * 5
