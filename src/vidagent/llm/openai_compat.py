"""A chat backend for any OpenAI-compatible ``/chat/completions`` endpoint.

Works with OpenAI, vLLM, Ollama (``http://localhost:11434/v1``), llama.cpp's ``llama-server``
and similar. ``base_url`` is the API root as OpenAI clients take it (usually ending in ``/v1``).
Images are sent as JPEG data URLs in ``image_url`` content parts.
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from typing import Any, Sequence

import httpx
import numpy as np

from vidagent.errors import LLMError
from vidagent.llm.base import Completion, Message, Sampling, first_token_logprobs

_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


def estimate_tokens(text: str) -> int:
    """A rough token count (about four characters a token) for servers that report no usage."""
    return max(1, (len(text) + 3) // 4) if text else 0


def image_data_url(image: np.ndarray, *, quality: int = 85) -> str:
    """Encode an RGB (or greyscale) ``uint8`` array as a ``data:image/jpeg;base64,...`` URL."""
    from PIL import Image

    array = np.asarray(image)
    if array.dtype != np.uint8 or array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] != 3):
        raise LLMError(f"images must be uint8 arrays of shape (H, W, 3); got {array.dtype} {array.shape}")
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="JPEG", quality=quality)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


class OpenAICompatibleBackend:
    """A ``ChatBackend`` talking HTTP to an OpenAI-compatible server.

    Failures become ``LLMError`` with a one-line message naming the server. Rate limits (429),
    server errors (5xx) and timeouts are retried ``max_retries`` times with exponential backoff;
    a refused connection is reported at once.
    """

    supports_images = True

    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 timeout_s: float = 120.0, *, max_retries: int = 2, backoff_s: float = 1.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.model = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.name = f"openai:{model}@{self.base_url}"
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._headers = headers
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the HTTP connection pool."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

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
        data = self._post(body)
        seconds = time.perf_counter() - started
        texts = [_truncate_at_stop(t, stop) for t in _reply_texts(data, self.base_url)]
        text = texts[0]
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        prompt_tokens = _int(usage.get("prompt_tokens"))
        completion_tokens = _int(usage.get("completion_tokens"))
        if prompt_tokens is None:
            prompt_tokens = sum(estimate_tokens(m.content) + 4 for m in messages)
        if completion_tokens is None:
            completion_tokens = sum(estimate_tokens(t) for t in texts)
        choices = data.get("choices") or [{}]
        return Completion(text, prompt_tokens, completion_tokens, seconds, others=tuple(texts[1:]),
                          first_token_logprobs=first_token_logprobs(choices[0]) if sampling.top_logprobs else ())

    def _http(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self.timeout_s, headers=self._headers)
            return self._client

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        where = f"LLM server at {self.base_url}"
        payload = json.dumps(body).encode("utf-8")
        attempt = 0
        while True:
            retry_reason: str
            try:
                response = self._http().post(self.url, content=payload)
            except httpx.TimeoutException as exc:
                retry_reason = f"{where} did not answer within {self.timeout_s:g}s ({type(exc).__name__})"
            except httpx.ConnectError as exc:
                text = str(exc) or type(exc).__name__
                reason = "connection refused" if "refused" in text.lower() else text
                raise LLMError(f"{where} is not reachable ({reason})") from exc
            except httpx.HTTPError as exc:
                raise LLMError(f"{where} failed: {type(exc).__name__}: {exc}") from exc
            else:
                if response.is_success:
                    return _parse_json(response, where)
                detail = _error_detail(response)
                message = f"{where} answered HTTP {response.status_code}{detail}"
                if response.status_code not in _RETRY_STATUS:
                    raise LLMError(message)
                retry_reason = message
            if attempt >= self.max_retries:
                suffix = f" (after {attempt + 1} attempts)" if attempt else ""
                raise LLMError(retry_reason + suffix)
            time.sleep(self.backoff_s * (2 ** attempt))
            attempt += 1


def _message_json(message: Message) -> dict[str, Any]:
    if not message.images:
        return {"role": message.role, "content": message.content}
    parts: list[dict[str, Any]] = [{"type": "text", "text": message.content}]
    parts += [{"type": "image_url", "image_url": {"url": image_data_url(img)}} for img in message.images]
    return {"role": message.role, "content": parts}


def _parse_json(response: httpx.Response, where: str) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError as exc:
        snippet = response.text[:80].replace("\n", " ")
        raise LLMError(f"{where} returned malformed JSON: {snippet!r}") from exc
    if not isinstance(data, dict):
        raise LLMError(f"{where} returned JSON that is not an object")
    return data


def _reply_texts(data: dict[str, Any], base_url: str) -> list[str]:
    """The text of every choice, in order (at least one)."""
    if "error" in data and "choices" not in data:
        error = data["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        raise LLMError(f"LLM server at {base_url} returned an error: {message}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise LLMError(f"LLM server at {base_url} returned a response without choices[0].message")
    return [_choice_text(choice, base_url) for choice in choices]


def _choice_text(choice: Any, base_url: str) -> str:
    try:
        content = choice["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise LLMError(f"LLM server at {base_url} returned a choice without a message") from exc
    if content is None:
        return ""
    if isinstance(content, list):  # some servers return content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def _error_detail(response: httpx.Response) -> str:
    try:
        data = response.json()
        error = data.get("error", data) if isinstance(data, dict) else data
        text = error.get("message", "") if isinstance(error, dict) else str(error)
    except ValueError:
        text = response.text
    text = " ".join(str(text).split())[:200]
    return f": {text}" if text else ""


def _truncate_at_stop(text: str, stop: Sequence[str]) -> str:
    """Cut at the first stop string (servers differ in whether they honour or include them)."""
    cut = min((i for s in stop if s and (i := text.find(s)) >= 0), default=-1)
    return text if cut < 0 else text[:cut]


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
