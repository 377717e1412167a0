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
    """Stands in for ``xllamacpp.Server``: each chat completion takes ``DRAW_S`` and answers "A" (``TOKENS``
    tokens of it, 5 ms apart; streamed to a callback as the binding does, which ends the stream
    by returning True)."""

    TOKENS = 10

    def __init__(self) -> None:
        self.calls = 0
        self.streamed_tokens = 0

    def handle_chat_completions(self, request: dict, on_chunk=None) -> dict | None:
        self.calls += 1
        if on_chunk is None:
            time.sleep(DRAW_S)
            return {"choices": [{"message": {"content": "A" * self.TOKENS}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": self.TOKENS}}
        assert request["stream"] is True
        for _ in range(self.TOKENS):
            time.sleep(DRAW_S / 10)
            self.streamed_tokens += 1
            if on_chunk({"choices": [{"index": 0, "delta": {"content": "A"}, "finish_reason": None}]}):
                return None
        on_chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        on_chunk({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": self.TOKENS},
                  "timings": {"cache_n": 9}})
        return None


def _backend(tmp_path) -> tuple[LocalGGUFBackend, SlowEngine]:
    backend = LocalGGUFBackend(tmp_path / "model.gguf")
    engine = SlowEngine()
    backend._ensure_loaded = lambda: engine  # type: ignore[method-assign]  # no model file is read
    return backend, engine


def test_a_cancelled_question_stops_the_embedded_models_draws_between_two_of_them(tmp_path):
    backend, engine = _backend(tmp_path)
    assert backend.complete(QUESTION, sampling=Sampling(n=4)).others == ("A" * 10,) * 3  # no scope: every draw
    engine.calls = 0
    cancelled = threading.Event()
    threading.Timer(0.3, cancelled.set).start()
    started = time.monotonic()
    with stopping_on(cancelled), pytest.raises(CallStoppedError, match="the question was cancelled"):
        backend.complete(QUESTION, sampling=Sampling(n=64))  # 3.2 s if let be
    assert time.monotonic() - started < 0.3 + 2 * DRAW_S + 0.5 and engine.calls < 16


def test_a_reply_that_can_be_cancelled_is_streamed_and_put_together_as_the_engine_gives_it(tmp_path):
    backend, engine = _backend(tmp_path)
    with stopping_on(threading.Event()):
        completion = backend.complete(QUESTION)
    assert completion.text == "A" * 10 and completion.completion_tokens == 10 and completion.reused_prompt_tokens == 9
    assert engine.streamed_tokens == 10


def test_a_cancelled_question_stops_the_reply_under_way_within_a_token(tmp_path):
    backend, engine = _backend(tmp_path)
    engine.TOKENS = 400  # one long reply: 20 s if let be
    cancelled = threading.Event()
    threading.Timer(0.2, cancelled.set).start()
    started = time.monotonic()
    with stopping_on(cancelled), pytest.raises(CallStoppedError, match="stopped mid-way"):
        backend.complete(QUESTION, max_tokens=400)
    assert time.monotonic() - started < 0.2 + 0.5 and engine.streamed_tokens < 400


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
    backend._call = real_call  # type: ignore[method-assign]
    stopped = threading.Event()
    threading.Timer(1.0, stopped.set).start()
    started = time.monotonic()
    with stopping_on(stopped), pytest.raises(CallStoppedError, match="stopped mid-way"):
        backend.complete([Message("user", "Count from 1 to 300, one number per line.")], max_tokens=900)
    assert time.monotonic() - started < 1.0 + 3.0  # the reply under way stopped, not its 900 tokens written
    with stopping_on(threading.Event()):  # the engine is usable at once, streamed or not
        streamed = backend.complete([Message("user", "Name a colour.")], max_tokens=8)
    assert streamed.text == backend.complete([Message("user", "Name a colour.")], max_tokens=8).text
    backend.close()
