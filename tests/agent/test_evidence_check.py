"""The check of an answer against the evidence it cites (issue 23, item 1): hand-built answers (supported,
unsupported, partly supported, none cited, a spent budget) checked with a scripted model, so the verdicts
and the requests are exact; the check through a session, in its JSON, with the real embedded model in
tests/eval/test_imported_eval.py."""

from __future__ import annotations

import math

from vidagent.agent.answer import Answer
from vidagent.agent.evidence_check import check_answer, spans_to_read, supporting_lines
from vidagent.agent.steps import EvaluationStep, Trace
from vidagent.agent.task import Question, Source
from vidagent.config import ToolShapes
from vidagent.llm.base import Completion
from vidagent.llm.budget import Budget
from vidagent.llm.metered import MeteredChat
from vidagent.tools.base import Evidence

from fakes import ScriptedLLM

CHOICES = ("a guitar", "a car", "a house")
SPANS = [Evidence(0.0, 2.0, "a man opens a notebook", "v1"),
         Evidence(2.0, 4.0, "he draws the neck and strings of a guitar", "v1"),
         Evidence(4.0, 6.0, "he holds up the finished drawing", "v1")]


def _answer(text: str = "a guitar", choice: int | None = 0, evidence=SPANS, choices=CHOICES) -> Answer:
    task = Question("What does the man draw?", choices).about((Source("v1", "video", "/videos/v1.mp4"),))
    return Answer(task=task, text=text, planner="react", choice_index=choice, evidence=list(evidence), trace=Trace())


def _likelihoods(*probabilities: float) -> Completion:
    """A one-token reply whose first-token log-probabilities give the options these probabilities."""
    return Completion(text="0", prompt_tokens=40, completion_tokens=1, seconds=0.01,
                      first_token_logprobs=tuple((str(i), math.log(p)) for i, p in enumerate(probabilities)))


def test_a_supported_answer_marks_the_lines_it_rests_on_and_takes_its_confidence_from_the_evidence():
    llm = ScriptedLLM([_likelihoods(0.7, 0.2, 0.1), "Supports: 2"])
    checked = check_answer(_answer(), MeteredChat(llm))
    assert checked.check.verdict == "supported" and not checked.abstained
    assert [e.supports for e in checked.evidence] == [False, True, False]
    assert checked.confidence == 0.7  # a single chain choosing by text has no confidence of its own
    # both requests re-read the cited lines, numbered, and share them as their prefix (one read for a local model)
    first, second = (request[0].content for request in llm.requests)
    assert "[2] 2.0-4.0 s: he draws the neck and strings of a guitar" in first
    prefix = first[:first.index("Which option")]
    assert second.startswith(prefix) and "Proposed answer: a guitar" in second
    assert llm.sampling[0]["top_logprobs"] > 0
    steps = checked.trace.of_type(EvaluationStep)
    assert len(steps) == 2 and "supported" in steps[-1].text
    data = checked.to_dict()
    assert data["check"]["verdict"] == "supported" and data["evidence"][1]["supports"] is True


def test_an_answer_whose_option_is_not_the_likeliest_on_its_evidence_abstains_and_keeps_its_guess():
    llm = ScriptedLLM([_likelihoods(0.1, 0.8, 0.1), "Supports: none"])
    checked = check_answer(_answer(), MeteredChat(llm))
    assert checked.abstained == "on the evidence it cites, another option is likelier than the answer"
    assert "option 1 is likelier on them (0.80)" in checked.trace.of_type(EvaluationStep)[-1].text
    assert checked.choice_index == 0 and checked.text == "a guitar"  # the guess is still scored
    assert checked.confidence == 0.0 and [e.supports for e in checked.evidence] == [False, False, False]
    assert checked.to_dict()["abstained"] is True


def test_an_option_likeliest_on_its_evidence_stands_though_no_line_was_named():
    checked = check_answer(_answer(), MeteredChat(ScriptedLLM([_likelihoods(0.6, 0.3, 0.1), "Supports: none"])))
    assert checked.check.verdict == "supported" and not checked.abstained and checked.confidence == 0.6


def test_named_lines_do_not_save_an_option_another_outweighs_on_the_same_evidence():
    checked = check_answer(_answer(), MeteredChat(ScriptedLLM([_likelihoods(0.3, 0.6, 0.1), "Supports: 2"])))
    assert checked.abstained and checked.check.verdict == "unsupported"
    assert [e.supports for e in checked.evidence] == [False, True, False]  # still marked: what the model named


def test_an_open_answer_no_cited_line_supports_abstains():
    checked = check_answer(_answer("a guitar", None, choices=None), MeteredChat(ScriptedLLM(["Supports: none"])))
    assert checked.abstained == "none of the evidence it cites shows that the answer is right"


def test_a_partly_supported_answer_names_only_the_lines_that_show_it():
    checked = check_answer(_answer(), MeteredChat(ScriptedLLM([_likelihoods(0.5, 0.3, 0.2), "Supports: 2, 3, 9"])))
    assert [e.supports for e in checked.evidence] == [False, True, True]  # line 9 does not exist: ignored
    assert checked.check.supporting == (1, 2)


def test_an_open_answer_is_judged_in_one_call():
    llm = ScriptedLLM(["Supports: 2"])
    checked = check_answer(_answer("a guitar", None, choices=None), MeteredChat(llm))
    assert len(llm.requests) == 1 and checked.check.verdict == "supported"
    assert checked.check.probabilities is None and checked.confidence is None


def test_an_answer_citing_nothing_abstains_without_a_call():
    llm = ScriptedLLM([])
    checked = check_answer(_answer(evidence=[]), MeteredChat(llm))
    assert checked.abstained == "the answer cites no evidence from the video" and not llm.requests


def test_a_spent_budget_leaves_the_answer_unchecked_and_standing():
    llm = MeteredChat(ScriptedLLM(["x"]), budget=Budget(calls=1))
    llm.chat([])
    checked = check_answer(_answer(), llm)
    assert not checked.abstained and checked.check.verdict.startswith("not checked")
    assert all(e.supports is None for e in checked.evidence)


def test_with_one_call_left_the_check_judges_support_only():
    llm = ScriptedLLM(["Supports: 1"])
    checked = check_answer(_answer(), MeteredChat(llm, budget=Budget(calls=1)))
    assert len(llm.requests) == 1 and checked.check.verdict == "supported"


def test_many_spans_are_cut_to_those_sharing_the_rarest_words_with_the_question_and_answer():
    filler = [Evidence(float(i), i + 1.0, f"the man sits at a table {i}", "v1") for i in range(20)]
    cited = [*filler[:10], Evidence(10.0, 11.0, "he draws a guitar", "v1"), *filler[10:]]
    read = spans_to_read(_answer(evidence=cited), ToolShapes().check_spans)
    assert len(read) == ToolShapes().check_spans and 10 in read and read == sorted(read)


def test_replies_naming_lines_are_read_leniently():
    assert supporting_lines("Supports: 1, 3", 3) == (0, 2)
    assert supporting_lines("Supports: none", 3) == ()
    assert supporting_lines("Lines 2 and 2 show it", 3) == (1,)
    assert supporting_lines("None of them.", 3) == ()
