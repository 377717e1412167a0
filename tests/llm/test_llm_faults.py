"""The OpenAI-compatible backend against a fault-injecting server on loopback (tests/fault_llm.py):
what may pass is retried with backoff inside a budget, what persists ends in one clear error, and
every planner ends, with an answer or that one error, without touching the stored memory."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from vidagent.agent.answer import Answer
from vidagent.config import Settings
from vidagent.errors import LLMError
from vidagent.llm.base import Message
from vidagent.llm.client import LLM
from vidagent.llm.openai_compat import OpenAICompatibleBackend
from vidagent.session import Session

from fakes import scripted_perception
from fault_llm import Fault, FaultServer

PASSING = [Fault("status", 500), Fault("status", 503), Fault("status", 429, retry_after=2),
           Fault("hang", seconds=5), Fault("truncated_json"), Fault("empty_choices"), Fault("cut_body"),
           Fault("cut_stream")]
CHOICES = ["a guitar", "a car", "a house", "a cat", "a tree"]
PLANNERS = [("react", {}), ("caption_only", {}), ("mcts", {"n": 2}), ("traveler", {"max_iterations": 2}),
            ("peil", {})]


class Waits(list):
    """Records the backend's waits instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def backend(server: FaultServer, waits: Waits, **options) -> OpenAICompatibleBackend:
    settings = {"timeout_s": 0.5, "backoff_s": 0.25, "max_retries": 4, "budget_s": 60.0, **options}
    return OpenAICompatibleBackend(server.base_url, "fault", sleep=waits, **settings)


def ask(model: OpenAICompatibleBackend) -> str:
    return model.complete([Message("user", "Say hello.")], max_tokens=8).text


@pytest.mark.parametrize("fault", PASSING, ids=lambda f: f.kind + (str(f.code) if f.kind == "status" else ""))
def test_a_passing_fault_is_retried_and_the_reply_arrives(fault):
    waits = Waits()
    with FaultServer("hello", [fault]) as server:
        assert ask(backend(server, waits)) == "hello"
    assert len(server.requests) == 2
    assert waits == [2.0 if fault.retry_after else 0.25]  # Retry-After is honoured, else the first backoff


@pytest.mark.parametrize("fault, says", [
    (Fault("status", 500), "answered HTTP 500: injected HTTP 500"),
    (Fault("hang", seconds=5), "did not answer within 0.1s (ReadTimeout)"),
    (Fault("truncated_json"), "returned malformed JSON"),
    (Fault("empty_choices"), "returned a response without choices[0].message"),
    (Fault("cut_body"), "broke off its reply (RemoteProtocolError"),
    (Fault("cut_stream"), "broke off its reply"),
], ids=lambda value: value.kind if isinstance(value, Fault) else "")
def test_a_fault_that_persists_ends_in_one_clear_error_after_backing_off(fault, says):
    waits = Waits()
    with FaultServer("hello", default=fault) as server:
        with pytest.raises(LLMError) as error:  # every attempt hangs: a short timeout loses nothing
            ask(backend(server, waits, **({"timeout_s": 0.1} if fault.kind == "hang" else {})))
    message = str(error.value)
    assert message.startswith(f"LLM server at {server.base_url} ") and says in message
    assert message.endswith("(after 5 attempts)") and "\n" not in message
    assert len(server.requests) == 5 and waits == [0.25, 0.5, 1.0, 2.0]


def test_retries_stop_when_the_budget_would_be_spent():
    waits = Waits()
    with FaultServer("hello", default=Fault("status", 502)) as server:
        with pytest.raises(LLMError, match=r"HTTP 502.*\(after 3 attempts in .*s; the retry budget is 25s\)$"):
            ask(backend(server, waits, backoff_s=10.0, budget_s=25.0))
    assert waits == [10.0, 20.0] and len(server.requests) == 3


def test_a_rate_limit_asking_for_longer_than_the_budget_fails_at_once():
    waits = Waits()
    with FaultServer("hello", default=Fault("status", 429, retry_after=600)) as server:
        with pytest.raises(LLMError, match=r"HTTP 429.*it asked for 600s more\)$"):
            ask(backend(server, waits))
    assert waits == [] and len(server.requests) == 1


@pytest.mark.parametrize("code", [400, 401, 404])
def test_a_request_the_server_refuses_is_not_repeated(code):
    waits = Waits()
    with FaultServer("hello", default=Fault("status", code)) as server:
        with pytest.raises(LLMError, match=rf"answered HTTP {code}: injected HTTP {code}$"):
            ask(backend(server, waits))
    assert waits == [] and len(server.requests) == 1


def test_a_server_error_saying_the_request_is_not_supported_is_not_repeated():
    """llama.cpp's server answers an image sent to a text-only model with a 500 that no retry can pass."""
    waits = Waits()
    refusal = Fault("status", 500, message="image input is not supported - hint: if this is unexpected, "
                                           "you may need to provide the mmproj")
    with FaultServer("hello", default=refusal) as server:
        with pytest.raises(LLMError, match=r"answered HTTP 500: image input is not supported"):
            ask(backend(server, waits))
    assert waits == [] and len(server.requests) == 1


# -- every planner over a real memory, with a faulty model ----------------------------------------

@pytest.fixture()
def settings(scripted) -> Settings:
    return scripted.settings()


def _library_rows(settings: Settings) -> list[str]:
    with sqlite3.connect(f"file:{settings.library_path}?mode=ro", uri=True) as db:
        return list(db.iterdump())


@pytest.mark.parametrize("planner, options", PLANNERS, ids=[p for p, _ in PLANNERS])
def test_every_planner_ends_when_every_reply_is_in_the_wrong_format(scripted, settings, planner, options):
    with FaultServer("I am not sure what you mean.") as server:
        llm = LLM(backend(server, Waits(), timeout_s=30))
        with Session(settings, perception=scripted_perception(), llm=llm) as session:
            answer = session.ask(scripted.toy, "What is being drawn?", CHOICES, planner=planner,
                                 planner_options=options)
    assert isinstance(answer, Answer) and answer.planner == planner
    assert answer.choice_index is None  # nothing in the replies names an option
    assert 1 <= len(server.requests) <= 80  # the planner stopped on its own


@pytest.mark.parametrize("planner, options", PLANNERS, ids=[p for p, _ in PLANNERS])
def test_every_planner_stops_with_the_one_error_when_the_model_stays_down(scripted, settings, planner, options):
    before = _library_rows(settings)
    waits = Waits()
    with FaultServer(default=Fault("status", 503)) as server:
        llm = LLM(backend(server, waits, max_retries=2))
        with Session(settings, perception=scripted_perception(), llm=llm) as session:
            with pytest.raises(LLMError) as error:
                session.ask(scripted.toy, "What is being drawn?", CHOICES, planner=planner,
                            planner_options=options)
    said = f"LLM server at {server.base_url} answered HTTP 503: injected HTTP 503 (after 3 attempts)"
    assert str(error.value) == said
    assert len(server.requests) == 3 and waits == [0.25, 0.5]  # the first call's retries, then the question ends
    assert _library_rows(settings) == before  # the stored memory is as it was
