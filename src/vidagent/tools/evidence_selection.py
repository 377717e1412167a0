"""Which few stretches of a memory a small model should read for a question: chosen by retrieval.

A 1.5B model answers better from five evenly spread captions than from all of them; reading a few
*relevant* ones is the next step (VideoAgent's and LLoVi's successors read 8-20 chosen captions).
``EvidenceSelector`` ranks a memory's items (caption lines, speech, on-screen text, a document's
passages: anything with a text embedding) against the question and each of its options, with no
model call and deterministically:

- ``even``: ``k`` items evenly spread, first and last kept (the coverage baseline);
- ``query``: the ``k`` items most similar to the question or to the question with one of its options
  (each item scored by its best match among those queries, each query in E5's "query:" form);
- ``mixed``: ``k // 2`` by ``query``, the rest evenly spread over what is left (coverage for questions
  about the whole video, relevance for questions about a moment).

The picks come back in time order (their index order), so a prompt reads them as the video runs.
``subsets`` makes several disjoint selections for self-consistency: each takes every ``m``-th pick of
a ranking ``k * m`` long (``query``), or an evenly spread grid shifted by a fraction of its step
(``even``), so that votes over them are not votes over the same lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from vidagent.errors import PlannerError
from vidagent.perception.base import TextEmbedder
from vidagent.video.sampling import stepped_indices

SELECT_RULES = ("even", "query", "mixed")


def check_select(rule: str) -> None:
    """A ``select`` option must name a rule."""
    if rule not in SELECT_RULES:
        raise PlannerError(f"select must be one of {', '.join(SELECT_RULES)}, got {rule!r}")


def query_texts(question: str, choices: Sequence[str] | None) -> list[str]:
    """What items are matched against: the question, then the question with each option."""
    return [question] + [f"{question} {choice}" for choice in choices or ()]


@dataclass(frozen=True)
class EvidenceSelector:
    """Chooses items by ``rule`` (see the module); ``embedder`` embeds the queries (the items carry
    their own embeddings, made by the same model when the memory was built)."""

    embedder: TextEmbedder

    def relevance(self, items: Sequence[np.ndarray], question: str, choices: Sequence[str] | None) -> np.ndarray:
        """Each item's best cosine similarity to any query; an item is one or more unit rows (a line of
        several segments scores by its best segment); an item with no embedding (all zeros) scores -inf."""
        queries = self.embedder.embed_queries(query_texts(question, choices))
        scores = np.full(len(items), -np.inf, dtype=np.float64)
        for index, rows in enumerate(items):
            matrix = np.asarray(rows, np.float32).reshape(-1, queries.shape[1])
            matrix = matrix[matrix.any(axis=1)]
            if len(matrix):
                scores[index] = float((matrix @ queries.T).max())
        return scores

    def select(self, items: Sequence[np.ndarray], k: int, rule: str, question: str,
               choices: Sequence[str] | None = None) -> list[int]:
        """The indices of at most ``k`` items, in order."""
        return self.subsets(items, k, rule, question, choices, 1)[0]

    def subsets(self, items: Sequence[np.ndarray], k: int, rule: str, question: str,
                choices: Sequence[str] | None, count: int) -> list[list[int]]:
        """``count`` selections of at most ``k`` items each, disjoint where there are items enough."""
        check_select(rule)
        if k < 1 or count < 1:
            raise PlannerError("a selection needs k and count of at least 1")
        total = len(items)
        if total <= k:
            return [list(range(total))] * count
        if rule == "even":
            return [shifted_grid(total, k, part, count) for part in range(count)]
        ranked = [int(i) for i in np.argsort(-self.relevance(items, question, choices), kind="stable")]
        by_query = k if rule == "query" else k // 2
        picks = []
        for part in range(count):
            chosen = ranked[part::count][:by_query]
            rest = [i for i in range(total) if i not in set(chosen)]
            if len(chosen) < k:
                chosen += [rest[i] for i in shifted_grid(len(rest), k - len(chosen), part, count)]
            picks.append(sorted(chosen))
        return picks


def shifted_grid(total: int, k: int, part: int, parts: int) -> list[int]:
    """``k`` of ``total`` indices evenly spread. One part keeps the first and last (``stepped_indices``);
    of several, part ``p`` takes the point ``(p + 0.5) / parts`` of the way through each of ``k`` equal
    stretches, so the parts interleave without sharing an index (where ``total >= k * parts``)."""
    if parts == 1:
        return stepped_indices(total, k)
    width = total / k
    return sorted({min(total - 1, int((j + (part + 0.5) / parts) * width)) for j in range(k)})
