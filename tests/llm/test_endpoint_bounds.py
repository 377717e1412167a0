"""An OpenAI-compatible endpoint that misbehaves (issue 55), served for real on loopback (tests/fault_llm.py) and
read through the real HTTP client: a reply that never ends, trickles, is tens of MB, is not JSON or is an error
in a 200 ends in one clear error within the request's time and size bounds; the key and an address's
credentials appear in no error; a caption longer than its token limit allows is cut."""

from __future__ import annotations

import json
import time

import pytest

from vidagent.chat_http import MAX_REPLY_BYTES
from vidagent.errors import LLMError, ModelUnavailableError
from vidagent.llm.base import Message
from vidagent.llm.openai_compat import OpenAICompatibleBackend
from vidagent.perception.vision_chat import MAX_CHARS_PER_TOKEN, EndpointVisionChat

from fault_llm import Fault, FaultServer

KEY = "sk-test-0123456789abcdef-known-key"


def _ask(base_url: str, **options) -> str:
    settings = {"timeout_s": 1.0, "backoff_s": 0.01, "max_retries": 0, "budget_s": 5.0, **options}
    model = OpenAICompatibleBackend(base_url, "fault", api_key=KEY, **settings)
    try:
        return model.complete([Message("user", "Say hello.")], max_tokens=8).text
    finally:
        model.close()


def _fails(base_url: str, match: str, **options) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(LLMError, match=match) as caught:
        _ask(base_url, **options)
    message = str(caught.value)
    assert KEY not in message and len(message.splitlines()) == 1
    return message, time.monotonic() - started


def test_an_endless_chunked_reply_stops_at_the_size_cap():
    with FaultServer(faults=[Fault("endless")]) as server:
        _, seconds = _fails(server.base_url, f"more than the {MAX_REPLY_BYTES // 2**20} MB a reply may have",
                            timeout_s=60.0)
        assert len(server.requests) == 1 and seconds < 30  # not retried: the server would do it again


def test_a_reply_declared_larger_than_the_cap_is_refused_before_it_is_read():
    caption = "a dog on a lawn " * (50 * 2**20 // 16)  # 50 MB
    with FaultServer(faults=[Fault("ok", text=caption)]) as server:
        _fails(server.base_url, r"sent a reply of \d+ bytes, more than the 8 MB")


def test_a_trickling_reply_ends_at_the_total_deadline_not_between_reads():
    with FaultServer(faults=[Fault("trickle", seconds=0.05)] * 2) as server:
        message, seconds = _fails(server.base_url, r"did not finish its reply within 0.5s", max_retries=1,
                                  budget_s=1.5, timeout_s=0.5)
        assert seconds < 2 and "attempts" in message  # each attempt 0.5 s in all; the retry within the budget


@pytest.mark.parametrize("fault, match", [
    (Fault("error_body"), "returned an error: the model is overloaded"),
    (Fault("not_json"), "returned malformed JSON: '<html>"),
])
def test_a_200_that_is_an_error_or_not_json_is_a_clear_error(fault, match):
    with FaultServer(faults=[fault]) as server:
        _fails(server.base_url, match)


def test_neither_the_key_nor_the_addresss_credentials_appear_in_an_error():
    with FaultServer(faults=[Fault("echo_key", code=401)]) as server:
        address = server.base_url.replace("http://", "http://bob:hunter2-secret@")
        message, _ = _fails(address, "answered HTTP 401: invalid key: Basic \\*\\*\\*")  # the URL's user, encoded
        assert "hunter2" not in message and "http://***@127.0.0.1" in message
    with FaultServer(faults=[Fault("echo_key", code=401)]) as server:
        _fails(server.base_url, "answered HTTP 401: invalid key: Bearer \\*\\*\\*$")
        model = OpenAICompatibleBackend(address, "fault", api_key=KEY)
        assert "hunter2" not in model.name  # the name is in caches and traces
        model.close()


def test_a_caption_longer_than_its_tokens_allow_is_cut():
    caption = "a dog on a lawn " * 20_000  # 320 KB: a server that ignores max_tokens
    with FaultServer(faults=[Fault("ok", text=caption)]) as server:
        chat = EndpointVisionChat(server.base_url, "fault", KEY, timeout_s=5.0, max_retries=0)
        try:
            reply = chat.ask("Describe the frame.", [], max_tokens=64)
        finally:
            chat.close()
    assert reply.text == caption[: 64 * MAX_CHARS_PER_TOKEN]


def test_a_vision_server_that_never_finishes_is_a_clear_model_error():
    with FaultServer(default=Fault("endless")) as server:
        chat = EndpointVisionChat(server.base_url, "fault", KEY, timeout_s=60.0, max_retries=0)
        try:
            with pytest.raises(ModelUnavailableError, match="vision model server at http://127.0.0.1:\\d+/v1 sent"):
                chat.ask("Describe the frame.", [], max_tokens=64)
        finally:
            chat.close()


def test_an_ordinary_reply_still_arrives():
    with FaultServer(reply="Final Answer: ok") as server:
        assert _ask(server.base_url) == "Final Answer: ok"
        assert json.loads(json.dumps(server.requests[0]))["model"] == "fault"
