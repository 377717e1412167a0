"""A chat backend for any OpenAI-compatible ``/chat/completions`` endpoint.

Works with OpenAI, vLLM, Ollama (``http://localhost:11434/v1``), llama.cpp's ``llama-server``
and similar. ``base_url`` is the API root as OpenAI clients take it (usually ending in ``/v1``).
Images are sent as JPEG data URLs in ``image_url`` content parts.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from vidagent.chat_http import ChatEndpoint, as_int, estimate_tokens, image_data_url, usage_tokens
from vidagent.llm.base import Completion, Message, Sampling, first_token_logprobs
from vidagent.errors import LLMError
from vidagent.redaction import redact_url

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
    """

    supports_images = True
    scores_continuations = False  # an OpenAI-style server returns no log-probabilities of a given reply

    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 timeout_s: float = 120.0, *, max_retries: int = 4, backoff_s: float = 1.0,
                 budget_s: float = 300.0, sleep: Callable[[float], None] = time.sleep) -> None:
        self.endpoint = ChatEndpoint(base_url, api_key, timeout_s=timeout_s, max_retries=max_retries,
                                     backoff_s=backoff_s, budget_s=budget_s, sleep=sleep)
        self.base_url = self.endpoint.base_url
        self.url = self.endpoint.url
        self.model = model
        self.timeout_s = timeout_s
        self.name = f"openai:{model}@{redact_url(self.base_url)}"  # in caches and traces: no credentials

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
    ) -> Completion:
        """Send ``messages``; the reply's choices become the completion's texts (``n`` of them)."""
        if not messages:
            raise LLMError("no messages to send to the model")
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
