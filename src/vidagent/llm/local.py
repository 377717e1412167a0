"""An embedded GGUF chat model, run in-process by llama.cpp (through ``xllamacpp``).

``xllamacpp.Server`` embeds llama.cpp's server engine without opening a socket: requests are
OpenAI-style dicts answered by a direct call. It applies the model's own chat template (ChatML
for Qwen), honours stop strings, and keeps one slot whose KV cache is reused for the longest
token prefix a new prompt shares with the previous one. A ReAct loop, whose every step resends
the same prompt with a little appended, therefore only pays for reading the new tokens.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from vidagent.chat_http import engine_reply
from vidagent.errors import LLMError, ModelUnavailableError
from vidagent.llm.base import Completion, Message, Sampling, first_token_logprobs, token_logprobs
from vidagent.llm.gguf_tokenizer import ReplyTokenizer, load_reply_tokenizer, token_grammar
from vidagent.llm.stopping import CallStoppedError, check_stop, current_stop

_GGUF_MAGIC = b"GGUF"


class LocalGGUFBackend:
    """A ``ChatBackend`` over a local GGUF file. The model is loaded on the first call.

    ``context_tokens`` bounds prompt plus answer; ``threads`` defaults to ``default_threads()``.
    Calls are serialised by a lock: one model, one KV cache.
    """

    supports_images = False
    scores_continuations = True

    def __init__(self, model_path: Path | str, *, context_tokens: int = 4096,
                 threads: int | None = None, prompt_cache_mib: int = 1024) -> None:
        self.model_path = Path(model_path)
        self.context_tokens = context_tokens
        self.threads = threads
        self.prompt_cache_mib = prompt_cache_mib
        self.name = f"local:{self.model_path.name}"
        self.load_seconds: float | None = None
        self.last_timings: dict[str, float] = {}
        """llama.cpp's timings of the last call (``cache_n``: prompt tokens reused from the KV cache)."""
        self._server: Any = None
        self._lock = threading.Lock()
        self._reply_tokenizer: ReplyTokenizer | None = None
        self._tokenizer_read = False
        self._last_scored = ScoredReply()

    def load(self) -> None:
        """Load the model now (otherwise the first ``complete`` does it)."""
        with self._lock:
            self._ensure_loaded()

    def close(self) -> None:
        """Free the model and its KV cache; a later call loads it again."""
        with self._lock:
            self._server = None
            self._last_scored = ScoredReply()

    def complete(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str] = (),
        max_tokens: int = 512,
        sampling: Sampling = Sampling(),
        continuation: str = "",
    ) -> Completion:
        """Answer ``messages`` (their images are ignored: this model reads text only).

        ``sampling.n`` completions are drawn one after another (the prompt is read once: the
        later draws reuse its KV cache), the i-th with seed ``seed + i``. ``continuation``: the reply
        is held to that text by a grammar and each of its tokens' log-probability is read off the
        model's own distribution (llama.cpp reports it before the grammar narrows the choice), so the
        text is scored as the model would continue with it. The grammar names the token ids the model's own
        tokenizer gives the text (``gguf_tokenizer``): held to the text alone, llama.cpp spelt it in pieces the
        model never reads, whose log-probabilities measured the spelling.
        """
        if not messages:
            raise LLMError("no messages to send to the model")
        if continuation:
            return self._score(messages, continuation)
        request: dict[str, Any] = {
            "messages": _messages_json(messages),
            "max_tokens": int(max_tokens),
            "temperature": float(sampling.temperature),
            "cache_prompt": True,
        }
        if sampling.temperature <= 0:
            request["top_k"] = 1
        if stop:
            request["stop"] = list(stop)
        if sampling.top_logprobs:
            request["logprobs"] = True
            request["top_logprobs"] = int(sampling.top_logprobs)
        draws: list[Completion] = []
        with self._lock:
            for index in range(sampling.n):
                check_stop()  # a cancelled question's draws end here, not after all n of them
                if sampling.seed is not None:
                    request["seed"] = sampling.seed + index
                draws.append(self._call(request)[0])
        first = draws[0]
        return Completion(first.text, first.prompt_tokens, sum(d.completion_tokens for d in draws),
                          sum(d.seconds for d in draws), others=tuple(d.text for d in draws[1:]),
                          first_token_logprobs=first.first_token_logprobs,
                          reused_prompt_tokens=first.reused_prompt_tokens)

    def _score(self, messages: Sequence[Message], continuation: str) -> Completion:
        tokenizer = self.reply_tokenizer()
        ids = tokenizer.encode(continuation) if tokenizer is not None else []
        conversation = _messages_json(messages)
        with self._lock:
            shared = self._last_scored.shared_with(conversation, ids, tokenizer) if ids else None
            kept = shared.logprobs if shared is not None else ()
            forced = ids[len(kept):]
            if kept:  # the shared tokens are written as the start of the reply: the model reads them, not forces them
                conversation = [*conversation, {"role": "assistant", "content": shared.text}]  # type: ignore[union-attr]
            request: dict[str, Any] = {
                "messages": conversation,
                # in the model's own tokens where its tokenizer was read, else over the text (a token is at least a byte)
                "max_tokens": len(forced) + 1 if ids else len(continuation.encode("utf-8")) + 4,
                "temperature": 0.0, "top_k": 1, "cache_prompt": True,
                "grammar": token_grammar(forced) if ids else f"root ::= {gbnf_literal(continuation)}",
                "logprobs": True, "top_logprobs": 1,
            }
            completion, reply = self._call(request)
            text = completion.text if not kept or completion.text.startswith(shared.text) else (  # type: ignore[union-attr]
                shared.text + completion.text)  # type: ignore[union-attr]
            if text != continuation:
                raise LLMError(f"local model {self.model_path.name} did not keep to the scored text "
                               f"({continuation[:40]!r} became {text[:40]!r})")
            logprobs = (*kept, *token_logprobs(reply["choices"][0]))
            if ids:
                self._last_scored = ScoredReply(conversation[:len(messages)], tuple(ids), logprobs)
        return replace(completion, text=continuation, token_logprobs=logprobs)

    def reply_tokenizer(self) -> ReplyTokenizer | None:
        """The model's own tokenizer, read from its GGUF file on first use (None: of a kind not read here)."""
        if not self._tokenizer_read:
            self._reply_tokenizer = load_reply_tokenizer(self.model_path)
            self._tokenizer_read = True
        return self._reply_tokenizer

    def _call(self, request: dict[str, Any]) -> tuple[Completion, dict[str, Any]]:
        """One request to the engine (call with the lock held): its completion and the raw reply; llama.cpp's
        timings are kept in ``last_timings``. A reply written for a question that can be cancelled is streamed,
        so that cancelling it stops the engine after the token under way (``_streamed``)."""
        server = self._ensure_loaded()
        started = time.perf_counter()
        stop = current_stop()
        try:
            if stop is not None and not request.get("logprobs"):
                reply = self._streamed(server, request, stop)
            else:
                reply = server.handle_chat_completions(request)
        except CallStoppedError:
            raise
        except Exception as exc:  # the binding raises RuntimeError/ValueError
            raise LLMError(f"local model {self.model_path.name} failed: {exc}") from exc
        completion = _completion(reply, time.perf_counter() - started, self.model_path.name)
        self.last_timings = dict(reply.get("timings") or {})
        return completion, reply

    @staticmethod
    def _streamed(server: Any, request: dict[str, Any], stop: threading.Event) -> dict[str, Any]:
        """``request`` answered token by token, the stream told to end (the callback returning True) as soon as
        ``stop`` is set: the reply put together as the engine gives it unstreamed (text, finish reason, usage,
        timings), or ``CallStoppedError`` when it was stopped."""
        pieces: list[str] = []
        ending: dict[str, Any] = {"finish_reason": None, "usage": {}, "timings": {}}

        def on_chunk(chunk: Any) -> bool:
            if isinstance(chunk, dict):
                for choice in chunk.get("choices") or ():
                    pieces.append((choice.get("delta") or {}).get("content") or "")
                    ending["finish_reason"] = choice.get("finish_reason") or ending["finish_reason"]
                ending["usage"] = chunk.get("usage") or ending["usage"]
                ending["timings"] = chunk.get("timings") or ending["timings"]
                if "error" in chunk:
                    ending["error"] = chunk["error"]
            return stop.is_set()

        server.handle_chat_completions(request | {"stream": True, "stream_options": {"include_usage": True}},
                                       on_chunk)
        if stop.is_set():
            raise CallStoppedError("the question was cancelled: its reply was stopped mid-way")
        if "error" in ending:
            raise LLMError(f"the local model failed: {ending['error']}")
        return {"choices": [{"index": 0, "finish_reason": ending["finish_reason"],
                             "message": {"role": "assistant", "content": "".join(pieces)}}],
                "usage": ending["usage"], "timings": ending["timings"]}

    def _ensure_loaded(self) -> Any:
        if self._server is not None:
            return self._server
        path = self.model_path
        if not path.is_file():
            raise ModelUnavailableError(
                f"model file {path} does not exist: run `vidagent models install`"
            )
        with path.open("rb") as f:
            if f.read(4) != _GGUF_MAGIC:
                raise ModelUnavailableError(f"{path} is not a GGUF model file")
        try:
            import xllamacpp
        except ImportError as exc:
            raise ModelUnavailableError(f"the local LLM runtime (xllamacpp) is missing: {exc}") from exc
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = self.context_tokens
        params.n_parallel = 1  # one slot, so consecutive calls share its KV cache
        params.cache_prompt = True
        params.cache_ram_mib = self.prompt_cache_mib
        params.verbosity = -1  # llama.cpp logs nothing but errors
        # no empty run at load: the load holds Python's lock (nothing else in the process runs meanwhile), and the
        # run cost 0.07-0.15 s of a 1.3-1.5 s load with no gain on the first call (0.56 s either way, 1.5B model)
        params.warmup = False
        threads = self.threads or default_threads()
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        started = time.perf_counter()
        try:
            self._server = xllamacpp.Server(params)
        except Exception as exc:
            raise ModelUnavailableError(
                f"cannot load {path} (corrupt or incomplete file? re-run `vidagent models install`): {exc}"
            ) from exc
        self.load_seconds = time.perf_counter() - started
        return self._server


@dataclass(frozen=True)
class SharedStart:
    """The tokens a reply to be scored shares with the last one scored after the same messages: their text and
    their log-probabilities as read then."""

    text: str
    logprobs: tuple[float, ...]


@dataclass(frozen=True)
class ScoredReply:
    """The last reply scored: after which messages, its token ids and each one's log-probability.

    Options to a question often begin alike ("C is cleaning the ..."). A token's log-probability depends only on
    what comes before it, so the tokens an option shares with the one scored before it after the same messages
    have the log-probabilities read then: the next option is written that far as the start of the reply (read from
    the KV cache, which still holds it) and only its own tokens are forced, one decode step each. Scored in sorted
    order, the options of 100 EgoSchema dev questions forced 17 % fewer tokens (10 % less model time), no answer
    changed. A shared token keeps the log-probability it had in the option before: the same, to the last digit, as
    forcing it again after the cached prompt; the first option's tokens were read after the prompt's own batch,
    whose arithmetic differs (up to ~0.1 a token), so options now agree on their shared start where they did not.
    """

    messages: list[dict[str, str]] = field(default_factory=list)
    ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()

    def shared_with(self, messages: list[dict[str, str]], ids: Sequence[int],
                    tokenizer: ReplyTokenizer | None) -> SharedStart | None:
        """The start ``ids`` shares with this reply after the same ``messages`` (None: none), cut back to where
        its text gives those very tokens again (the engine reads the written start as text) and short of the
        reply's last token (one at least is forced)."""
        if tokenizer is None or not self.ids or messages != self.messages or len(self.logprobs) < len(self.ids):
            return None
        length = 0
        for mine, theirs in zip(self.ids, ids[:-1]):
            if mine != theirs:
                break
            length += 1
        while length and tokenizer.encode(tokenizer.decode(ids[:length])) != list(ids[:length]):
            length -= 1
        if not length:
            return None
        return SharedStart(tokenizer.decode(ids[:length]), self.logprobs[:length])


def default_threads() -> int:
    """Every CPU this process may use (``LLMSettings.threads`` overrides it).

    Measured on a 2-vCPU machine (Qwen2.5 1.5B): 2 threads read prompts at ~56 tok/s and generate
    at ~20 tok/s when the machine is otherwise idle, twice the rate of 1 thread. llama.cpp's threads
    run in lock-step, so on a machine shared with other busy processes fewer threads can be steadier
    (1 thread held 11-12 tok/s where 2 dropped to 1-6 tok/s): set ``threads`` there.
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _messages_json(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def gbnf_literal(text: str) -> str:
    """``text`` as a GBNF string literal (llama.cpp's grammar syntax)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def _completion(reply: Any, seconds: float, model: str) -> Completion:
    text, choice = engine_reply(reply, f"local model {model}", LLMError)
    try:
        usage = reply.get("usage") or {}
        return Completion(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            seconds=seconds,
            first_token_logprobs=first_token_logprobs(choice),
            reused_prompt_tokens=int((reply.get("timings") or {}).get("cache_n", 0) or 0),
        )
    except (TypeError, AttributeError, ValueError) as exc:
        raise LLMError(f"local model {model} returned an unexpected response: {exc!r}") from exc

