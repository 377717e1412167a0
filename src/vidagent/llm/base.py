"""The one chat interface every planner and tool uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

import numpy as np


@dataclass(frozen=True)
class Message:
    """One chat message. ``images`` (RGB uint8 arrays) are only sent to vision-capable backends."""

    role: str  # "system" | "user" | "assistant"
    content: str
    images: tuple[np.ndarray, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class Sampling:
    """How a reply is drawn: part of every request and of its cache key.

    ``temperature`` 0 is greedy decoding; ``seed`` makes sampling at a higher temperature
    repeatable (two seeds, two draws); ``n`` asks for that many completions of one prompt;
    ``top_logprobs`` asks for the log-probabilities of that many likeliest first tokens (how a
    planner scores options by likelihood; 0: none).
    """

    temperature: float = 0.0
    seed: int | None = None
    n: int = 1
    top_logprobs: int = 0

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}")
        if self.temperature < 0:
            raise ValueError(f"temperature must not be negative, got {self.temperature}")
        if not 0 <= self.top_logprobs <= 20:
            raise ValueError(f"top_logprobs must be between 0 and 20, got {self.top_logprobs}")


@dataclass(frozen=True)
class Completion:
    """What one chat call returned, with its cost. ``text`` is the first completion; a request
    for ``n`` completions keeps the others in ``others`` (``texts`` has them all). A request for
    ``top_logprobs`` gets ``first_token_logprobs``: (token, log-probability) of the likeliest
    first tokens of ``text``, most likely first."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    cached: bool = False
    others: tuple[str, ...] = ()
    first_token_logprobs: tuple[tuple[str, float], ...] = ()
    reused_prompt_tokens: int = 0  # of prompt_tokens, those the server read from its KV/prefix cache
    token_logprobs: tuple[float, ...] = ()  # a scored continuation: each of its tokens' log-probability

    @property
    def texts(self) -> tuple[str, ...]:
        return (self.text,) + self.others


@dataclass
class Usage:
    """Running totals of chat calls (cached calls cost no tokens and are counted apart)."""

    llm_calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    reused_prompt_tokens: int = 0  # prompt tokens the model did not read again (a KV prefix it kept)

    def add(self, completion: Completion) -> None:
        if completion.cached:
            self.cached_calls += 1
            return
        self.llm_calls += 1
        self.prompt_tokens += completion.prompt_tokens
        self.reused_prompt_tokens += completion.reused_prompt_tokens
        self.completion_tokens += completion.completion_tokens
        self.seconds += completion.seconds

    def to_dict(self) -> dict[str, float | int]:
        return {
            "llm_calls": self.llm_calls,
            "cached_calls": self.cached_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 3),
            "reused_prompt_tokens": self.reused_prompt_tokens,
        }


class ChatBackend(Protocol):
    """A chat model. Implementations raise ``LLMError`` on failure, never anything else.

    A backend with ``scores_continuations`` takes ``continuation``: the reply is then that text, not a
    generated one, and the completion's ``token_logprobs`` holds each of its tokens' log-probability
    after the messages (how a planner scores an option's text; the shared prompt is read once)."""

    name: str
    supports_images: bool
    scores_continuations: bool

    def complete(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str] = (),
        max_tokens: int = 512,
        sampling: Sampling = Sampling(),
        continuation: str = "",
    ) -> Completion: ...


class ChatModel(Protocol):
    """What planners and tools call: an ``LLM`` (backend + cache) or a metered view of one."""

    name: str
    supports_images: bool
    scores_continuations: bool

    def chat(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str] = (),
        max_tokens: int = 512,
        temperature: float | None = None,
        seed: int | None = None,
        n: int = 1,
        top_logprobs: int = 0,
        continuation: str = "",
    ) -> Completion: ...


def first_token_logprobs(choice: Any) -> tuple[tuple[str, float], ...]:
    """(token, log-probability) of the likeliest first tokens in an OpenAI-style choice's
    ``logprobs`` (empty when the reply has none)."""
    try:
        first = ((choice.get("logprobs") or {}).get("content") or [])[0]
        pairs = [(str(item["token"]), float(item["logprob"])) for item in first.get("top_logprobs") or []]
    except (IndexError, KeyError, TypeError, ValueError, AttributeError):
        return ()
    return tuple(sorted(pairs, key=lambda pair: -pair[1]))


def token_logprobs(choice: Any) -> tuple[float, ...]:
    """Each reply token's log-probability from an OpenAI-style choice's ``logprobs`` (empty: none)."""
    try:
        return tuple(float(item["logprob"]) for item in (choice.get("logprobs") or {}).get("content") or [])
    except (KeyError, TypeError, ValueError, AttributeError):
        return ()
