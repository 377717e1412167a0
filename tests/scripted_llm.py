"""A scripted chat model: the one fake allowed, for deterministic planner tests."""

from __future__ import annotations

from typing import Sequence

from vidagent.llm.base import Completion, Message


class ScriptedLLM:
    """Replies with the given texts in order, honouring stop strings like a real backend."""

    name = "scripted"
    supports_images = False

    def __init__(self, replies: Sequence[str]) -> None:
        self.replies = list(replies)
        self.requests: list[list[Message]] = []

    def chat(self, messages, *, stop=(), max_tokens=512, temperature=None) -> Completion:
        self.requests.append(list(messages))
        if not self.replies:
            raise AssertionError("the scripted LLM ran out of replies")
        text = self.replies.pop(0)
        for marker in stop:
            if marker in text:
                text = text[: text.index(marker)]
        prompt_tokens = sum(len(m.content.split()) for m in messages)
        return Completion(text=text, prompt_tokens=prompt_tokens, completion_tokens=len(text.split()), seconds=0.01)
