"""The wire of an OpenAI-compatible ``/chat/completions`` endpoint: one JSON POST, retried where a retry
may pass, and the reply's texts. Ground, because two layers talk to such servers: the chat models
(``vidagent.llm.openai_compat``) and the vision models that describe frames or answer about them
(``vidagent.perception.vision_chat``). Images travel as JPEG data URLs in ``image_url`` parts.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import threading
import time
from email.utils import parsedate_to_datetime
from typing import Any, Callable

import httpx
import numpy as np

from vidagent.errors import LLMError, VidagentError
from vidagent.redaction import redact, redact_url, url_secrets

RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
MAX_REPLY_BYTES = 8 * 1024 * 1024  # a chat completion is a few KB; a bigger reply is a server gone wrong
REFUSAL_WORDS = ("not supported", "unsupported", "not implemented", "does not support")
"""A 500 whose message says the request asks for what the server cannot do (llama.cpp's server answers an image
sent to a text-only model with ``HTTP 500: image input is not supported``): the same request fails every time."""
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


def image_data_url(image: np.ndarray, *, quality: int = 85, max_side: int | None = None,
                   error: type[VidagentError] = LLMError) -> str:
    """Encode an RGB (or greyscale) ``uint8`` array as a ``data:image/jpeg;base64,...`` URL, scaled down
    first so its longer side is at most ``max_side`` pixels when that is given."""
    from PIL import Image

    array = np.asarray(image)
    if array.dtype != np.uint8 or array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] != 3):
        raise error(f"images must be uint8 arrays of shape (H, W, 3); got {array.dtype} {array.shape}")
    picture = Image.fromarray(array)
    if max_side and max(picture.size) > max_side:
        scale = max_side / max(picture.size)
        picture = picture.resize((max(1, round(picture.width * scale)), max(1, round(picture.height * scale))),
                                 Image.Resampling.BILINEAR)
    buffer = io.BytesIO()
    picture.save(buffer, format="JPEG", quality=quality)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


class ChatEndpoint:
    """POSTs chat-completion bodies to one OpenAI-compatible server.

    Failures become ``error`` (``LLMError`` by default) with a one-line message naming the server (``what``
    says which kind: "LLM server", "vision server"). What may pass is retried: rate limits (429, waiting as
    long as ``Retry-After`` asks), server errors (5xx), timeouts, a reply cut off mid-way, a body that is not
    JSON, a reply without choices. Retries wait ``backoff_s``, doubling each time, for at most
    ``max_retries`` retries and within ``budget_s`` seconds from the first attempt (each attempt's timeout is
    cut to what is left); then the last reason is raised, with the number of attempts. A refused connection,
    other HTTP errors (400, 401, 404...) and a server error whose message says the request asks for what the
    server does not support (``REFUSAL_WORDS``) are reported at once. ``sleep`` is how it waits.

    Each attempt is bounded as a whole, not only between reads: its reply is read as a stream and given up
    once it took ``timeout_s`` in all (a reply that trickles a byte every few seconds) or passed
    ``max_reply_bytes`` (an endless chunked reply, tens of MB of caption). Its errors never carry the API key
    or the credentials of the address (``http://user:pass@host`` is named ``http://***@host``).
    """

    def __init__(self, base_url: str, api_key: str | None = None, *, timeout_s: float = 120.0,
                 max_retries: int = 4, backoff_s: float = 1.0, budget_s: float = 300.0,
                 sleep: Callable[[float], None] = time.sleep, what: str = "LLM server",
                 error: type[VidagentError] = LLMError, max_reply_bytes: int = MAX_REPLY_BYTES) -> None:
        self.base_url = base_url.rstrip("/")
        address, self._auth = _split_credentials(self.base_url)
        self._address = address  # the API root without its credentials (they go as Basic auth)
        self.url = f"{address}/chat/completions"  # as httpx logs it: without the credentials
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.budget_s = budget_s
        self.max_reply_bytes = max_reply_bytes
        self.where = f"{what} at {redact_url(self.base_url)}"
        self._secrets = (api_key, *url_secrets(self.base_url))
        self._error_type = error
        self._sleep = sleep
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._headers = headers
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    def error(self, message: str) -> VidagentError:
        """The error to raise, its message cleared of the key and the address's credentials."""
        return self._error_type(redact(message, self._secrets))

    def close(self) -> None:
        """Close the HTTP connection pool."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def post(self, body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
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
                    raise self.error(f"{failure.reason} (after {attempt} attempts)") from None
                if elapsed + wait >= self.budget_s:
                    asked = f"; it asked for {failure.retry_after_s:g}s more" if failure.retry_after_s else ""
                    raise self.error(f"{failure.reason} (after {attempt} attempts in {elapsed:.1f}s; "
                                     f"the retry budget is {self.budget_s:g}s{asked})") from None
                _log.info("%s; retrying in %.1fs (attempt %d)", redact(failure.reason, self._secrets), wait,
                          attempt + 1)
                self._sleep(wait)
                attempt += 1

    def try_once(self, body: dict[str, Any] | None, path: str = "/chat/completions") -> tuple[int, Any]:
        """One request, never retried, for finding out what the server accepts: the HTTP status and the reply's JSON
        (None where it is not JSON), or status 0 and the reason where no reply came. ``body``: POSTed; None: a GET
        of ``path`` (under the API root; a path starting with ``../`` is beside a ``/v1`` root, on the server's own)."""
        url = f"{self._address}{path}"
        if path.startswith("../"):
            root = self._address[:-3] if self._address.endswith("/v1") else self._address
            url = f"{root}/{path[3:]}"
        content = None if body is None else json.dumps(body).encode("utf-8")
        try:  # bounded as a chat reply is: its size and its time in all
            with self._http().stream("GET" if body is None else "POST", url, content=content,
                                     timeout=self.timeout_s) as response:
                raw = self._read_body(response, time.monotonic() + self.timeout_s, self.timeout_s)
        except (httpx.HTTPError, _Transient, VidagentError) as exc:
            return 0, redact(one_line(exc) if isinstance(exc, httpx.HTTPError) else str(exc), self._secrets)
        try:
            return response.status_code, json.loads(raw)
        except ValueError:
            return response.status_code, None

    def _http(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self.timeout_s, headers=self._headers, auth=self._auth)
            return self._client

    def _attempt(self, payload: bytes, timeout_s: float) -> tuple[dict[str, Any], list[str]]:
        """One request: the reply, or ``_Transient`` when it is worth another try, or ``self.error``."""
        where = self.where
        try:
            with self._http().stream("POST", self.url, content=payload, timeout=timeout_s) as response:
                body = self._read_body(response, time.monotonic() + timeout_s, timeout_s)
        except httpx.TimeoutException as exc:
            raise _Transient(f"{where} did not answer within {timeout_s:g}s ({type(exc).__name__})") from exc
        except httpx.ConnectError as exc:
            text = str(exc) or type(exc).__name__
            reason = "connection refused" if "refused" in text.lower() else text
            raise self.error(f"{where} is not reachable ({reason})") from exc
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:  # the reply stopped mid-way
            raise _Transient(f"{where} broke off its reply ({type(exc).__name__}: {one_line(exc)})") from exc
        except httpx.HTTPError as exc:
            raise self.error(f"{where} failed: {type(exc).__name__}: {one_line(exc)}") from exc
        if not response.is_success:
            detail = _error_detail(body)
            message = f"{where} answered HTTP {response.status_code}{detail}"
            if response.status_code not in RETRY_STATUS or refuses(detail):
                raise self.error(message)
            raise _Transient(message, _retry_after(response))
        data = _parse_json(body, where)
        return data, self._reply_texts(data)

    def _read_body(self, response: httpx.Response, deadline: float, timeout_s: float) -> bytes:
        """The reply's body, read as it streams: refused past ``max_reply_bytes`` (its declared length first),
        given up past ``deadline`` (checked as each piece arrives; a silent server ends at the read timeout)."""
        limit = self.max_reply_bytes
        declared = as_int(response.headers.get("Content-Length"))
        if declared is not None and declared > limit:
            raise self.error(f"{self.where} sent a reply of {declared} bytes, more than the "
                             f"{limit // 2**20} MB a reply may have")
        body = bytearray()
        for piece in response.iter_bytes():
            body += piece
            if len(body) > limit:
                raise self.error(f"{self.where} sent a reply of more than the {limit // 2**20} MB a reply may have")
            if time.monotonic() > deadline:
                raise _Transient(f"{self.where} did not finish its reply within {timeout_s:g}s "
                                 f"({len(body)} bytes so far)")
        return bytes(body)

    def _reply_texts(self, data: dict[str, Any]) -> list[str]:
        """The text of every choice, in order (at least one)."""
        if "error" in data and "choices" not in data:
            error = data["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            raise self.error(f"{self.where} returned an error: {message}")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise _Transient(f"{self.where} returned a response without choices[0].message")
        return [self._choice_text(choice) for choice in choices]

    def _choice_text(self, choice: Any) -> str:
        try:
            content = choice["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise _Transient(f"{self.where} returned a choice without a message") from exc
        if content is None:
            return ""
        if isinstance(content, list):  # some servers return content parts
            return "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return str(content)


def engine_reply(reply: Any, where: str, error: type[VidagentError]) -> tuple[str, dict[str, Any]]:
    """The first choice's text and the first choice of a reply from llama.cpp's in-process server engine
    (``xllamacpp``: the embedded chat model, a local vision model); ``error`` naming ``where`` for a reply that is
    no reply, reports an error, or has no message."""
    if not isinstance(reply, dict):
        raise error(f"{where} returned {type(reply).__name__}, not a response")
    if "error" in reply:
        failure = reply["error"]
        message = failure.get("message", failure) if isinstance(failure, dict) else failure
        raise error(f"{where}: {message}")
    try:
        choice = reply["choices"][0]
        return choice["message"].get("content") or "", choice
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise error(f"{where} returned an unexpected response: {exc!r}") from exc


def _split_credentials(url: str) -> tuple[str, httpx.BasicAuth | None]:
    """``url`` without its ``user:password@``, and those as Basic authorization (as httpx reads them from a URL),
    so that no request line httpx logs carries them."""
    parsed = httpx.URL(url)
    if not parsed.userinfo:
        return url, None
    return str(parsed.copy_with(username=None, password=None)), httpx.BasicAuth(parsed.username, parsed.password)


def usage_tokens(data: dict[str, Any]) -> tuple[int | None, int | None]:
    """The prompt and completion tokens a reply reports (None where it reports none)."""
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return as_int(usage.get("prompt_tokens")), as_int(usage.get("completion_tokens"))


def _parse_json(body: bytes, where: str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError as exc:
        snippet = body[:80].decode("utf-8", errors="replace").replace("\n", " ")
        raise _Transient(f"{where} returned malformed JSON: {snippet!r}") from exc
    if not isinstance(data, dict):
        raise _Transient(f"{where} returned JSON that is not an object")
    return data


def _error_detail(body: bytes) -> str:
    try:
        data = json.loads(body)
        error = data.get("error", data) if isinstance(data, dict) else data
        text = error.get("message", "") if isinstance(error, dict) else str(error)
    except ValueError:
        text = body[:1000].decode("utf-8", errors="replace")
    text = " ".join(str(text).split())[:200]
    return f": {text}" if text else ""


def refuses(detail: str) -> bool:
    """Whether an error message says the server cannot do what was asked (not worth a retry)."""
    lowered = detail.lower()
    return any(words in lowered for words in REFUSAL_WORDS)


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


def one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:200] or type(error).__name__


def as_int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
