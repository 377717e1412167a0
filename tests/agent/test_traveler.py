"""The TraveLER planner with a scripted model: the initial memory bank, re-planning on an
insufficient evaluation, windows never viewed twice, the summarizer, the forced answer and
answer parsing; then the real frame tools over a real clip."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from vidagent.agent.steps import EvaluationStep, FinalAnswerStep, MemoryStep, ObservationStep, PlanStep, ToolCallStep
from vidagent.agent.task import Task
from vidagent.agent.toolbox import Toolbox
from vidagent.agent.traveler import TravelerPlanner, _final_answer, _questions
from vidagent.config import Settings
from vidagent.llm.base import Completion
from vidagent.session import Session
from vidagent.tools.base import Evidence, Observation, Parameter, Tool

from conftest import TEMPORAL_TOY, video_path
from fakes import ScriptedLLM
from fakes.media import counted_video

DURATION = 20.0
CHOICES = ("a ball", "a frisbee", "a stick", "a shoe", "nothing")


class FakeVideo:
    """What the frame tools report for a 20 s clip: the frames seen, and a dog with a ball after 10 s."""

    def __init__(self) -> None:
        self.described: list[tuple[float, float]] = []
        self.asked: list[tuple[str, float, float]] = []

    def toolbox(self) -> Toolbox:
        window = (Parameter("start_s", float, ""), Parameter("end_s", float, ""))
        return Toolbox.of([
            Tool("frame_description", "describe", window, self.describe),
            Tool("frame_question_answering", "ask", (Parameter("question", str, ""),) + window, self.ask),
        ], sources=(counted_video("v1", DURATION, 10, 2.0),))

    def describe(self, start_s: float, end_s: float) -> Observation:
        self.described.append((start_s, end_s))
        times = sorted({start_s, (start_s + end_s) / 2, end_s})
        lines = [f"{t:.1f} s: {'a dog' + (' with a ball' if t >= 10 else '')} on grass" for t in times]
        return Observation("\n".join(lines), evidence=(Evidence(start_s, end_s, "a dog", "v1"),),
                           artifacts={"frame_times": times})

    def ask(self, question: str, start_s: float, end_s: float) -> Observation:
        self.asked.append((question, start_s, end_s))
        return Observation("Answer: a red ball" if start_s >= 9 else "Answer: nothing",
                           evidence=(Evidence(start_s, end_s, "ball", "v1"),),
                           artifacts={"frame_times": [start_s, end_s]})


def run(llm, task: Task | None = None, video: FakeVideo | None = None, **options):
    video = video or FakeVideo()
    answer = TravelerPlanner(**options).run(task or Task("What does the dog carry?", CHOICES), video.toolbox(), llm)
    return answer, video


PLAN = "PLAN: 1. Look at the middle of the video. 2. Ask what the dog carries."
QUESTIONS = '["What is the dog carrying?", "What colour is it?"]'
NOT_YET = "The frames so far do not show what the dog carries.\nFinal Answer: None"
BALL = "Frame 12 shows a red ball in the dog's mouth.\nFinal Answer: 0"


def test_the_memory_bank_starts_with_five_evenly_spaced_frames():
    llm = ScriptedLLM([PLAN, "12", QUESTIONS, BALL])
    answer, video = run(llm)
    assert video.described[:5] == [(0.0, 0.0), (5.0, 5.0), (10.0, 10.0), (15.0, 15.0), (19.95, 19.95)]
    first = answer.trace[1]
    assert isinstance(first, ToolCallStep) and first.arguments == {"start_s": 0.0, "end_s": 0.0}
    stored = next(s for s in answer.trace if isinstance(s, MemoryStep))
    assert stored.text.startswith("memory bank initialised with 5 frames: 0.0, 5.0, 10.0, 15.0, 19.9")
    plan_prompt = llm.requests[0][0].content  # the planner sees the bank as JSON, and the options
    assert '"5.0": {"seen": "a dog on grass"}' in plan_prompt and "CHOICES:\n0. a ball" in plan_prompt


def test_one_round_that_is_enough_answers_with_evidence_and_frames():
    llm = ScriptedLLM([PLAN, "12", QUESTIONS, BALL])
    answer, video = run(llm)
    assert (answer.choice_index, answer.text, answer.planner) == (0, "a ball", "traveler")
    bank = json.loads(llm.requests[0][0].content.split("INFORMATION: ", 1)[1].splitlines()[0])
    assert list(bank) == ["0.0", "5.0", "10.0", "15.0", "19.9"] and bank["10.0"]["seen"] == "a dog with a ball on grass"
    # The retriever chose 12 s: a 5-frame window (2 s at 2 frames a second) around it, then two questions there.
    assert video.described[5] == (11.0, 13.0)
    assert video.asked == [("What is the dog carrying?", 11.0, 13.0), ("What colour is it?", 11.0, 13.0)]
    final_bank = answer.artifacts["memory_bank"]
    assert final_bank["12.0"]["qa"] == {"What is the dog carrying?": "a red ball", "What colour is it?": "a red ball"}
    assert answer.artifacts["windows"] == [12.0] and 12.0 in answer.artifacts["frames_viewed"]
    assert (11.0, 13.0) in [(e.start_s, e.end_s) for e in answer.evidence]
    kinds = [type(s).__name__ for s in answer.trace]
    assert kinds.count("PlanStep") == 2 and kinds.count("EvaluationStep") == 1 and kinds[-1] == "FinalAnswerStep"
    assert [s.parent_id for s in answer.trace] == [None] + list(range(len(answer.trace) - 1))  # a chain
    assert answer.usage.llm_calls == 4


def test_an_insufficient_evaluation_drives_a_new_plan_with_its_explanation():
    llm = ScriptedLLM([PLAN, "3", QUESTIONS, NOT_YET, "PLAN: 1. Look later in the video.", "14", QUESTIONS, BALL])
    answer, _ = run(llm)
    second_plan_prompt = llm.requests[4][0].content
    assert "could not be answered yet, because: The frames so far do not show what the dog carries." \
        in second_plan_prompt
    assert "because" not in llm.requests[0][0].content  # no explanation before the first evaluation
    evaluations = [s for s in answer.trace if isinstance(s, EvaluationStep)]
    assert [e.score for e in evaluations] == [0.0, 1.0]
    assert evaluations[0].text.startswith("round 1: not enough information")
    assert answer.choice_index == 0 and answer.artifacts["windows"] == [3.0, 14.0]


def test_no_window_is_viewed_twice():
    llm = ScriptedLLM([PLAN, "12", "[]", NOT_YET, PLAN, "12.2", "[]", NOT_YET, PLAN, "no idea", "[]", BALL])
    answer, video = run(llm)
    windows = answer.artifacts["windows"]
    assert windows[0] == 12.0
    # 12.2 is the window already viewed: the middle of the largest stretch not looked at, counting the
    # opening frames at 0, 5, 10, 15 and 19.95 s (not 6 s of 0-12, nor the opening frame at 10 s)
    assert windows[1] == 2.5
    assert windows[2] == 7.5  # no time in the reply: the middle of 5-10 (not 16 s of 12-20)
    assert len(set(video.described[5:])) == 3
    retriever = [s for s in answer.trace if isinstance(s, ToolCallStep)][5:]
    assert "already viewed" in retriever[1].thought and "no time given" in retriever[2].thought


def test_window_centres_stay_a_windows_span_apart_as_the_retriever_is_told():
    llm = ScriptedLLM([PLAN, "12", "[]", NOT_YET, PLAN, "13.5", "[]", NOT_YET, PLAN, "14", "[]", BALL])
    answer, _ = run(llm)
    assert "stay at least 2 seconds away from second 12.0" in llm.requests[5][0].content
    assert answer.artifacts["windows"] == [12.0, 2.5, 14.0]  # 13.5 is 1.5 s from 12: replaced; 14 is 2 s away


def test_the_summarizer_rewrites_each_entry_as_one_line_past_its_budget():
    lines = "0.0: dog\n5.0: dog\n10.0: dog, ball\n\"15.0\": dog\n- 19.9: dog\n12.0 = dog with a red ball"
    llm = ScriptedLLM([PLAN, "12", QUESTIONS, lines, BALL])
    answer, _ = run(llm, memory_chars=300)
    summary = next(s for s in answer.trace if isinstance(s, MemoryStep) and s.action == "summarise")
    assert "memory bank summarised" in summary.text
    assert answer.artifacts["memory_bank"]["12.0"] == {"seen": "dog with a red ball"}
    assert list(answer.artifacts["memory_bank"]) == ["0.0", "5.0", "10.0", "12.0", "15.0", "19.9"]  # time order
    request = llm.requests[3][0].content
    assert "one line per entry" in request and "12.0: one short sentence" not in request.split("like", 1)[0]
    assert llm.sampling[3]["max_tokens"] == 6 * 40  # the Summarizer's budget follows the number of entries
    missing = ScriptedLLM([PLAN, "12", QUESTIONS, "0.0: dog\n12.0: dog with a ball", BALL])
    answer, _ = run(missing, memory_chars=300)  # an entry left out: nothing is dropped, the texts are cut
    cut = next(s for s in answer.trace if isinstance(s, MemoryStep) and s.action == "summarise")
    assert cut.text.startswith("summary unusable") and len(answer.artifacts["memory_bank"]) == 6
    unusable = ScriptedLLM([PLAN, "12", QUESTIONS, "I cannot do that.", BALL])
    answer, _ = run(unusable, memory_chars=300)
    cut = next(s for s in answer.trace if isinstance(s, MemoryStep) and s.action == "summarise")
    assert cut.text.startswith("summary unusable") and set(answer.artifacts["memory_bank"]) >= {"0.0", "12.0"}


def test_each_prompt_extends_the_one_before_so_only_its_end_is_read_anew():
    """The fixed part (length, question) first, the bank in the order it was collected, the stage last:
    a prompt shares with the one before it everything up to the end of the bank it saw."""
    llm = ScriptedLLM([PLAN, "3", QUESTIONS, NOT_YET, "PLAN: 1. Look later in the video.", "14", QUESTIONS, BALL])
    answer, _ = run(llm)
    prompts = [request[0].content for request in llm.requests]
    assert prompts[0].index("QUESTION:") < prompts[0].index("INFORMATION:")
    for before, after in zip(prompts, prompts[1:]):
        bank_end = before.index("INFORMATION: ") + len(before.split("INFORMATION: ", 1)[1].splitlines()[0]) - 1
        assert after[:bank_end] == before[:bank_end]  # all but the bank's closing brace and the stage's text
    bank = json.loads(prompts[-1].split("INFORMATION: ", 1)[1].splitlines()[0])
    assert list(bank) == ["0.0", "5.0", "10.0", "15.0", "19.9", "3.0", "14.0"]  # windows appended as viewed
    assert list(answer.artifacts["memory_bank"]) == ["0.0", "3.0", "5.0", "10.0", "14.0", "15.0", "19.9"]
    assert "CHOICES" not in prompts[1] and "CHOICES" not in prompts[2]  # retriever and extractor see no options


def test_the_answer_is_forced_at_the_iteration_limit():
    llm = ScriptedLLM([PLAN, "12", "[]", NOT_YET, PLAN, "4", "[]", NOT_YET,
                       "Probably the ball seen at 10 s.\nFinal Answer: 0"])
    answer, _ = run(llm, max_iterations=2)
    assert answer.choice_index == 0 and answer.trace.last.how == "forced"
    assert "None is not allowed" in llm.requests[-1][0].content
    unlabelled = ScriptedLLM([PLAN, "12", "[]", NOT_YET, "None is not allowed, so here is my guess.\na red ball"])
    guessed, _ = run(unlabelled, task=Task("What does the dog carry?"), max_iterations=1)
    assert guessed.text == "a red ball"  # the last line, not the preamble that echoes the instruction
    insisted = ScriptedLLM([PLAN, "12", "[]", NOT_YET, "None is not allowed.\n\nFinal Answer: None"])
    refused, _ = run(insisted, task=Task("What does the dog carry?"), max_iterations=1)
    assert refused.text == ""  # no answer, not "Final Answer: None" taken for one (seen on dev)
    assert answer.usage.llm_calls == 9


def test_a_forced_reply_naming_no_option_takes_the_option_likeliest_in_every_order():
    def by_position(*probabilities: float) -> Completion:
        pairs = sorted(((str(i), math.log(p)) for i, p in enumerate(probabilities)), key=lambda pair: -pair[1])
        return Completion(pairs[0][0], 50, 1, 0.01, first_token_logprobs=tuple(pairs))

    # in each order the model leans to the last place; by content it prefers "a ball" (option 0)
    orders = [by_position(0.35, 0.05, 0.05, 0.05, 0.5),  # as given: "nothing" (last) would win alone
              by_position(0.05, 0.05, 0.05, 0.05, 0.8),  # shifted once: "a ball" is last
              by_position(0.05, 0.05, 0.05, 0.35, 0.5), by_position(0.05, 0.05, 0.35, 0.05, 0.5),
              by_position(0.05, 0.35, 0.05, 0.05, 0.5)]
    llm = ScriptedLLM([PLAN, "12", "[]", NOT_YET, "None is not allowed.\n\nFinal Answer: None", *orders])
    answer, _ = run(llm, max_iterations=1)
    assert answer.choice_index == 0 and len(llm.requests) == 10
    scoring = [request[-1].content for request in llm.requests[5:]]
    assert "0. a ball" in scoring[0] and "0. a frisbee" in scoring[1] and "0. nothing" in scoring[4]
    assert "CHOICES" not in llm.requests[5][0].content  # the options only where each order is scored


def by_position(*probabilities: float) -> Completion:
    """A one-token reply whose first-token log-probabilities give each position's number these weights."""
    pairs = sorted(((str(i), math.log(p)) for i, p in enumerate(probabilities)), key=lambda pair: -pair[1])
    return Completion(pairs[0][0], 50, 1, 0.01, first_token_logprobs=tuple(pairs))


def leaning_to(option: int, weight: float = 0.5) -> list[Completion]:
    """Five orders' replies whose average puts ``weight`` on ``option`` (as given) and the rest evenly."""
    rest = (1 - weight) / 4
    return [by_position(*[weight if (position + shift) % 5 == option else rest for position in range(5)])
            for shift in range(5)]


def test_scores_end_the_rounds_once_the_leading_option_keeps_its_lead():
    # opening frames: "a stick" leads; round 1: "a ball" leads (not enough, the plan is told which two
    # options to tell apart); round 2: "a ball" again (enough), with no generated verdict at all
    llm = ScriptedLLM([*leaning_to(2), PLAN, "12", QUESTIONS, *leaning_to(0, 0.6),
                       PLAN, "4", "[]", *leaning_to(0, 0.7)])
    answer, video = run(llm, evaluate_by="scores")
    assert (answer.choice_index, answer.trace.last.how) == (0, "likelihood")
    assert len(llm.requests) == 5 + 3 + 5 + 3 + 5 and answer.artifacts["windows"] == [12.0, 4.0]
    second_plan = llm.requests[13][0].content
    assert 'does not yet tell apart "a ball" (60% likely) and "a frisbee" (10%)' in second_plan
    verdicts = [s.text for s in answer.trace if isinstance(s, EvaluationStep) and s.text.startswith("round")]
    assert verdicts[0].startswith("round 1: not enough information: option 0 leads with 60%")
    assert verdicts[1] == "round 2: enough information: option 0 leads with 70%; it kept its lead"
    scoring = [request for request in llm.requests if request[-1].content.startswith("Which option")]
    assert len(scoring) == 15 and all(len(request) == 2 for request in scoring)
    assert "INFORMATION:" in scoring[0][0].content and "CHOICES" not in scoring[0][0].content
    assert [max(range(5), key=e.__getitem__) for e in answer.artifacts["evaluations"]] == [2, 0, 0]
    assert answer.artifacts["evaluations"][2][0] == pytest.approx(0.7)
    assert answer.confidence == pytest.approx(0.7, abs=1e-4)  # the leading option's probability
    assert all(llm.sampling[i]["max_tokens"] == 1 for i in range(5))


def test_auto_evaluates_by_scores_with_a_model_that_scores_and_by_the_written_verdict_otherwise():
    scoring = ScriptedLLM([*leaning_to(2), PLAN, "12", "[]", *leaning_to(1, 0.9)], scores_continuations=True)
    answer, _ = run(scoring)  # the default: auto; 90 % after round 1 is enough
    assert TravelerPlanner().evaluate_by == "auto"
    assert answer.choice_index == 1 and answer.trace.last.how == "likelihood" and len(scoring.requests) == 13
    assert answer.confidence == pytest.approx(0.9, abs=1e-4)
    written = ScriptedLLM([PLAN, "12", QUESTIONS, BALL])  # an endpoint: the paper's Evaluator
    answer, _ = run(written)
    assert answer.choice_index == 0 and answer.trace.last.how == "model" and answer.confidence is None


def test_scores_confident_enough_end_the_first_round_and_the_limit_takes_the_last_lead():
    llm = ScriptedLLM([*leaning_to(2), PLAN, "12", "[]", *leaning_to(1, 0.9)])
    answer, _ = run(llm, evaluate_by="scores", confidence=0.85)
    assert answer.choice_index == 1 and len(llm.requests) == 13
    assert "it reached 85%" in [s for s in answer.trace if isinstance(s, EvaluationStep)][-1].text
    # never enough before the limit: the last evaluation's lead is the answer, with no forced reply
    llm = ScriptedLLM([*leaning_to(2), PLAN, "12", "[]", *leaning_to(3)])
    answer, _ = run(llm, evaluate_by="scores", max_iterations=1)
    assert (answer.choice_index, answer.trace.last.how, len(llm.requests)) == (3, "forced", 13)


def test_with_stable_zero_only_confidence_or_the_limit_ends_the_rounds_and_two_needs_the_lead_twice():
    rounds = [PLAN, "12", "[]", *leaning_to(1), PLAN, "4", "[]", *leaning_to(1), PLAN, "16", "[]", *leaning_to(1)]
    answer, _ = run(ScriptedLLM([*leaning_to(1), *rounds]), evaluate_by="scores", stable=0, max_iterations=3)
    assert (answer.choice_index, answer.trace.last.how, answer.artifacts["windows"]) == (1, "forced", [12.0, 4.0, 16.0])
    answer, _ = run(ScriptedLLM([*leaning_to(1), *rounds]), evaluate_by="scores", stable=2, max_iterations=3)
    assert answer.trace.last.how == "likelihood" and answer.artifacts["windows"] == [12.0, 4.0]


def test_scores_from_a_backend_without_log_probabilities_fall_back_to_the_generated_verdict():
    llm = ScriptedLLM([Completion("The", 50, 1, 0.01), PLAN, "12", QUESTIONS, BALL])
    answer, _ = run(llm, evaluate_by="scores")
    assert answer.choice_index == 0 and answer.trace.last.how == "model" and len(llm.requests) == 5
    open_question = ScriptedLLM([PLAN, "12", "[]", "Final Answer: a red ball"])
    answer, _ = run(open_question, task=Task("What does the dog carry?"), evaluate_by="scores")
    assert answer.text == "a red ball"  # no options to score: the paper's Evaluator
    with pytest.raises(ValueError, match="evaluate_by"):
        TravelerPlanner(evaluate_by="votes")


def test_open_questions_and_answer_parsing():
    llm = ScriptedLLM([PLAN, "12", QUESTIONS, "The dog holds a red ball.\nFinal Answer: a red ball"])
    answer, _ = run(llm, task=Task("What does the dog carry?"))
    assert answer.text == "a red ball" and answer.choice_index is None
    assert _final_answer("Because...\nFinal Answer: None") == ("Because...", None)
    assert _final_answer("Final answer: **2**") == ("", "2")
    assert _final_answer("no label here") == ("no label here", None)
    assert _questions('Here: ["A?", "B?"]') == ["A?", "B?"]
    assert _questions("['A?', 'B?']") == ["A?", "B?"]
    assert _questions("1. What is it?\n2) Where is it?\nThanks") == ["What is it?", "Where is it?"]
    # a list the reply's token budget cut off (1 in 6 of the 1.5B model's replies on NExT-QA): its whole strings
    cut = '```json\n[\n  "What is the man\'s shirt?",\n  "Where is the dog?",\n  "What is the col'
    assert _questions(cut) == ["What is the man's shirt?", "Where is the dog?"]
    # An evaluator naming a number that is no option is not an answer: the round goes on.
    llm = ScriptedLLM([PLAN, "12", "[]", "Final Answer: 7", "Final Answer: 1"])
    answer, _ = run(llm, max_iterations=1)
    assert answer.choice_index == 1 and answer.trace.last.how == "forced"


def test_on_a_real_clip_the_frame_tools_feed_the_bank(temporal_library: Path, models_dir: Path):
    """Real decoding, the real offline describer and VQA; the scripted model keeps the run short."""
    settings = replace(Settings.from_env(), home=temporal_library, models=models_dir)
    llm = ScriptedLLM([PLAN, "2.5", '["What is being drawn?"]', "A guitar outline.", "Final Answer: 0"])
    with Session(settings, llm=llm) as session:
        answer = session.ask(video_path(TEMPORAL_TOY), "What is being drawn?", ["a guitar", "a car", "a cat"],
                             planner="traveler", planner_options={"max_iterations": 1})
    observations = [s for s in answer.trace if isinstance(s, ObservationStep)]
    assert [o.tool for o in observations] == ["frame_description"] * 6 + ["frame_question_answering"]
    assert all(not o.is_error for o in observations)
    assert observations[0].text.startswith("0.0 s: ") and "not a caption]" not in observations[0].text
    window = observations[5].artifacts["frame_times"]
    assert window == pytest.approx([1.5, 2.0, 2.5, 3.0, 3.5])
    assert observations[6].prompt_tokens > 0  # the offline VQA asked the model about the described frames
    assert answer.choice_index == 0 and answer.trace.last.how == "model"
    assert any(isinstance(s, PlanStep) and s.text.startswith("questions: What is being drawn?") for s in answer.trace)
    assert all(e.source == answer.video_id for e in answer.evidence)
    assert isinstance(answer.trace.last, FinalAnswerStep)
