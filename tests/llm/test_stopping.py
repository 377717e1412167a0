"""A cancelled question's model calls stop (issue 55: a client that left an mcts ``n=64, max_depth=50`` question
freed the server's lane only after 62-93 s, the step under way drawing its 64 completions first). The embedded
model's engine is replaced by one that takes 50 ms a draw (the real engine is tried in the models tier)."""

from __future__ import annotations

import threading
import time

import pytest

from vidagent.llm.base import Message, Sampling
from vidagent.llm.local import LocalGGUFBackend
from vidagent.llm.metered import MeteredChat
from vidagent.llm.stopping import CallStoppedError, stopping_on
from vidagent.server.asks import AskRunner, AskSpec
from vidagent.server.errors import AskCancelledError
from vidagent.server.lane import ModelLane

from fakes import ScriptedLLM

DRAW_S = 0.05
QUESTION = [Message("user", "Which of the five?")]


class SlowEngine:
    """Stands in for ``xllamacpp.Server``: each chat completion takes ``DRAW_S`` and answers "A"."""

    def __init__(self) -> None:
        self.calls = 0

    def handle_chat_completions(self, request: dict) -> dict:
        self.calls += 1
        time.sleep(DRAW_S)
        return {"choices": [{"message": {"content": "A"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1}}


def _backend(tmp_path) -> tuple[LocalGGUFBackend, SlowEngine]:
    backend = LocalGGUFBackend(tmp_path / "model.gguf")
    engine = SlowEngine()
    backend._ensure_loaded = lambda: engine  # type: ignore[method-assign]  # no model file is read
    return backend, engine


def test_a_cancelled_question_stops_the_embedded_models_draws_between_two_of_them(tmp_path):
    backend, engine = _backend(tmp_path)
    assert backend.complete(QUESTION, sampling=Sampling(n=4)).others == ("A", "A", "A")  # no scope: every draw
    engine.calls = 0
    cancelled = threading.Event()
    threading.Timer(0.3, cancelled.set).start()
    started = time.monotonic()
    with stopping_on(cancelled), pytest.raises(CallStoppedError, match="the question was cancelled"):
        backend.complete(QUESTION, sampling=Sampling(n=64))  # 3.2 s if let be
    assert time.monotonic() - started < 0.3 + 2 * DRAW_S + 0.5 and engine.calls < 16


def test_no_call_is_made_for_a_cancelled_question_and_other_questions_are_untouched():
    llm = ScriptedLLM(["A", "B"])
    cancelled = threading.Event()
    cancelled.set()
    with stopping_on(cancelled), pytest.raises(CallStoppedError):
        MeteredChat(llm).chat(QUESTION)
    assert llm.requests == []
    assert MeteredChat(llm).chat(QUESTION).text == "A"  # outside the scope: called


def test_a_client_that_leaves_frees_the_lane_after_the_draw_under_way(tmp_path):
    backend, engine = _backend(tmp_path)
    lane = ModelLane()
    drawing = threading.Event()

    def ask(videos, question, choices, **options):
        drawing.set()
        return backend.complete(QUESTION, sampling=Sampling(n=64))  # one mcts expansion: 64 draws, 3.2 s

    runner = AskRunner(lane, ask)
    try:
        run = runner.start(AskSpec(("v1",), "Which?", planner="react"), [])
        assert drawing.wait(5)
        time.sleep(0.2)
        left = time.monotonic()
        run.cancel()
        with pytest.raises(AskCancelledError):
            run.future.result(timeout=5)
        assert time.monotonic() - left < 2 * DRAW_S + 0.5 and engine.calls < 20
        assert lane.pending == 0 and runner.live == 0
        assert [event.data["error"] for event in run.events.events if event.name == "error"] == ["Cancelled"]
    finally:
        lane.close()


@pytest.mark.models
def test_the_real_embedded_model_stops_its_draws_when_the_question_is_cancelled():
    from vidagent.config import Settings
    from vidagent.errors import ModelUnavailableError
    from vidagent.models.install import model_path

    try:
        path = model_path("qwen2.5-1.5b", Settings.from_env().models_dir)
    except ModelUnavailableError:
        pytest.skip("the qwen2.5-1.5b model is not installed")
    backend = LocalGGUFBackend(path, context_tokens=2048)
    drawn: list[float] = []
    real_call = backend._call

    def call(request):
        drawn.append(time.monotonic())
        if len(drawn) == 2:
            cancelled.set()  # the client leaves during the second draw
        return real_call(request)

    backend._call = call  # type: ignore[method-assign]
    cancelled = threading.Event()
    with stopping_on(cancelled), pytest.raises(CallStoppedError):
        backend.complete([Message("user", "Name a colour.")], max_tokens=8,
                         sampling=Sampling(n=16, temperature=0.7, seed=1))
    assert len(drawn) == 2  # not 16
    backend.close()
