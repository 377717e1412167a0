"""Vision chat models as perception backends: a model that reads a few images and an instruction and
writes text, reached through an OpenAI-compatible endpoint or run in-process from a local GGUF file
with its multimodal projector. The frame captioner and the visual question answerer of
``vidagent.perception.chat_vision`` are built on one.

Specs (``vidagent.perception.backend_spec``)::

    openai:gpt-4o-mini?base_url=https://api.openai.com/v1
    openai:qwen2.5vl:7b?base_url=http://localhost:11434/v1&concurrency=2
    gguf:/models/SmolVLM-500M-Instruct-Q8_0.gguf?mmproj=/models/mmproj-SmolVLM-500M-Instruct-Q8_0.gguf

Every reply is metered (``VisionUsage``: requests, cache hits, tokens, seconds, and money when a price is
given) and, with a ``ReplyCache``, kept by the images' JPEG bytes, the model and the instruction, so the
same frames are never paid for twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from vidagent.chat_http import ChatEndpoint, engine_reply, estimate_tokens, image_data_url, usage_tokens
from vidagent.errors import ModelUnavailableError
from vidagent.perception.backend_spec import BackendSpec, parse_backend_spec, spec_scheme
from vidagent.sqlite import open_sqlite

log = logging.getLogger(__name__)

SCHEMES = ("openai", "gguf")
MAX_CHARS_PER_TOKEN = 16  # more than any tokenizer's longest common token: a reply past it ignored max_tokens
DEFAULT_MAX_SIDE = 512  # the longer side of an image sent (a 4K frame is scaled down before encoding)
_GGUF_MAGIC = b"GGUF"


def is_vision_chat_spec(spec: str) -> bool:
    """Whether ``spec`` names a vision chat model (``openai:MODEL...`` or ``gguf:FILE...``)."""
    return spec_scheme(spec) in SCHEMES


@dataclass(frozen=True)
class VisionReply:
    """A model's text about some images, with what it cost (``cached``: no request was made)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    cached: bool = False


class VisionChat(Protocol):
    """Reads ``images`` (RGB uint8, in order) with ``instruction`` and replies."""

    name: str  # the model, as it identifies what wrote a description (no server address or secret)
    concurrency: int  # requests it serves at once

    def ask(self, instruction: str, images: Sequence[str], *, max_tokens: int) -> VisionReply:
        """``images`` are JPEG data URLs (``encode_images``)."""
        ...

    def close(self) -> None: ...


@dataclass
class VisionUsage:
    """What a vision chat model cost, counted across threads: requests made, replies read from the cache,
    tokens, the seconds requests took, and money at ``price_in``/``price_out`` (per million tokens)."""

    price_in: float = 0.0
    price_out: float = 0.0
    requests: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, reply: VisionReply) -> None:
        with self._lock:
            if reply.cached:
                self.cached += 1
                return
            self.requests += 1
            self.prompt_tokens += reply.prompt_tokens
            self.completion_tokens += reply.completion_tokens
            self.seconds += reply.seconds

    def snapshot(self) -> dict[str, float]:
        """The counts so far (and ``cost`` where a price was given)."""
        with self._lock:
            counts: dict[str, float] = {"requests": self.requests, "cached": self.cached,
                                        "prompt_tokens": self.prompt_tokens,
                                        "completion_tokens": self.completion_tokens,
                                        "seconds": round(self.seconds, 3)}
        if self.price_in or self.price_out:
            counts["cost"] = round((counts["prompt_tokens"] * self.price_in +
                                    counts["completion_tokens"] * self.price_out) / 1e6, 6)
        return counts


def usage_since(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """The counts ``after`` minus ``before`` (two ``VisionUsage.snapshot`` results)."""
    return {key: round(value - before.get(key, 0), 6) for key, value in after.items()}


def encode_images(images: Sequence[np.ndarray], max_side: int) -> list[str]:
    """JPEG data URLs of RGB frames, each scaled so its longer side is at most ``max_side``."""
    return [image_data_url(image, max_side=max_side, error=ModelUnavailableError) for image in images]


class ReplyCache:
    """Replies kept in a SQLite file by a digest of the model, the instruction and the images' bytes.

    One short transaction per read or write, so threads and processes can share the file; a cache that
    cannot be opened or written is logged and skipped (it only saves requests)."""

    _SCHEMA = ("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, text TEXT NOT NULL, "
               "prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, created REAL NOT NULL)")

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: Any = None

    @staticmethod
    def key(model: str, instruction: str, images: Sequence[str], max_tokens: int) -> str:
        digest = hashlib.sha256(json.dumps([model, instruction, int(max_tokens)]).encode("utf-8"))
        for url in images:
            digest.update(b"|" + url.encode("ascii"))
        return digest.hexdigest()

    def get(self, key: str) -> VisionReply | None:
        row = self._run("SELECT text, prompt_tokens, completion_tokens FROM replies WHERE key = ?", (key,))
        return None if not row else VisionReply(row[0], row[1], row[2], 0.0, cached=True)

    def put(self, key: str, reply: VisionReply) -> None:
        self._run("INSERT OR REPLACE INTO replies VALUES (?, ?, ?, ?, ?)",
                  (key, reply.text, reply.prompt_tokens, reply.completion_tokens, time.time()))

    def _run(self, sql: str, values: tuple[Any, ...]) -> tuple[Any, ...] | None:
        import sqlite3

        with self._lock:
            try:
                if self._conn is None:
                    self._conn = open_sqlite(self.path, wal=True, any_thread=True, autocommit=True)
                    self._conn.execute(self._SCHEMA)
                return self._conn.execute(sql, values).fetchone()
            except (sqlite3.Error, OSError) as error:
                log.warning("vision reply cache %s skipped: %s", self.path, error)
                return None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class EndpointVisionChat:
    """A vision chat model behind an OpenAI-compatible ``/chat/completions`` endpoint (OpenAI, vLLM, SGLang,
    Ollama, a llama.cpp server with a projector). Rate limits and server errors are retried with backoff
    (``vidagent.chat_http.ChatEndpoint``); what still fails is a ``ModelUnavailableError`` naming the server."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *, concurrency: int = 4,
                 timeout_s: float = 120.0, max_retries: int = 4, backoff_s: float = 1.0) -> None:
        if concurrency < 1:
            raise ModelUnavailableError(f"concurrency must be at least 1, not {concurrency}")
        self.model = model
        self.concurrency = concurrency
        self.name = f"openai:{model}"
        self.endpoint = ChatEndpoint(base_url, api_key, timeout_s=timeout_s, max_retries=max_retries,
                                     backoff_s=backoff_s, budget_s=max(timeout_s * 2, 300.0),
                                     what="vision model server", error=ModelUnavailableError)

    def ask(self, instruction: str, images: Sequence[str], *, max_tokens: int) -> VisionReply:
        content = [{"type": "text", "text": instruction}]
        content += [{"type": "image_url", "image_url": {"url": url}} for url in images]
        body = {"model": self.model, "messages": [{"role": "user", "content": content}],
                "max_tokens": int(max_tokens), "temperature": 0.0}
        started = time.perf_counter()
        data, texts = self.endpoint.post(body)
        seconds = time.perf_counter() - started
        text = _within_tokens(texts[0].strip(), max_tokens, self.name)
        prompt_tokens, completion_tokens = usage_tokens(data)
        return VisionReply(text, prompt_tokens if prompt_tokens is not None else estimate_tokens(instruction),
                           completion_tokens if completion_tokens is not None else estimate_tokens(text), seconds)

    def close(self) -> None:
        self.endpoint.close()


def _within_tokens(text: str, max_tokens: int, name: str) -> str:
    """A reply no longer than ``max_tokens`` could make (``MAX_CHARS_PER_TOKEN`` each): a server that ignores
    the limit (a 50 MB caption) has the rest cut, said in the log, so one reply cannot swell the memory."""
    limit = max(1, int(max_tokens)) * MAX_CHARS_PER_TOKEN
    if len(text) <= limit:
        return text
    log.warning("%s replied %d characters where %d tokens allow about %d: the rest is cut", name, len(text),
                max_tokens, limit)
    return text[:limit]


class GGUFVisionChat:
    """A local GGUF vision model with its multimodal projector (``mmproj``), run in-process by llama.cpp through
    ``xllamacpp`` (the runtime the embedded chat model uses). Loads on the first request; one request at a time."""

    concurrency = 1

    def __init__(self, model_path: str | Path, projector_path: str | Path, *, context_tokens: int = 4096,
                 threads: int = 0) -> None:
        self.model_path = Path(model_path).expanduser()
        self.projector_path = Path(projector_path).expanduser()
        self.context_tokens = context_tokens
        self.threads = threads
        self.name = f"gguf:{self.model_path.name}+{self.projector_path.name}"
        self._server: Any = None
        self._lock = threading.Lock()

    def ask(self, instruction: str, images: Sequence[str], *, max_tokens: int) -> VisionReply:
        content = [{"type": "text", "text": instruction}]
        content += [{"type": "image_url", "image_url": {"url": url}} for url in images]
        request = {"messages": [{"role": "user", "content": content}], "max_tokens": int(max_tokens),
                   "temperature": 0.0, "top_k": 1}
        with self._lock:
            server = self._ensure_loaded()
            started = time.perf_counter()
            try:
                reply = server.handle_chat_completions(request)
            except Exception as exc:  # the binding raises RuntimeError/ValueError
                raise ModelUnavailableError(f"vision model {self.model_path.name} failed: {exc}") from exc
            seconds = time.perf_counter() - started
        return _gguf_reply(reply, seconds, self.model_path.name)

    def _ensure_loaded(self) -> Any:
        if self._server is not None:
            return self._server
        for role, path in (("model", self.model_path), ("projector (mmproj)", self.projector_path)):
            if not path.is_file():
                raise ModelUnavailableError(f"the vision {role} file {path} does not exist")
            with path.open("rb") as f:
                if f.read(4) != _GGUF_MAGIC:
                    raise ModelUnavailableError(f"the vision {role} file {path} is not a GGUF file")
        self._server = self._start()
        return self._server

    def _start(self) -> Any:
        """The engine with the model and its projector loaded (the files are checked first)."""
        try:
            import xllamacpp
        except ImportError as exc:
            raise ModelUnavailableError(f"the local model runtime (xllamacpp) is missing: {exc}") from exc
        params = xllamacpp.CommonParams()
        params.model.path = str(self.model_path)
        params.mmproj.path = str(self.projector_path)
        params.n_ctx = self.context_tokens
        params.n_parallel = 1
        params.verbosity = -1
        if self.threads:
            params.cpuparams.n_threads = self.threads
            params.cpuparams_batch.n_threads = self.threads
        try:
            return xllamacpp.Server(params)
        except Exception as exc:
            raise ModelUnavailableError(
                f"cannot load the vision model {self.model_path.name} with the projector {self.projector_path.name}: "
                f"{exc} (a projector made for another model, or a file that holds no vision encoder)") from exc

    def close(self) -> None:
        with self._lock:
            self._server = None


def _gguf_reply(reply: Any, seconds: float, model: str) -> VisionReply:
    text, _ = engine_reply(reply, f"vision model {model}", ModelUnavailableError)
    prompt_tokens, completion_tokens = usage_tokens(reply)
    return VisionReply(text.strip(), prompt_tokens or 0, completion_tokens or 0, seconds)


@dataclass(frozen=True)
class VisionAccess:
    """What a spec may leave out: the API key (``VIDAGENT_CAPTIONER_API_KEY``/``VIDAGENT_VQA_API_KEY``, else the
    LLM's) and the endpoint to use when the spec names no ``base_url`` (the LLM's, when it is one)."""

    api_key: str | None = None
    base_url: str | None = None


OPENAI_OPTIONS = frozenset({"base_url", "concurrency", "timeout", "retries"})
GGUF_OPTIONS = frozenset({"mmproj", "threads", "context"})


def build_vision_chat(spec: BackendSpec, scheme: str, access: VisionAccess,
                      allowed: frozenset[str] = frozenset()) -> VisionChat:
    """The vision chat model a parsed spec names; options outside its own and ``allowed`` (the role's) are
    refused with ``ModelUnavailableError``."""
    options = dict(spec.options)
    own = OPENAI_OPTIONS if scheme == "openai" else GGUF_OPTIONS
    unknown = sorted(set(options) - own - allowed)
    if unknown:
        raise ModelUnavailableError(f"unknown option(s) {', '.join(unknown)} for a {scheme} vision model: "
                                    f"options are {', '.join(sorted(own | allowed))}")
    if not spec.model:
        raise ModelUnavailableError(f"a {scheme} vision model needs a model: {scheme}:MODEL")
    if scheme == "openai":
        base_url = options.get("base_url") or access.base_url
        if not base_url:
            raise ModelUnavailableError(f"openai:{spec.model} needs an endpoint: add ?base_url=URL "
                                        "(or set VIDAGENT_LLM_BASE_URL)")
        return EndpointVisionChat(base_url, spec.model, access.api_key,
                                  concurrency=int_option(options, "concurrency", 4, 1, 256),
                                  timeout_s=float_option(options, "timeout", 120.0, 1.0, 3600.0),
                                  max_retries=int_option(options, "retries", 4, 0, 20))
    if not options.get("mmproj"):
        raise ModelUnavailableError(f"gguf:{spec.model} needs its projector: add ?mmproj=PROJECTOR.gguf")
    return GGUFVisionChat(spec.model, options["mmproj"], context_tokens=int_option(options, "context", 4096, 512, 131072),
                          threads=int_option(options, "threads", 0, 0, 512))


def parse_vision_spec(spec: str) -> tuple[BackendSpec, str]:
    """The parsed spec and its scheme (``openai`` or ``gguf``)."""
    scheme = spec_scheme(spec)
    if scheme not in SCHEMES:
        raise ModelUnavailableError(f"bad model spec {spec!r}: expected openai:MODEL?base_url=URL or "
                                    "gguf:MODEL.gguf?mmproj=PROJECTOR.gguf")
    return parse_backend_spec(spec, scheme, f"{scheme}:MODEL?key=value&..."), scheme


def int_option(options: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    """An integer option within ``low``..``high`` (``ModelUnavailableError`` naming it otherwise)."""
    return int(_number_option(options, name, default, low, high, int))


def float_option(options: Mapping[str, str], name: str, default: float, low: float, high: float) -> float:
    """A number option within ``low``..``high`` (``ModelUnavailableError`` naming it otherwise)."""
    return float(_number_option(options, name, default, low, high, float))


def _number_option(options: Mapping[str, str], name: str, default: float, low: float, high: float,
                   kind: type) -> float:
    if name not in options:
        return default
    try:
        value = kind(options[name])
    except ValueError:
        raise ModelUnavailableError(f"option {name}={options[name]!r} is not a {kind.__name__}") from None
    if not low <= value <= high:
        raise ModelUnavailableError(f"option {name}={options[name]} is outside {low:g}..{high:g}")
    return value

