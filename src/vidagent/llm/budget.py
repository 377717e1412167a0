"""A question's budget: how many model calls, tokens, seconds and frames it may spend (issue 23, item 4).

``Budget.parse("calls=4,tokens=6000,seconds=60,frames=16")`` reads the form the CLI, the server and eval take.
A ``BudgetMeter`` counts what one question spent against it: every call (a call served from the response
cache counts too, so that the cache never changes which path a planner takes), the prompt and completion
tokens each call carried, and the seconds since the question began. ``MeteredChat`` refuses a call once
the budget is spent (``BudgetSpentError``), and a call its recent calls say cannot finish in the seconds left:
one is started only while the seconds left are at least the longest of the last ``RECENT_CALLS`` calls (issue
42: ``seconds=300`` stopped at 422 s, after a call started that could not finish in time). A call that starts
finishes, so tokens can pass their limit by that call, and seconds where a call takes longer than the recent
ones (the first call has none to be judged by). Seconds run from the question's start (indexing a new video
included), by the meter's ``clock`` (``time.monotonic``; a test gives its own). ``calls_left`` counts the calls
the limit on calls leaves and, after a first call, no more than fit in the seconds left; react looks at it to
keep the last call for its answer. A tool's own calls (the SQL sub-agent writes and reads with two) count too
and can leave none. Frames are those shown to the visual question
answerer (``tools.vqa.FrameBudgetVQA``): a request for more than are left is thinned to what is left, and
once none are left looking fails as a tool error while the planner goes on reasoning with what it has
(frames spent do not end the question).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from vidagent.errors import LLMError
from vidagent.llm.base import Completion

_KEYS = ("calls", "tokens", "seconds", "frames")
RECENT_CALLS = 5  # the calls whose longest duration says how long the next one may take


class BudgetSpentError(LLMError):
    """The question's budget is spent: no more model calls."""


@dataclass(frozen=True)
class Budget:
    """Limits of one question (``None``: no limit on that)."""

    calls: int | None = None
    tokens: int | None = None
    seconds: float | None = None
    frames: int | None = None

    def __post_init__(self) -> None:
        for key in _KEYS:
            value = getattr(self, key)
            if value is not None and not 0 < value < float("inf"):  # nan and inf too
                raise ValueError(f"a budget's {key} must be a number above 0, got {value}")

    @classmethod
    def parse(cls, text: str) -> "Budget":
        """``calls=N,tokens=T,seconds=S,frames=F`` (any of them, in any order)."""
        values: dict[str, Any] = {}
        for part in (p.strip() for p in text.split(",") if p.strip()):
            key, sep, value = part.partition("=")
            key = key.strip().lower()
            if not sep or key not in _KEYS:
                raise ValueError(f"budget {text!r}: write calls=N, tokens=T, seconds=S or frames=F, comma-separated")
            if key in values:
                raise ValueError(f"budget {text!r}: {key} is given twice")
            try:
                values[key] = float(value) if key == "seconds" else int(value)
            except ValueError:
                raise ValueError(f"budget {text!r}: {key} must be a number, got {value.strip()!r}") from None
        if not values:
            raise ValueError("an empty budget: write calls=N, tokens=T, seconds=S or frames=F")
        return cls(**values)

    def within(self, cap: "Budget") -> "Budget":
        """This budget held to ``cap`` (a server's most per question): each limit the smaller of the two, a limit
        that only one of them sets kept as it is."""
        def smaller(key: str) -> Any:
            values = [value for value in (getattr(self, key), getattr(cap, key)) if value is not None]
            return min(values) if values else None

        return Budget(**{key: smaller(key) for key in _KEYS})

    def to_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in _KEYS if getattr(self, key) is not None}

    def __str__(self) -> str:
        return ",".join(f"{key}={value:g}" for key, value in self.to_dict().items())


@dataclass
class BudgetMeter:
    """What one question spent against ``budget``; ``durations`` holds each call's seconds, by ``clock``."""

    budget: Budget
    calls: int = 0
    tokens: int = 0
    frames: int = 0
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)
    started: float | None = None  # None: now, by ``clock``
    durations: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.started is None:
            self.started = self.clock()

    def charge(self, completion: Completion, seconds: float | None = None) -> None:
        """Count one call, its tokens and (when given) how many seconds it took."""
        self.calls += 1
        self.tokens += completion.prompt_tokens + completion.completion_tokens
        if seconds is not None:
            self.durations.append(max(0.0, seconds))

    @property
    def seconds(self) -> float:
        return self.clock() - (self.started or 0.0)

    def expected_call_seconds(self) -> float | None:
        """How long the next call may take: the longest of the last ``RECENT_CALLS`` calls (None before any
        call, or where they all took no time, as cached replies do)."""
        recent = self.durations[-RECENT_CALLS:]
        longest = max(recent, default=0.0)
        return longest if longest > 0 else None

    def calls_in_time(self) -> int | None:
        """How many calls of the expected length fit in the seconds left (None: no limit on seconds, or
        no call to tell the length by)."""
        expected = self.expected_call_seconds()
        if self.budget.seconds is None or expected is None:
            return None
        return int(max(0.0, self.budget.seconds - self.seconds) // expected)

    def calls_left(self) -> int | None:
        """Calls the budget still allows: those left of a limit on calls, and no more than fit in the seconds
        left (None: neither limits them)."""
        counted = None if self.budget.calls is None else max(0, self.budget.calls - self.calls)
        timed = self.calls_in_time()
        if counted is None or timed is None:
            return timed if counted is None else counted
        return min(counted, timed)

    def take_frames(self, wanted: int) -> int:
        """How many of ``wanted`` frames may still be looked at, charged as taken (all without a limit)."""
        allowed = wanted if self.budget.frames is None else max(0, min(wanted, self.budget.frames - self.frames))
        self.frames += allowed
        return allowed

    def spent(self) -> str | None:
        """What is spent (``calls 4 of 4``; seconds also when too few are left for a call as long as the
        longest recent one), or None while every limit holds."""
        budget = self.budget
        if budget.calls is not None and self.calls >= budget.calls:
            return f"calls {self.calls} of {budget.calls}"
        if budget.tokens is not None and self.tokens >= budget.tokens:
            return f"tokens {self.tokens} of {budget.tokens}"
        if budget.seconds is not None:
            seconds, expected = self.seconds, self.expected_call_seconds()
            if seconds >= budget.seconds:
                return f"seconds {seconds:.0f} of {budget.seconds:g}"
            if expected is not None and budget.seconds - seconds < expected:
                return (f"seconds {seconds:.0f} of {budget.seconds:g}: a call takes up to {expected:.0f} s, "
                        f"{budget.seconds - seconds:.0f} s are left")
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"limit": self.budget.to_dict(), "spent": {"calls": self.calls, "tokens": self.tokens,
                                                          "seconds": round(self.seconds, 3), "frames": self.frames}}
