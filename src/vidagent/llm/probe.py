"""What an OpenAI-compatible endpoint accepts, found once by asking it and remembered per base URL and model.

Servers differ in what they take: llama.cpp's server with a text-only model answers an image with ``HTTP 500: image
input is not supported``; vLLM and llama.cpp's server return log-probabilities (``logprobs``), some hosted APIs and
older servers do not; not every server takes ``tools``. llama.cpp's server also tokenises a text (``/tokenize``) and
holds a reply to a grammar of those tokens, so a given reply can be scored there as the embedded model scores it
(``continuations``). A few small requests (a token or two each, and GETs for the context length) find out, and the answers are kept in a JSON file (``Settings.endpoints_path``) so that a
later run asks nothing. A server that could not be reached is not remembered: the next run asks again.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vidagent.redaction import redact_url
from vidagent.chat_http import ChatEndpoint, image_data_url, refuses
from vidagent.errors import LLMError
from vidagent.llm.base import token_logprobs
from vidagent.llm.gguf_tokenizer import token_grammar

_log = logging.getLogger(__name__)
PROBE_IMAGE = np.full((16, 16, 3), 128, dtype=np.uint8)


@dataclass(frozen=True)
class EndpointCapabilities:
    """What one model behind one endpoint accepts. ``context_tokens``: its context length (None: not reported)."""

    images: bool
    tool_calls: bool
    logprobs: bool
    context_tokens: int | None = None
    continuations: bool = False  # scores a given reply's tokens (llama.cpp's /tokenize and token grammar)

    def summary(self) -> str:
        said = [f"images {'yes' if self.images else 'no'}", f"tool calls {'yes' if self.tool_calls else 'no'}",
                f"log-probabilities {'yes' if self.logprobs else 'no'}",
                f"scores a given reply {'yes' if self.continuations else 'no'}",
                f"context {self.context_tokens if self.context_tokens else 'not reported'}"]
        return ", ".join(said)


ASSUMED = EndpointCapabilities(images=True, tool_calls=False, logprobs=False)
"""What an endpoint that is not probed is taken to accept (a vision model, no log-probabilities)."""


def probe(endpoint: ChatEndpoint, model: str) -> EndpointCapabilities:
    """Ask the endpoint what ``model`` accepts. Raises ``LLMError`` where the server cannot be reached or fails
    a plain request (then nothing can be known)."""
    text = [{"role": "user", "content": "Say yes."}]
    status, reply = endpoint.try_once(_logprobs_request(model, text))
    if status == 0 or status >= 500 and not _refused(reply):
        raise endpoint.error(f"{endpoint.where} could not be probed: {_said(status, reply)}")
    logprobs = status == 200 and _has_logprobs(reply)
    if status == 200 and not logprobs:  # a reply token that is part of a character carries none: ask once more
        again = [{"role": "user", "content": "Write the word ok."}]
        status, reply = endpoint.try_once(_logprobs_request(model, again, tokens=3))
        logprobs = status == 200 and _has_logprobs(reply)
    if status != 200:  # it refused the log-probabilities: a plain request must pass
        status, reply = endpoint.try_once({"model": model, "messages": text, "max_tokens": 1})
        if status != 200:
            raise endpoint.error(f"{endpoint.where} could not be probed: {_said(status, reply)}")
    looking = [{"role": "user", "content": [{"type": "text", "text": "Say yes."},
                                            {"type": "image_url", "image_url": {"url": image_data_url(PROBE_IMAGE)}}]}]
    images = _accepted(endpoint, {"model": model, "messages": looking, "max_tokens": 1}, "images")
    tool = {"type": "function", "function": {"name": "noop", "description": "Does nothing.",
                                             "parameters": {"type": "object", "properties": {}}}}
    tool_calls = _accepted(endpoint, {"model": model, "messages": text, "max_tokens": 1, "tools": [tool]},
                           "tool calls")
    continuations = logprobs and scored_reply(endpoint, model, text, "yes") is not None
    return EndpointCapabilities(images, tool_calls, logprobs, context_length(endpoint, model), continuations)


def tokenised(endpoint: ChatEndpoint, text: str) -> list[int] | None:
    """``text`` in the served model's tokens, as llama.cpp's ``/tokenize`` gives them (None: the server has none)."""
    status, reply = endpoint.try_once({"content": text, "add_special": False}, "../tokenize")
    tokens = reply.get("tokens") if status == 200 and isinstance(reply, dict) else None
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, int) for t in tokens):
        return None
    return tokens


def continuation_request(model: str, messages: list[dict[str, Any]], ids: list[int]) -> dict[str, Any]:
    """A chat request whose reply is held to the tokens ``ids`` (a llama.cpp token grammar), each token's
    log-probability returned (llama.cpp reports it before the grammar narrows the choice)."""
    return {"model": model, "messages": messages, "max_tokens": len(ids) + 1, "temperature": 0.0, "top_k": 1,
            "cache_prompt": True, "grammar": token_grammar(ids), "logprobs": True, "top_logprobs": 1}


def scored_reply(endpoint: ChatEndpoint, model: str, messages: list[dict[str, Any]],
                 reply: str) -> tuple[float, ...] | None:
    """Each token's log-probability of ``reply`` as the answer to ``messages`` (None: the server cannot say)."""
    ids = tokenised(endpoint, reply)
    if ids is None:
        return None
    status, answer = endpoint.try_once(continuation_request(model, messages, ids))
    if status != 200 or not isinstance(answer, dict):
        return None
    try:
        choice = answer["choices"][0]
        kept = choice["message"]["content"] == reply
    except (KeyError, IndexError, TypeError):
        return None
    logprobs = token_logprobs(choice)
    return logprobs if kept and len(logprobs) >= len(ids) else None


def context_length(endpoint: ChatEndpoint, model: str) -> int | None:
    """The model's context length as the server reports it: vLLM's ``max_model_len`` in ``/models``, llama.cpp's
    ``n_ctx`` in ``/props`` (else the model's trained ``n_ctx_train``), ``context_length`` as some others say."""
    status, props = endpoint.try_once(None, "../props")
    if status == 200 and isinstance(props, dict):
        settings = props.get("default_generation_settings")
        found = _positive((settings or {}).get("n_ctx") if isinstance(settings, dict) else None)
        if found:
            return found
    status, listing = endpoint.try_once(None, "/models")
    entries = listing.get("data") if status == 200 and isinstance(listing, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
        found = (_positive(entry.get("max_model_len")) or _positive(entry.get("context_length"))
                 or _positive(meta.get("n_ctx")) or _positive(meta.get("n_ctx_train")))
        if found and (entry.get("id") in (model, None) or len(entries) == 1):
            return found
    return None


class CapabilityCache:
    """The probed capabilities of every endpoint and model, in one JSON file (written whole, atomically)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def get(self, base_url: str, model: str) -> EndpointCapabilities | None:
        entry = self._read().get(_key(base_url, model))
        if not isinstance(entry, dict):
            return None
        try:
            return EndpointCapabilities(bool(entry["images"]), bool(entry["tool_calls"]), bool(entry["logprobs"]),
                                        _positive(entry.get("context_tokens")), bool(entry.get("continuations")))
        except KeyError:
            return None

    def put(self, base_url: str, model: str, capabilities: EndpointCapabilities) -> None:
        known = self._read()
        known[_key(base_url, model)] = asdict(capabilities)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(known, out, indent=1, sort_keys=True)
        os.replace(temporary, self.path)

    def _read(self) -> dict[str, Any]:
        try:
            known = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return known if isinstance(known, dict) else {}


def remembered(endpoint: ChatEndpoint, model: str, cache: CapabilityCache) -> EndpointCapabilities:
    """The endpoint's capabilities for ``model``: from the cache, else probed and kept there."""
    known = cache.get(endpoint.base_url, model)
    if known is not None:
        return known
    found = probe(endpoint, model)
    _log.info("%s, model %s: %s", endpoint.where, model, found.summary())
    cache.put(endpoint.base_url, model, found)
    return found


def _logprobs_request(model: str, messages: list[dict[str, Any]], tokens: int = 1) -> dict[str, Any]:
    """A short greedy request for the reply tokens' log-probabilities (greedy: a sampled first token can be a
    fragment of a character, which llama.cpp's server returns with no log-probability, and a probe that
    answered by chance would be remembered)."""
    return {"model": model, "messages": messages, "max_tokens": tokens, "temperature": 0.0, "logprobs": True,
            "top_logprobs": 2}


def _accepted(endpoint: ChatEndpoint, body: dict[str, Any], what: str) -> bool:
    status, reply = endpoint.try_once(body)
    if status == 200 and isinstance(reply, dict) and reply.get("choices"):
        return True
    if status == 0 or status >= 500 and not _refused(reply):
        raise endpoint.error(f"{endpoint.where} failed while probed for {what}: {_said(status, reply)}")
    return False


def _has_logprobs(reply: Any) -> bool:
    try:
        tokens = reply["choices"][0]["logprobs"]["content"]
        return any(isinstance(token, dict) and bool(token.get("top_logprobs")) for token in tokens)
    except (KeyError, IndexError, TypeError):
        return False


def _message(reply: Any) -> str:
    error = reply.get("error", reply) if isinstance(reply, dict) else reply
    return str(error.get("message", "") if isinstance(error, dict) else error or "")


def _refused(reply: Any) -> bool:
    return refuses(_message(reply))


def _said(status: int, reply: Any) -> str:
    text = " ".join(_message(reply).split())[:200]
    return (f"HTTP {status}: {text}" if status else text) or f"HTTP {status}"


def _positive(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def _key(base_url: str, model: str) -> str:
    """The cache's key: the address without its credentials (a key is never written to a file)."""
    return f"{redact_url(base_url.rstrip('/'))} {model}"
