"""The endpoint path against a real OpenAI-compatible server: llama.cpp's own HTTP server (``xllamacpp.Server``)
serving the installed SmolLM2 GGUF on loopback (``tests/llama_server.py``), as a user runs one. What it accepts is
probed once and remembered; an image it cannot take is never sent (and its refusal is not retried); options are
scored through it as the embedded model scores them; every planner answers through it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pytest

from vidagent.agent.planning import Needs
from vidagent.agent.react import VIDEOAGENT_TOOLS
from vidagent.agent.react_steps import offered_tools
from vidagent.agent.steps import FinalAnswerStep, ObservationStep, ToolCallStep
from vidagent.agent.workspace import open_workspace
from vidagent.config import Settings
from vidagent.errors import LLMError
from vidagent.llm import probe as probe_module
from vidagent.llm.base import Completion, Message
from vidagent.llm.client import LLM, build_llm
from vidagent.llm.local import LocalGGUFBackend
from vidagent.llm.openai_compat import OpenAICompatibleBackend
from vidagent.llm.probe import ASSUMED, CapabilityCache
from vidagent.session import Session
from vidagent.video.video import Video

from fakes import scripted_perception
from llama_server import installed, serving

pytestmark = pytest.mark.models

MODEL = "smollm2-135m"
CONTEXT = 4096
CHOICES = ["a guitar", "a car", "a house", "a cat", "a tree"]
PLANNERS = [("react", {"max_steps": 3}), ("caption_only", {"lines": 5, "choose_by": "auto"}), ("blind", {}),
            ("mcts", {"n": 2, "max_depth": 2}), ("traveler", {"max_iterations": 1}),
            ("peil", {"max_steps": 2, "attempts": 1})]
BUDGET = "calls=8,tokens=12000"  # the tiny model rambles: what is tested is the path, not the answer


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with serving(installed(MODEL), context_tokens=CONTEXT) as base_url:
        yield base_url


@pytest.fixture()
def endpoint(served: str, tmp_path: Path) -> OpenAICompatibleBackend:
    return OpenAICompatibleBackend(served, MODEL, capabilities_cache=CapabilityCache(tmp_path / "endpoints.json"))


# a call of every tool react offers by default (VideoAgent's), over the scripted toy clip (5 s, three segments)
REACT_CALLS = {
    "caption_retrieval": {"start_segment": 0, "end_segment": 2},
    "segment_localization": {"description": "a person drawing"},
    "object_memory_querying": {"question": "How many people appear?"},
}


class Waits(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


class Recording:
    """The chat model a question is asked with, keeping every request's messages (the server stays real)."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm
        self.name = llm.name
        self.supports_images = llm.supports_images
        self.scores_continuations = llm.scores_continuations
        self.returns_logprobs = llm.returns_logprobs
        self.requests: list[Sequence[Message]] = []

    def chat(self, messages: Sequence[Message], **options: Any) -> Completion:
        self.requests.append(list(messages))
        return self.llm.chat(messages, **options)


def test_the_probe_finds_what_llama_cpp_server_accepts_and_remembers_it(served, tmp_path, monkeypatch):
    settings = replace(Settings(home=tmp_path), llm=replace(Settings().llm, backend="openai", base_url=served,
                                                            model=MODEL, cache=False))
    llm = build_llm(settings)
    found = llm.backend.capabilities
    assert (found.images, found.logprobs, found.continuations, found.context_tokens) == (False, True, True, CONTEXT)
    assert not llm.supports_images and llm.returns_logprobs and llm.scores_continuations
    assert CapabilityCache(settings.endpoints_path).get(served, MODEL) == found  # kept in the vidagent home

    def no_probe(*args: object) -> None:
        raise AssertionError("probed again")

    monkeypatch.setattr(probe_module, "probe", no_probe)
    assert build_llm(settings).backend.capabilities == found  # a later run asks nothing


def test_an_image_the_text_only_server_refuses_is_reported_at_once_and_never_sent_once_probed(endpoint):
    looking = [Message("user", "What colour is this?", images=(np.full((32, 32, 3), 200, dtype=np.uint8),))]
    waits = Waits()
    assumed = OpenAICompatibleBackend(endpoint.base_url, MODEL, capabilities=ASSUMED, sleep=waits)
    with pytest.raises(LLMError, match="answered HTTP 500: image input is not supported"):
        assumed.complete(looking, max_tokens=4)
    assert waits == []  # not retried
    answer = LLM(endpoint).chat(looking, max_tokens=4)  # probed: the images are dropped, the text is answered
    assert answer.completion_tokens >= 1


def test_a_reply_is_scored_through_the_server_as_the_embedded_model_scores_it(endpoint):
    messages = [Message("user", "Which vehicle is red in the picture book?")]
    through_server = endpoint.complete(messages, continuation="a red car")
    embedded = LocalGGUFBackend(installed(MODEL), context_tokens=CONTEXT)
    try:
        in_process = embedded.complete(messages, continuation="a red car")
    finally:
        embedded.close()
    assert through_server.text == "a red car" and len(through_server.token_logprobs) >= 3
    assert through_server.token_logprobs == pytest.approx(in_process.token_logprobs, abs=0.02)


@pytest.mark.parametrize("planner, options", PLANNERS, ids=[p for p, _ in PLANNERS])
def test_every_planner_answers_through_the_server_with_no_image_and_options_scored(scripted, endpoint, planner,
                                                                                   options):
    llm = Recording(LLM(endpoint))
    with Session(scripted.settings(), perception=scripted_perception(), llm=llm) as session:
        answer = session.ask(scripted.toy, "What is being drawn?", CHOICES, planner=planner, planner_options=options,
                             budget=BUDGET)
    assert answer.planner == planner and llm.requests
    assert not any(message.images for request in llm.requests for message in request)
    prompts = "\n".join(message.content for request in llm.requests for message in request)
    if planner != "mcts":  # MCTS keeps a question-answering tool that reads frame descriptions (described_vqa)
        assert "visual_question_answering" not in prompts  # the text-only server is not offered a tool that looks
    steps = list(answer.trace)
    assert not any(isinstance(s, ObservationStep) and s.is_error and "not supported" in s.text for s in steps)
    assert not any(isinstance(s, ToolCallStep) and s.tool == "visual_question_answering" for s in steps)
    if planner in ("react", "caption_only", "blind"):  # scored after the answer: an option with a confidence
        assert answer.choice_index is not None and answer.confidence is not None
        assert any(isinstance(s, FinalAnswerStep) and s.how in ("likelihood", "continuation") for s in steps)


def test_every_tool_react_offers_a_text_only_server_answers_through_it(scripted, endpoint):
    """Each tool react offers this server is called once through it: none is one that needs the model to see, and
    none ends in the server's refusal (the SQL tools' answers come back as observations)."""
    llm = LLM(endpoint)
    with Session(scripted.settings(), perception=scripted_perception(), llm=llm) as session, \
            open_workspace(Needs(tools=VIDEOAGENT_TOOLS), "What is being drawn?", [Video(scripted.toy)], session, llm,
                           glance=0) as toolbox:
        offered = offered_tools(toolbox, "react", described_vqa=False)
        # the workspace adds the utility tools (clips, frames, highlights: no model call) beside VideoAgent's four
        assert "visual_question_answering" not in offered.names
        assert set(offered.names) & set(VIDEOAGENT_TOOLS) == set(REACT_CALLS)
        for name, arguments in REACT_CALLS.items():
            observation = offered.call(name, arguments)
            assert "HTTP" not in observation.text and "not supported" not in observation.text, (name, observation)
            assert observation.text.strip(), name
