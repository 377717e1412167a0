"""An answer's confidence says how sure its planner was, from what the planner has (agent/answer.py)."""

from __future__ import annotations

from vidagent.agent.answer import Answer, Candidate
from vidagent.agent.task import Task

TASK = Task("What colour is the ball?", ("red", "blue", "green"))


def answer(candidates: list[Candidate], choice: int | None = 1, abstained: str = "") -> Answer:
    return Answer(TASK, TASK.choices[choice] if choice is not None else "", "planner", choice,
                  candidates=candidates, abstained=abstained)


def test_a_scored_option_is_its_probability():
    assert answer([Candidate("blue", 1, likelihood=0.61234)]).confidence == 0.6123


def test_votes_give_the_share_the_answer_got_and_a_unanimous_vote_is_certain():
    assert answer([Candidate("blue", 1, votes=2), Candidate("red", 0, votes=1)]).confidence == 0.6667
    assert answer([Candidate("blue", 1, votes=2)]).confidence == 1.0  # two chains that agreed (MCTS n=2)


def test_one_chain_read_as_text_has_no_confidence_and_an_abstention_has_none_either():
    assert answer([Candidate("blue", 1)]).confidence is None
    assert answer([Candidate("blue", 1, likelihood=0.9)], choice=None, abstained="no support").confidence == 0.0


def test_an_answer_the_check_found_unsupported_is_never_sure():
    """Issue 51: a failed self-check cannot leave a high confidence (agent/confidence.py)."""
    from vidagent.agent.answer import Check
    from vidagent.agent.confidence import UNSUPPORTED_CAP

    for verdict in ("unsupported", "no evidence"):
        failed = answer([Candidate("blue", 1, likelihood=0.95)])
        failed.check = Check(read=(0,), supporting=(), probabilities=None, verdict=verdict)
        assert failed.confidence == UNSUPPORTED_CAP
    held = answer([Candidate("blue", 1, likelihood=0.95)])
    held.check = Check(read=(0,), supporting=(0,), probabilities=None, verdict="supported")
    assert held.confidence == 0.95
    unchecked = answer([Candidate("blue", 1, likelihood=0.95)])
    unchecked.check = Check(read=(), supporting=(), probabilities=None, verdict="not checked: no calls left")
    assert unchecked.confidence == 0.95
