"""A chat backend for any OpenAI-compatible ``/chat/completions`` endpoint.

Works with OpenAI, vLLM, Ollama (``http://localhost:11434/v1``), llama.cpp's ``llama-server``
and similar. ``base_url`` is the API root as OpenAI clients take it (usually ending in ``/v1``).
Images are sent as JPEG data URLs in ``image_url`` content parts.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import threading
import time
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Sequence

import httpx
import numpy as np

from vidagent.errors import LLMError
from vidagent.llm.base import Completion, Message, Sampling, first_token_logprobs

_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_log = logging.getLogger(__name__)


class _Transient(Exception):
    """A failed attempt worth repeating: its one-line reason, and how long the server asked to wait."""

    def __init__(self, reason: str, retry_after_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after_s = retry_after_s


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
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.model = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.budget_s = budget_s
        self._sleep = sleep
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
        data, replies = self._post(body)
        seconds = time.perf_counter() - started
        texts = [_truncate_at_stop(t, stop) for t in replies]
        text = texts[0]
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        prompt_tokens = _int(usage.get("prompt_tokens"))
        completion_tokens = _int(usage.get("completion_tokens"))
        if prompt_tokens is None:
            prompt_tokens = sum(estimate_tokens(m.content) + 4 for m in messages)
        if completion_tokens is None:
            completion_tokens = sum(estimate_tokens(t) for t in texts)
        choices = data.get("choices") or [{}]
        details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
        reused = _int(details.get("cached_tokens")) or 0  # OpenAI and vLLM report the prefix they cached
        return Completion(text, prompt_tokens, completion_tokens, seconds, others=tuple(texts[1:]),
                          first_token_logprobs=first_token_logprobs(choices[0]) if sampling.top_logprobs else (),
                          reused_prompt_tokens=reused)

    def _http(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self.timeout_s, headers=self._headers)
            return self._client

    def _post(self, body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The reply's JSON and the text of each of its choices, retried as the class says."""
        payload = json.dumps(body).encode("utf-8")
        started = time.monotonic()
        attempt = 1
        while True:
            left = self.budget_s - (time.monotonic() - started)
            try:
                return self._attempt(payload, max(0.001, min(self.timeout_s, left)))
            except _Transient as failure:
                elapsed = time.monotonic() - started
                wait = self.backoff_s * 2 ** (attempt - 1)
                if failure.retry_after_s is not None:
                    wait = max(wait, failure.retry_after_s)
                if attempt > self.max_retries:
                    raise LLMError(f"{failure.reason} (after {attempt} attempts)") from None
                if elapsed + wait >= self.budget_s:
                    asked = f"; it asked for {failure.retry_after_s:g}s more" if failure.retry_after_s else ""
                    raise LLMError(f"{failure.reason} (after {attempt} attempts in {elapsed:.1f}s; "
                                   f"the retry budget is {self.budget_s:g}s{asked})") from None
                _log.info("%s; retrying in %.1fs (attempt %d)", failure.reason, wait, attempt + 1)
                self._sleep(wait)
                attempt += 1

    def _attempt(self, payload: bytes, timeout_s: float) -> tuple[dict[str, Any], list[str]]:
        """One request: the reply, or ``_Transient`` when it is worth another try, or ``LLMError``."""
        where = f"LLM server at {self.base_url}"
        try:
            response = self._http().post(self.url, content=payload, timeout=timeout_s)
        except httpx.TimeoutException as exc:
            raise _Transient(f"{where} did not answer within {timeout_s:g}s ({type(exc).__name__})") from exc
        except httpx.ConnectError as exc:
            text = str(exc) or type(exc).__name__
            reason = "connection refused" if "refused" in text.lower() else text
            raise LLMError(f"{where} is not reachable ({reason})") from exc
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:  # the reply stopped mid-way
            raise _Transient(f"{where} broke off its reply ({type(exc).__name__}: {_one_line(exc)})") from exc
        except httpx.HTTPError as exc:
            raise LLMError(f"{where} failed: {type(exc).__name__}: {_one_line(exc)}") from exc
        if not response.is_success:
            message = f"{where} answered HTTP {response.status_code}{_error_detail(response)}"
            if response.status_code not in _RETRY_STATUS:
                raise LLMError(message)
            raise _Transient(message, _retry_after(response))
        data = _parse_json(response, where)
        return data, _reply_texts(data, self.base_url)


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
        raise _Transient(f"{where} returned malformed JSON: {snippet!r}") from exc
    if not isinstance(data, dict):
        raise _Transient(f"{where} returned JSON that is not an object")
    return data


def _reply_texts(data: dict[str, Any], base_url: str) -> list[str]:
    """The text of every choice, in order (at least one)."""
    if "error" in data and "choices" not in data:
        error = data["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        raise LLMError(f"LLM server at {base_url} returned an error: {message}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise _Transient(f"LLM server at {base_url} returned a response without choices[0].message")
    return [_choice_text(choice, base_url) for choice in choices]


def _choice_text(choice: Any, base_url: str) -> str:
    try:
        content = choice["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise _Transient(f"LLM server at {base_url} returned a choice without a message") from exc
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


def _retry_after(response: httpx.Response) -> float | None:
    """The seconds a ``Retry-After`` header asks for (a number or an HTTP date), or None."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:200] or type(error).__name__


def _truncate_at_stop(text: str, stop: Sequence[str]) -> str:
    """Cut at the first stop string (servers differ in whether they honour or include them)."""
    cut = min((i for s in stop if s and (i := text.find(s)) >= 0), default=-1)
    return text if cut < 0 else text[:cut]


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
