"""How the library search reads a query and fuses its rankings.

``query_words`` takes the content words of a query (``search_words.toml``'s stop words left out) for the
full-text ranking, and the object categories it names (a category's own name, singular or plural, or one of its
other words: "people" -> person, "ball" -> sports ball) for the exact category ranking. ``fuse_ranks`` fuses the
rankings by reciprocal rank (RRF: a line's score is the sum over rankings of ``1 / (RRF_K + rank)``), so a line
that the meaning, the words and the category all rank high comes first, and no ranking's raw scores need to be
comparable with another's.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Mapping, Sequence

RRF_K = 60  # the usual constant of reciprocal rank fusion: ranks deep in one list still count a little
MAX_TERMS = 32  # content words of a query read at most (each costs a full-text lookup)
_WORD = re.compile(r"[^\W_]+(?:['-][^\W_]+)*", re.UNICODE)


@dataclass(frozen=True)
class QueryWords:
    """The content words of a query (lower case, in order, once each) and the category names they may mean."""

    terms: tuple[str, ...]
    names: frozenset[str]

    def categories_among(self, known: Sequence[str]) -> tuple[str, ...]:
        """Those of ``known`` categories the query names (a category of several words by its last: "ball")."""
        return tuple(category for category in known
                     if category in self.names or category.split()[-1] in self.names)


@lru_cache(maxsize=1)
def _words() -> tuple[frozenset[str], Mapping[str, str]]:
    data = tomllib.loads(resources.files("vidagent.memory").joinpath("search_words.toml").read_text())
    stop = frozenset(data["stopwords"].split())
    other = {word: category for category, words in data["categories"].items() for word in words}
    return stop, other


def singular(word: str) -> str:
    """A plain English singular of ``word`` (dogs -> dog, boxes -> box, puppies -> puppy, glasses stays)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def query_words(query: str) -> QueryWords:
    """The content words of ``query`` and the category names they may mean (see the module's description)."""
    stop, other = _words()
    terms: list[str] = []
    for word in _WORD.findall(query.lower()):
        if word not in stop and word not in terms and (len(word) > 1 or word.isdigit()):
            terms.append(word)
            if len(terms) == MAX_TERMS:
                break
    names = set(terms) | {singular(term) for term in terms} | {other[t] for t in terms if t in other}
    text = " ".join(terms)
    names |= {category for phrase, category in other.items() if " " in phrase and phrase in text}
    return QueryWords(tuple(terms), frozenset(names))


def fuse_ranks(rankings: Mapping[str, Sequence[int]], weights: Mapping[str, float] | None = None
               ) -> list[tuple[int, float, tuple[str, ...]]]:
    """(item, fused score, the rankings that hold it) for every item of ``rankings`` (name -> items best first),
    best first; ties keep the order in which items were first met. ``weights``: a ranking's weight (default 1)."""
    scores: dict[int, float] = {}
    found: dict[int, list[str]] = {}
    for name, ranked in rankings.items():
        weight = (weights or {}).get(name, 1.0)
        for rank, item in enumerate(ranked, 1):
            scores[item] = scores.get(item, 0.0) + weight / (RRF_K + rank)
            found.setdefault(item, []).append(name)
    order = sorted(scores, key=lambda item: -scores[item])
    return [(item, scores[item], tuple(found[item])) for item in order]
