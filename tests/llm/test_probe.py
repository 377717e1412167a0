"""What an endpoint accepts, probed once and remembered (vidagent.llm.probe), against the fault-injecting server on
loopback (tests/fault_llm.py); the real llama.cpp server's answers are in test_endpoint_real_server.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vidagent.errors import LLMError
from vidagent.llm.base import Message
from vidagent.llm.client import LLM
from vidagent.llm.openai_compat import OpenAICompatibleBackend
from vidagent.llm.probe import ASSUMED, CapabilityCache, EndpointCapabilities, remembered

from fault_llm import Fault, FaultServer

REFUSED_IMAGE = Fault("status", 500, message="image input is not supported - hint: you may need to provide the mmproj")


def backend(server: FaultServer, cache: CapabilityCache) -> OpenAICompatibleBackend:
    return OpenAICompatibleBackend(server.base_url, "m", capabilities_cache=cache, timeout_s=5, max_retries=0)


def test_a_text_only_endpoint_is_probed_once_and_its_images_are_never_sent(tmp_path):
    cache = CapabilityCache(tmp_path / "endpoints.json")
    with FaultServer("hello", [Fault("ok"), Fault("ok"), REFUSED_IMAGE]) as server:
        found = backend(server, cache).capabilities
        assert found == EndpointCapabilities(images=False, tool_calls=True, logprobs=False)
        probes = len(server.requests)
        # text twice (no log-probabilities came: asked once more), an image, tools
        assert probes == 4 and "image_url" in json.dumps(server.requests[2])
        again = LLM(backend(server, cache))  # a later run: remembered, nothing asked
        assert not again.supports_images and not again.returns_logprobs and len(server.requests) == probes
        picture = np.zeros((8, 8, 3), dtype=np.uint8)
        assert again.chat([Message("user", "What is this?", images=(picture,))]).text == "hello"
    assert "image_url" not in json.dumps(server.requests[-1])  # the image was dropped, the text answered
    assert json.loads((tmp_path / "endpoints.json").read_text())[f"{server.base_url} m"]["images"] is False


def test_a_server_that_cannot_be_probed_is_reported_assumed_and_not_remembered(tmp_path, caplog):
    caplog.set_level("INFO", logger="vidagent.llm.openai_compat")
    cache = CapabilityCache(tmp_path / "endpoints.json")
    with FaultServer(default=Fault("status", 503)) as server:
        with pytest.raises(LLMError, match="could not be probed: HTTP 503"):
            remembered(backend(server, cache).endpoint, "m", cache)
        assert backend(server, cache).capabilities == ASSUMED  # the question goes on; its own calls retry
    assert "could not be probed: HTTP 503" in caplog.text
    assert cache.get(server.base_url, "m") is None


def test_without_a_cache_the_endpoint_is_taken_as_before_the_probe():
    with FaultServer("hello") as server:
        model = OpenAICompatibleBackend(server.base_url, "m")
        assert model.supports_images and not model.returns_logprobs and not model.scores_continuations
    assert server.requests == []
