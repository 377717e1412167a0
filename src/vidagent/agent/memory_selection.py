"""Task-related memory selection (DoraemonGPT's TSM construction): the LLM reads the question and
says whether the space-dominant (object) memory is needed besides the time-dominant one."""

from __future__ import annotations

import re

from vidagent.llm.base import ChatModel, Message
from vidagent.prompts import load_prompt, render

MAX_TOKENS = 4


def needs_object_memory(llm: ChatModel, question: str) -> bool:
    """True when the model answers that the question needs the space-dominant memory."""
    prompt = render(load_prompt("vidagent.agent", "memory_selection"), question=question.strip())
    reply = llm.chat([Message("user", prompt)], max_tokens=MAX_TOKENS, stop=["\n"]).text
    return re.match(r"\W*(yes|y|space)", reply.strip(), re.IGNORECASE) is not None
