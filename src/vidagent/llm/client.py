"""``LLM``: the one chat object planners and tools use, and ``build_llm`` to make it from settings."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from vidagent.config import Settings
from vidagent.errors import LLMError, ModelUnavailableError
from vidagent.llm.base import ChatBackend, Completion, Message, Sampling
from vidagent.llm.cache import ResponseCache, cache_key

_log = logging.getLogger(__name__)


class LLM:
    """A chat backend plus an optional response cache.

    ``chat`` returns a ``Completion``; a cache hit comes back with ``cached=True`` and the
    token counts of the original call (``Usage.add`` counts it apart). Images are dropped from
    messages when the backend cannot read them. Callers sum Completions into a ``Usage``.
    """

    def __init__(self, backend: ChatBackend, cache: ResponseCache | None = None, *,
                 default_temperature: float = 0.0) -> None:
        self.backend = backend
        self.cache = cache
        self.default_temperature = default_temperature
        self._warming: threading.Thread | None = None

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def supports_images(self) -> bool:
        return self.backend.supports_images

    @property
    def returns_logprobs(self) -> bool:
        """Whether ``top_logprobs`` gets the likeliest first tokens' log-probabilities (a model that scores
        continuations reads them in-process; an endpoint says so when probed)."""
        return self.scores_continuations or bool(getattr(self.backend, "returns_logprobs", False))

    @property
    def scores_continuations(self) -> bool:
        return bool(getattr(self.backend, "scores_continuations", False))

    def chat(self, messages: Sequence[Message], *, stop: Sequence[str] = (), max_tokens: int = 512,
             temperature: float | None = None, seed: int | None = None, n: int = 1,
             top_logprobs: int = 0, continuation: str = "") -> Completion:
        """Answer ``messages``, from the cache when this exact request was answered before.

        The sampling settings (temperature, seed, n) are part of the cache key: a new seed draws
        a new completion, the same seed returns the stored one. ``continuation``: score that text as
        the reply instead of generating one (only where ``scores_continuations``).
        """
        if not messages:
            raise LLMError("no messages to send to the model")
        if continuation and not self.scores_continuations:
            raise LLMError(f"{self.name} cannot score a given reply (it returns no per-token log-probabilities)")
        try:
            sampling = Sampling(self.default_temperature if temperature is None else float(temperature), seed, int(n),
                                int(top_logprobs))
        except ValueError as error:
            raise LLMError(f"bad sampling settings: {error}") from error
        if not self.supports_images:
            messages = [replace(m, images=()) if m.images else m for m in messages]
        stop = tuple(stop)
        key = None
        if self.cache is not None:
            started = time.perf_counter()
            key = cache_key(self.name, messages, stop=stop, max_tokens=max_tokens, sampling=sampling,
                            continuation=continuation)
            hit = self.cache.get(key)
            if hit is not None:
                return Completion(hit.texts[0], hit.prompt_tokens, hit.completion_tokens,
                                  time.perf_counter() - started, cached=True, others=hit.texts[1:],
                                  first_token_logprobs=hit.first_token_logprobs, token_logprobs=hit.token_logprobs)
        extra = {"continuation": continuation} if continuation else {}
        completion = self.backend.complete(messages, stop=stop, max_tokens=max_tokens, sampling=sampling, **extra)
        if self.cache is not None and key is not None:
            self.cache.put(key, completion)
        return completion

    def warm_up(self) -> None:
        """Start loading the backend's model on a thread of its own (an embedded model's weights: a few seconds),
        so that the load overlaps what a question does before its first call (opening a glance, indexing); the
        first call waits for it. Nothing for a backend with nothing to load; a failed load is tried again, and
        reported, by that call."""
        load = getattr(self.backend, "load", None)
        if not callable(load) or self._warming is not None:
            return

        def main() -> None:
            try:
                load()
            except Exception as error:  # noqa: BLE001 - the first call loads again and raises it where it is seen
                _log.debug("warming up %s failed: %s", self.name, error)

        self._warming = threading.Thread(target=main, daemon=True, name="llm-warm-up")
        self._warming.start()

    def close(self) -> None:
        """Free the backend (model memory, HTTP connections) and close the response cache."""
        if self._warming is not None:
            self._warming.join()  # a load under way would otherwise finish after the close
        close = getattr(self.backend, "close", None)
        if callable(close):
            close()
        if self.cache is not None:
            self.cache.close()


def resolve_local_model(model: str, models_dir: Path) -> Path:
    """A local model name (``qwen2.5-1.5b``…) or a path to a ``.gguf`` file, as an existing path."""
    from vidagent.models.install import model_path
    from vidagent.models.registry import LOCAL_CHAT_MODELS

    if model in LOCAL_CHAT_MODELS:
        return model_path(model, models_dir)
    path = Path(model).expanduser()
    if path.suffix.lower() == ".gguf" or path.exists():
        if not path.is_file():
            raise ModelUnavailableError(f"model file {path} does not exist")
        return path
    known = ", ".join(LOCAL_CHAT_MODELS)
    raise ModelUnavailableError(f"unknown local model {model!r}: use one of {known} or a .gguf path")


def build_llm(settings: Settings) -> LLM:
    """The ``LLM`` that ``settings.llm`` describes (the local model is loaded on first use)."""
    cfg = settings.llm
    backend: ChatBackend
    if cfg.backend == "local":
        path = resolve_local_model(cfg.model, settings.models_dir)
        from vidagent.llm.local import LocalGGUFBackend

        backend = LocalGGUFBackend(path, context_tokens=cfg.context_tokens, threads=cfg.threads)
    elif cfg.backend == "openai":
        if not cfg.base_url:
            raise LLMError("the openai backend needs a base URL (set VIDAGENT_LLM_BASE_URL)")
        from vidagent.llm.openai_compat import OpenAICompatibleBackend

        from vidagent.llm.probe import CapabilityCache

        backend = OpenAICompatibleBackend(cfg.base_url, cfg.model, api_key=cfg.api_key, timeout_s=cfg.timeout_s,
                                          capabilities_cache=CapabilityCache(settings.endpoints_path)
                                          if cfg.probe else None)
    else:
        raise LLMError(f"unknown LLM backend {cfg.backend!r} (use 'local' or 'openai')")
    cache = ResponseCache(settings.llm_cache_path) if cfg.cache else None
    return LLM(backend, cache, default_temperature=cfg.temperature)
