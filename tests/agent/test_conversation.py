"""The steps are the conversation: a branch's messages are its path in the trace, and answers are
grouped one way by every planner that counts them."""

from __future__ import annotations

from vidagent.agent.answer import answer_key, group_answers
from vidagent.agent.steps import (EvaluationStep, FinalAnswerStep, FormatErrorStep, MemoryStep, ObservationStep,
                                  TaskStep, ToolCallStep, Trace)


def _call(trace: Trace, parent: int, reply: str, observed: str, **extra: object) -> int:
    call = trace.add(ToolCallStep(parent_id=parent, thought="", tool="caption_retrieval", arguments={},
                                  raw_arguments="0, 1", model_output=reply, **extra))
    return trace.add(ObservationStep(parent_id=call.id, tool="caption_retrieval", text=observed)).id


def test_a_branch_is_told_only_what_lies_on_its_path():
    trace = Trace()
    root = trace.add(TaskStep(question="What is drawn?")).id
    replayed = trace.add(MemoryStep(parent_id=root, action="replayed", text="2 entries")).id  # says nothing
    overview = _call(trace, replayed, "Thought: read\nAction: caption_retrieval", "a guitar", automatic=True)
    left = _call(trace, overview, "Action: caption_retrieval 1", "a pencil")
    trace.add(EvaluationStep(parent_id=left, text="iteration 1: answer"))
    wrong = trace.add(FormatErrorStep(parent_id=overview, model_output="hmm", message="No 'Action:' found.")).id
    answer = trace.add(FinalAnswerStep(parent_id=wrong, answer="a guitar", model_output="Final Answer: a guitar")).id

    assert [(m.role, m.content) for m in trace.conversation(left)] == [
        ("assistant", "Thought: read\nAction: caption_retrieval"), ("user", "Observation: a guitar"),
        ("assistant", "Action: caption_retrieval 1"), ("user", "Observation: a pencil")]
    assert [(m.role, m.content) for m in trace.conversation(answer)] == [
        ("assistant", "Thought: read\nAction: caption_retrieval"), ("user", "Observation: a guitar"),
        ("assistant", "hmm"), ("user", "Observation: No 'Action:' found."),
        ("assistant", "Final Answer: a guitar")]
    assert trace.conversation(root) == [] and trace.conversation(None) == []
    # a call no conversation asked for (e.g. TraveLER's) adds nothing
    quiet = _call(trace, root, "", "frames")
    assert trace.conversation(quiet) == []


def test_answers_are_counted_by_option_else_by_their_folded_text():
    assert answer_key("A guitar.", None) == answer_key(" a  GUITAR", None) != answer_key("a guitar", 0)
    assert answer_key("something else", 2) == answer_key("the third option", 2)
    groups = group_answers(["b.", "A", "B", "a", "c"], lambda text: answer_key(text))
    assert groups == [["b.", "B"], ["A", "a"], ["c"]]
