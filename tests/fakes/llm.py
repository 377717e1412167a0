"""A scripted chat model, for deterministic planner tests (the real local model has tests of its own)."""

from __future__ import annotations

from typing import Callable, Sequence, Union

from vidagent.llm.base import Completion, Message

Reply = Union[str, Completion, Callable[[Sequence[Message]], Union[str, Completion]]]


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
        produced = reply(messages) if callable(reply) else reply
        if isinstance(produced, Completion):  # a callable may answer with log-probabilities too (``prefers``)
            return produced
        text = produced
        for marker in stop:
            if marker in text:
                text = text[: text.index(marker)]
        prompt_tokens = sum(len(m.content.split()) for m in messages)
        return Completion(text=text, prompt_tokens=prompt_tokens, completion_tokens=len(text.split()), seconds=0.01)


def prefers(option: str) -> Callable[[Sequence[Message]], Union[str, Completion]]:
    """A reply that favours ``option`` however it is asked: where the request lists the options by number to be
    scored (``option_scoring``'s ``option_number``), the option's number is the likeliest first token; otherwise
    the option is named in words."""
    def reply(messages: Sequence[Message]) -> Union[str, Completion]:
        asked = messages[-1].content
        if "Reply with the number of the correct option only." not in asked:
            return option
        numbers = [line.split(". ", 1)[0] for line in asked.splitlines()
                   if ". " in line and line.split(". ", 1)[0].isdigit()]
        wanted = next(line.split(". ", 1)[0] for line in asked.splitlines() if line.split(". ", 1)[1:] == [option])
        likeliest = ((wanted, -0.1), *((number, -3.0) for number in numbers if number != wanted))
        return Completion(wanted, sum(len(m.content.split()) for m in messages), 1, 0.01,
                          first_token_logprobs=likeliest)
    return reply
