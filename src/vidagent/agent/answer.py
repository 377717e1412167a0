"""The result of a question: answer, chosen option, evidence, trace and cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vidagent.llm.base import Usage
from vidagent.tools.base import Evidence


@dataclass(frozen=True)
class Step:
    """One planner step: what the model wrote, the tool it called and what came back."""

    index: int
    thought: str
    action: str | None
    action_input: str
    observation: str
    model_output: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    is_error: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "thought": self.thought,
            "action": self.action,
            "action_input": self.action_input,
            "observation": self.observation,
            "model_output": self.model_output,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 3),
            "is_error": self.is_error,
        }


@dataclass
class Answer:
    """What ``vidagent.ask`` returns."""

    question: str
    text: str
    choices: list[str] | None = None
    choice_index: int | None = None
    evidence: list[Evidence] = field(default_factory=list)
    trace: list[Step] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    video: str = ""
    video_id: str = ""
    planner: str = "react"

    @property
    def choice(self) -> str | None:
        if self.choices is None or self.choice_index is None:
            return None
        return self.choices[self.choice_index]

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.text,
            "choices": self.choices,
            "choice_index": self.choice_index,
            "choice": self.choice,
            "evidence": [e.to_dict() for e in self.evidence],
            "usage": self.usage.to_dict(),
            "trace": [s.to_dict() for s in self.trace],
            "video": self.video,
            "video_id": self.video_id,
            "planner": self.planner,
        }
