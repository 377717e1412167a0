"""How much experience to replay for a question: DigimonGPT's complexity-aware adjustment.

``C(q) = alpha * P(q) + beta * E(q)``: ``P`` is a chat model's rating of the question's semantic
complexity in [0, 1] (``experience_complexity`` in ``prompts/experience.toml``), ``E`` the Shannon entropy (bits) of
the question's keywords once stopwords are removed. The number of entries replayed of each memory
is ``round(k_min + C * (k_max - k_min))``, clamped to [k_min, k_max].

With the paper's ``alpha = 0.03`` the rating moves ``C`` by at most 0.03, so it changes ``k`` only
when the entropy term lands near a rounding boundary; ``needs_rating`` says when it can, so the
model is asked only then.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from vidagent.llm.base import Completion, Message
from vidagent.llm.metered import MeteredChat
from vidagent.prompts import prompt

PROMPTS = "vidagent.experience"


@dataclass(frozen=True)
class ReplaySizing:
    """The paper's defaults: alpha 0.03, beta 0.2, between 1 and 5 entries."""

    alpha: float = 0.03
    beta: float = 0.2
    k_min: int = 1
    k_max: int = 5

    def __post_init__(self) -> None:
        if not 0 <= self.k_min <= self.k_max:
            raise ValueError(f"replay sizes need 0 <= k_min <= k_max, got {self.k_min} and {self.k_max}")

    def score(self, rating: float, entropy: float) -> float:
        return self.alpha * rating + self.beta * entropy

    def count(self, score: float) -> int:
        """``round(k_min + C * (k_max - k_min))`` (halves round up), clamped to [k_min, k_max]."""
        value = math.floor(self.k_min + score * (self.k_max - self.k_min) + 0.5)
        return max(self.k_min, min(self.k_max, value))

    def needs_rating(self, entropy: float) -> bool:
        """Whether the model's rating can change the count, given the keyword entropy."""
        return self.count(self.score(0.0, entropy)) != self.count(self.score(1.0, entropy))


@dataclass(frozen=True)
class Complexity:
    """A question's complexity and the replay size it gives. ``rating`` is None when the model was
    not asked (it could not change the size) or its reply held no number (then 0.5 is used)."""

    keywords: tuple[str, ...]
    entropy: float
    rating: float | None
    score: float
    replay: int

    def describe(self) -> str:
        rated = "not asked" if self.rating is None else f"{self.rating:.2f}"
        return (f"complexity C={self.score:.3f} (keyword entropy {self.entropy:.2f} bits over "
                f"{len(self.keywords)} keywords, model rating {rated}) -> replay up to {self.replay} per memory")


def keywords(question: str) -> tuple[str, ...]:
    """The question's words, lower-cased, without stopwords."""
    stop = _stopwords()
    return tuple(word for word in re.findall(r"[a-z0-9]+(?:'[a-z]+)?", question.lower()) if word not in stop)


def keyword_entropy(question: str) -> float:
    """Shannon entropy (bits) of the keywords' frequency distribution; 0 for fewer than two keywords."""
    counts = Counter(keywords(question))
    total = sum(counts.values())
    if total == 0:
        return 0.0
    return max(0.0, -sum((n / total) * math.log2(n / total) for n in counts.values()))


def rate_complexity(llm: MeteredChat, question: str) -> tuple[float | None, Completion]:
    """The model's rating of the question's complexity in [0, 1] (None when the reply has no number)."""
    rating = prompt(PROMPTS, "experience_complexity")
    request = rating.render(question=question).strip()
    completion = llm.chat([Message("user", request)], max_tokens=rating.budget, stop=rating.stop, temperature=0.0)
    return parse_rating(completion.text), completion


def parse_rating(text: str) -> float | None:
    """The first number in ``text`` as a rating in [0, 1] (a percentage or a score out of 10 is scaled)."""
    match = re.search(r"\d+(?:\.\d+)?|\.\d+", text)
    if not match:
        return None
    value = float(match.group())
    if value > 10:
        value /= 100
    elif value > 1:
        value /= 10
    return min(1.0, max(0.0, value))


@lru_cache(maxsize=1)
def _stopwords() -> frozenset[str]:
    text = resources.files("vidagent.experience").joinpath("stopwords.txt").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))
