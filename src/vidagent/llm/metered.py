"""Counts the cost of every chat call made on behalf of one question."""

from __future__ import annotations

from typing import Sequence

from vidagent.llm.base import ChatModel, Completion, Message, Usage


class MeteredChat:
    """Wraps a chat model and adds each call's cost to ``usage``."""

    def __init__(self, model: ChatModel, usage: Usage | None = None) -> None:
        self.model = model
        self.usage = usage if usage is not None else Usage()
        self.name = model.name
        self.supports_images = model.supports_images

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
    ) -> Completion:
        completion = self.model.chat(messages, stop=stop, max_tokens=max_tokens, temperature=temperature,
                                     seed=seed, n=n, top_logprobs=top_logprobs)
        self.usage.add(completion)
        return completion
