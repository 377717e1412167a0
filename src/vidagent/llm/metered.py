"""Counts the cost of every chat call made on behalf of one question."""

from __future__ import annotations

import time
from typing import Callable, Sequence

from vidagent.llm.base import ChatModel, Completion, Message, Usage
from vidagent.llm.budget import Budget, BudgetMeter, BudgetSpentError
from vidagent.llm.stopping import check_stop


class MeteredChat:
    """Wraps a chat model and adds each call's cost to ``usage``; with a ``budget``, a call once it is
    spent, or one the seconds left cannot hold, raises ``BudgetSpentError`` (``meter`` says what was spent;
    it times each call by ``clock``)."""

    def __init__(self, model: ChatModel, usage: Usage | None = None, budget: Budget | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.model = model
        self.usage = usage if usage is not None else Usage()
        self.name = model.name
        self.supports_images = model.supports_images
        self.scores_continuations = bool(getattr(model, "scores_continuations", False))
        self.returns_logprobs = bool(getattr(model, "returns_logprobs", self.scores_continuations))
        self.meter = BudgetMeter(budget, clock=clock) if budget is not None else None

    def calls_left(self) -> int | None:
        """Calls the budget still allows, by its limit on calls and the seconds left (None: no limit on calls,
        and none known to the seconds)."""
        return self.meter.calls_left() if self.meter is not None else None

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
    ) -> Completion:
        check_stop()  # the question was cancelled (its client left): no call is made for it
        spent = self.meter.spent() if self.meter is not None else None
        if spent is not None:
            raise BudgetSpentError(f"the question's budget is spent ({spent})")
        started = self.meter.clock() if self.meter is not None else 0.0
        completion = self.model.chat(messages, stop=stop, max_tokens=max_tokens, temperature=temperature,
                                     seed=seed, n=n, top_logprobs=top_logprobs,
                                     **({"continuation": continuation} if continuation else {}))
        self.usage.add(completion)
        if self.meter is not None:
            self.meter.charge(completion, self.meter.clock() - started)
        return completion
