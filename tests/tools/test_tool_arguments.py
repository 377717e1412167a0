"""Lenient, typed parsing of tool arguments."""

from __future__ import annotations

import numpy as np
import pytest

from vidagent.errors import ToolInputError
from vidagent.tools.base import Observation, Parameter, Tool


def _record(**kwargs):
    return Observation(repr(sorted(kwargs.items())))


RANGE = Tool("caption_retrieval", "", (Parameter("start_segment", int, ""), Parameter("end_segment", int, "")), _record)
QUERY = Tool("segment_localization", "", (Parameter("description", str, ""),), _record)
VQA = Tool("visual_question_answering", "", (Parameter("question", str, ""), Parameter("segment_id", int, "")), _record)


@pytest.mark.parametrize(
    "raw",
    ["0, 4", "(0, 4)", "[0, 4]", "0 4", '{"start_segment": 0, "end_segment": 4}', "start_segment=0, end_segment=4",
     "`(0, 4)`", "caption_retrieval(0, 4)", "segment 0, segment 4", "(0.0, 4.0)", '{"start": 0, "end": 4}'],
)
def test_two_integers_in_many_spellings(raw):
    assert RANGE.parse_arguments(raw) == {"start_segment": 0, "end_segment": 4}


@pytest.mark.parametrize("raw, expected", [
    ("a dog jumps", "a dog jumps"), ('"a dog jumps"', "a dog jumps"), ("'a dog, jumping'", "a dog, jumping"),
    ('{"description": "red car"}', "red car"), ("(a man, a ball)", "a man, a ball"),
])
def test_single_text_argument(raw, expected):
    assert QUERY.parse_arguments(raw) == {"description": expected}


@pytest.mark.parametrize("raw", [
    '("what is he holding?", 3)', "what is he holding?, 3", "(what is he holding?, 3)",
    '{"question": "what is he holding?", "segment_id": "3"}', '["what is he holding?", 3]',
    "what is he holding? 3",  # seen from the 1.5B model: no comma between the two
])
def test_text_then_integer(raw):
    assert VQA.parse_arguments(raw) == {"question": "what is he holding?", "segment_id": 3}


def test_text_with_commas_then_integer():
    assert VQA.parse_arguments("is it red, blue or green?, 2") == {"question": "is it red, blue or green?", "segment_id": 2}


@pytest.mark.parametrize("raw", ["", "4", "zero, four", "(1, 2, 3)", "{}", "[true, 2]"])
def test_unusable_arguments_are_reported_not_raised_by_call(raw):
    with pytest.raises(ToolInputError):
        RANGE.parse_arguments(raw)
    observation = RANGE(raw)
    assert observation.is_error and "caption_retrieval(start_segment: int, end_segment: int)" in observation.text


def test_signature():
    assert VQA.signature() == "visual_question_answering(question: str, segment_id: int)"


@pytest.mark.parametrize("raw", ["(0, 4)", "3", "0 4"])
def test_numbers_where_words_are_needed_are_refused(raw):
    observation = QUERY(raw)
    assert observation.is_error and "must be text in words" in observation.text


def _divide(question: str, segment_id: int) -> Observation:
    return Observation(str(1 / segment_id))


def _overflow(question: str, segment_id: int) -> Observation:
    raise OverflowError("math range error\nwhile scaling\n  the frame")


def test_a_tool_that_raises_any_exception_returns_a_one_line_error(caplog):
    divide = Tool("visual_question_answering", "", VQA.parameters, _divide)
    with caplog.at_level("DEBUG", logger="vidagent.tools.base"):
        observation = divide("what is he holding?, 0")
    assert observation.is_error
    assert observation.text == "Error: visual_question_answering failed: ZeroDivisionError: division by zero"
    assert any(r.levelname == "WARNING" and "ZeroDivisionError" in r.getMessage() for r in caplog.records)
    assert any(r.exc_info and r.exc_info[0] is ZeroDivisionError for r in caplog.records)  # the traceback
    assert divide("what is he holding?, 4").text == "0.25"  # the same tool still works afterwards

    observation = Tool("visual_question_answering", "", VQA.parameters, _overflow)("what?, 1")
    assert observation.is_error
    assert observation.text == ("Error: visual_question_answering failed: "
                                "OverflowError: math range error while scaling the frame")


def test_caption_retrieval_gives_a_run_of_alike_segments_one_line():
    from vidagent.memory.store import SegmentRecord
    from vidagent.tools.temporal import _segment_runs

    def segment(i: int, text: str) -> SegmentRecord:
        return SegmentRecord(i, 2.0 * i, 2.0 * i + 2, text, "", "", np.zeros(4, np.float32))

    lines = _segment_runs([segment(0, "1 dog."), segment(1, "1 cat."), segment(2, "1 cat."), segment(3, "1 cat."),
                           segment(4, "1 dog.")])
    assert lines == ["Segment 0 (0.0-2.0 s): 1 dog.", "Segments 1-3 (2.0-8.0 s): 1 cat.", "Segment 4 (8.0-10.0 s): 1 dog."]
