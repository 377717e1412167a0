"""A scripted chat model, for deterministic planner tests (the real local model has tests of its own)."""

from __future__ import annotations

from typing import Callable, Sequence, Union

from vidagent.llm.base import Completion, Message

Reply = Union[str, Completion, Callable[[Sequence[Message]], str]]


class ScriptedLLM:
    """Replies with the given texts in order (a callable reply is called with the request; a
    ``Completion`` is returned as it is, e.g. with first-token log-probabilities), honouring stop
    strings like a real backend, and records every request and its sampling."""

    name = "scripted"
    supports_images = False

    def __init__(self, replies: Sequence[Reply], *, scores_continuations: bool = False) -> None:
        self.scores_continuations = scores_continuations  # a Completion reply then carries token_logprobs
        self.replies = list(replies)
        self.requests: list[list[Message]] = []
        self.sampling: list[dict] = []

    def chat(self, messages, *, stop=(), max_tokens=512, temperature=None, seed=None, n=1,
             top_logprobs=0, continuation="") -> Completion:
        self.requests.append(list(messages))
        self.sampling.append({"temperature": temperature, "seed": seed, "n": n, "top_logprobs": top_logprobs,
                              "max_tokens": max_tokens, "continuation": continuation})
        if continuation and not self.scores_continuations:
            raise AssertionError("a continuation was scored by a model that cannot score one")
        if not self.replies:
            raise AssertionError("the scripted LLM ran out of replies")
        reply = self.replies.pop(0)
        if isinstance(reply, Completion):
            return reply
        text = reply(messages) if callable(reply) else reply
        for marker in stop:
            if marker in text:
                text = text[: text.index(marker)]
        prompt_tokens = sum(len(m.content.split()) for m in messages)
        return Completion(text=text, prompt_tokens=prompt_tokens, completion_tokens=len(text.split()), seconds=0.01)
