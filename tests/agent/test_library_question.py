"""A question over the library: candidates from the search, one judgement per video, an answer that lists the
videos and their moments, and a confidence never above the evidence (scripted chat model, scripted library)."""

from __future__ import annotations

import math

import pytest

from vidagent.agent.library_question import EVIDENCE_CAP, answer_over_library, candidate_videos
from vidagent.agent.option_scoring import yes_probability
from vidagent.errors import LLMError
from vidagent.llm.base import Completion
from vidagent.memory.library_search import LibrarySearch, since_time, video_ids_for
from vidagent.memory.search_index import SearchFilters, SearchIndex
from vidagent.memory.store import Library

from fakes.llm import ScriptedLLM
from fakes.perception import HashingEmbedder

from memory.test_search_index import library  # noqa: F401 (a fixture: the scripted library of three clips)


@pytest.fixture
def search(library, tmp_path):
    path, _ = library
    with Library(path) as lib:
        made = LibrarySearch(lib, HashingEmbedder(), SearchIndex(tmp_path / "search.sqlite"))
        yield made
        made.close()


def judged(yes: float) -> Completion:
    """A one-token judgement with P(yes) = ``yes`` among the first-token log-probabilities."""
    return Completion("yes" if yes >= 0.5 else "no", 40, 1, 0.01,
                      first_token_logprobs=(("Yes", math.log(yes)), ("No", math.log(1 - yes)), ("The", -9.0)))


def test_each_candidate_video_is_judged_and_listed_with_its_moments(search, library):
    _, ids = library
    llm = ScriptedLLM([judged(0.9)] * 8)
    seen = []
    answer = answer_over_library("Which videos show a dog, and when?", search, llm,
                                 on_video=lambda finding, number, total: seen.append((finding.video_id, number, total)))
    assert [finding.video_id for finding in answer.listed][0] == ids["garden"]
    assert seen[0] == (ids["garden"], 1, len(answer.findings))  # streamed as each video was judged
    garden = answer.listed[0]
    assert garden.evidence == "category" and garden.confidence == pytest.approx(0.9)
    assert "garden.mp4" in answer.text and "s)" in answer.text
    request = llm.requests[0][-1].content
    assert "[object] dog:" in request and "Which videos show a dog" in request  # the judge reads what was found
    assert llm.sampling[0]["max_tokens"] == 1 and llm.sampling[0]["top_logprobs"] == 20
    assert answer.to_dict()["videos"][0]["moments"][0]["lines"]


def test_a_confidence_never_above_what_the_evidence_supports(search):
    answer = answer_over_library("Which videos show a dog?", search, ScriptedLLM([judged(0.999)] * 8))
    assert all(finding.confidence <= EVIDENCE_CAP[finding.evidence] for finding in answer.findings)
    assert answer.confidence == min(finding.confidence for finding in answer.listed)


def test_a_category_the_detector_saw_is_not_overruled_by_the_judge(search, library):
    _, ids = library
    answer = answer_over_library("Which videos show a dog?", search, ScriptedLLM([judged(0.2)] * 8))
    garden = next(finding for finding in answer.findings if finding.video_id == ids["garden"])
    assert garden.listed and garden.confidence == 0.5  # listed on the category, at an even confidence
    others = [finding for finding in answer.findings if finding.evidence != "category"]
    assert all(not finding.listed for finding in others)


def test_nothing_near_is_none_found_without_a_model_call(search):
    llm = ScriptedLLM([])
    answer = answer_over_library("a giraffe beside zebras", search, llm)
    assert answer.text.startswith("None found") and answer.findings == [] and llm.requests == []
    assert answer.confidence is None


def test_a_judge_that_fails_leaves_the_video_on_its_evidence(search):
    def down(messages):
        raise LLMError("the endpoint is down")

    answer = answer_over_library("Which videos show a dog?", search, ScriptedLLM([down] * 8))
    assert answer.listed and all(finding.judged_by == "none" for finding in answer.findings)
    assert all(finding.confidence <= 0.5 for finding in answer.listed)


def test_only_the_videos_asked_about(search, library):
    _, ids = library
    answer = answer_over_library("dog", search, ScriptedLLM([judged(0.9)] * 8),
                                 filters=SearchFilters(videos=(ids["river"],)))
    assert {finding.video_id for finding in answer.findings} <= {ids["river"]}


def test_judgement_words_and_helpers(search, library):
    _, ids = library
    assert yes_probability((("Yes", math.log(0.6)), ("no", math.log(0.2)))) == pytest.approx(0.75)
    assert yes_probability((("Maybe", -0.1),)) is None
    found = search.search("dog boat oven", limit=20, min_similarity=0.0)
    assert len(candidate_videos(found, 2)) == 2
    assert video_ids_for(search.library, ["garden.mp4"]) == (ids["garden"],)
    with pytest.raises(ValueError, match="no video of the library"):
        video_ids_for(search.library, ["missing.mp4"])
    assert since_time("2026-11-01") == "2026-11-01T00:00:00+00:00"
    with pytest.raises(ValueError, match="give a date"):
        since_time("last week")
