"""A chat backend for any OpenAI-compatible ``/chat/completions`` endpoint.

Works with OpenAI, vLLM, Ollama (``http://localhost:11434/v1``), llama.cpp's ``llama-server``
and similar. ``base_url`` is the API root as OpenAI clients take it (usually ending in ``/v1``).
Images are sent as JPEG data URLs in ``image_url`` content parts.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Sequence

from vidagent.chat_http import ChatEndpoint, as_int, estimate_tokens, image_data_url, usage_tokens
from vidagent.llm.base import Completion, Message, Sampling, first_token_logprobs, token_logprobs
from vidagent.llm.probe import ASSUMED, CapabilityCache, EndpointCapabilities, continuation_request, remembered, \
    tokenised
from vidagent.errors import LLMError
from vidagent.redaction import redact_url

_log = logging.getLogger(__name__)

__all__ = ["OpenAICompatibleBackend", "estimate_tokens", "image_data_url"]


class OpenAICompatibleBackend:
    """A ``ChatBackend`` talking HTTP to an OpenAI-compatible server.

    Failures become ``LLMError`` with a one-line message naming the server. What may pass is
    retried: rate limits (429, waiting as long as ``Retry-After`` asks), server errors (5xx),
    timeouts, a reply cut off mid-way, a body that is not JSON, a reply without choices. Retries
    wait ``backoff_s``, doubling each time, for at most ``max_retries`` retries and within
    ``budget_s`` seconds from the first attempt (each attempt's timeout is cut to what is left);
    then the last reason is raised, with the number of attempts. A refused connection and other
    HTTP errors (400, 401, 404...) are reported at once. ``sleep`` is how the backend waits.

    What the endpoint accepts (``capabilities``: images, log-probabilities...) is probed on first need and kept in
    ``capabilities_cache`` (``vidagent.llm.probe``); without a cache it is taken as ``probe.ASSUMED`` (or as
    ``capabilities`` says, when given).
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 timeout_s: float = 120.0, *, max_retries: int = 4, backoff_s: float = 1.0,
                 budget_s: float = 300.0, sleep: Callable[[float], None] = time.sleep,
                 capabilities_cache: CapabilityCache | None = None,
                 capabilities: EndpointCapabilities | None = None) -> None:
        self.endpoint = ChatEndpoint(base_url, api_key, timeout_s=timeout_s, max_retries=max_retries,
                                     backoff_s=backoff_s, budget_s=budget_s, sleep=sleep)
        self.base_url = self.endpoint.base_url
        self.url = self.endpoint.url
        self.model = model
        self.timeout_s = timeout_s
        self.name = f"openai:{model}@{redact_url(self.base_url)}"  # in caches and traces: no credentials
        self._cache = capabilities_cache
        self._capabilities = capabilities if capabilities is not None or capabilities_cache else ASSUMED

    @property
    def capabilities(self) -> EndpointCapabilities:
        """What the endpoint accepts for this model (probed once, then remembered)."""
        if self._capabilities is None:
            assert self._cache is not None
            try:
                self._capabilities = remembered(self.endpoint, self.model, self._cache)
            except LLMError as error:  # not known now: assumed while this model lives, never kept in the cache
                _log.info("%s (assumed: %s)", error, ASSUMED.summary())
                self._capabilities = ASSUMED
        return self._capabilities

    @property
    def supports_images(self) -> bool:
        return self.capabilities.images

    @property
    def scores_continuations(self) -> bool:
        """Whether a given reply can be scored (llama.cpp's server; most others return no log-probabilities of a
        reply they did not choose)."""
        return self.capabilities.continuations

    @property
    def returns_logprobs(self) -> bool:
        """Whether a request for ``top_logprobs`` gets them (how options are scored by their numbers)."""
        return self.capabilities.logprobs

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self.endpoint.close()

    def complete(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str] = (),
        max_tokens: int = 512,
        sampling: Sampling = Sampling(),
        continuation: str = "",
    ) -> Completion:
        """Send ``messages``; the reply's choices become the completion's texts (``n`` of them). ``continuation``:
        the reply is held to that text and each of its tokens' log-probability is returned (``scores_continuations``
        only)."""
        if not messages:
            raise LLMError("no messages to send to the model")
        if continuation:
            return self._score(messages, continuation)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [_message_json(m) for m in messages],
            "max_tokens": int(max_tokens),
            "temperature": float(sampling.temperature),
        }
        if sampling.seed is not None:
            body["seed"] = int(sampling.seed)
        if sampling.n > 1:
            body["n"] = int(sampling.n)
        if stop:
            body["stop"] = list(stop)
        if sampling.top_logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = int(sampling.top_logprobs)
        started = time.perf_counter()
        data, replies = self.endpoint.post(body)
        seconds = time.perf_counter() - started
        texts = [_truncate_at_stop(t, stop) for t in replies]
        text = texts[0]
        prompt_tokens, completion_tokens = usage_tokens(data)
        if prompt_tokens is None:
            prompt_tokens = sum(estimate_tokens(m.content) + 4 for m in messages)
        if completion_tokens is None:
            completion_tokens = sum(estimate_tokens(t) for t in texts)
        choices = data.get("choices") or [{}]
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
        reused = as_int(details.get("cached_tokens")) or 0  # OpenAI and vLLM report the prefix they cached
        return Completion(text, prompt_tokens, completion_tokens, seconds, others=tuple(texts[1:]),
                          first_token_logprobs=first_token_logprobs(choices[0]) if sampling.top_logprobs else (),
                          reused_prompt_tokens=reused)


    def _score(self, messages: Sequence[Message], continuation: str) -> Completion:
        if not self.scores_continuations:
            raise LLMError(f"{self.endpoint.where} cannot score a given reply")
        ids = tokenised(self.endpoint, continuation)
        if ids is None:
            raise LLMError(f"{self.endpoint.where} did not tokenise the reply to score")
        started = time.perf_counter()
        data, replies = self.endpoint.post(continuation_request(self.model, [_message_json(m) for m in messages], ids))
        seconds = time.perf_counter() - started
        if replies[0] != continuation:
            raise LLMError(f"{self.endpoint.where} did not keep to the scored text "
                           f"({continuation[:40]!r} became {replies[0][:40]!r})")
        prompt_tokens, _ = usage_tokens(data)
        choice = (data.get("choices") or [{}])[0]
        timings = data.get("timings") if isinstance(data.get("timings"), dict) else {}
        return Completion(continuation, prompt_tokens or sum(estimate_tokens(m.content) + 4 for m in messages),
                          len(ids), seconds, token_logprobs=token_logprobs(choice),
                          reused_prompt_tokens=as_int(timings.get("cache_n")) or 0)


def _message_json(message: Message) -> dict[str, Any]:
    if not message.images:
        return {"role": message.role, "content": message.content}
    parts: list[dict[str, Any]] = [{"type": "text", "text": message.content}]
    parts += [{"type": "image_url", "image_url": {"url": image_data_url(img)}} for img in message.images]
    return {"role": message.role, "content": parts}


def _truncate_at_stop(text: str, stop: Sequence[str]) -> str:
    """Cut at the first stop string (servers differ in whether they honour or include them)."""
    cut = min((i for s in stop if s and (i := text.find(s)) >= 0), default=-1)
    return text if cut < 0 else text[:cut]
