"""The evidence selector: even coverage, retrieval by the question and its options, the mix of both,
and disjoint subsets for self-consistency (a hashing embedder stands in for E5: retrieval by words)."""

from __future__ import annotations

import numpy as np
import pytest

from vidagent.errors import PlannerError
from vidagent.tools.evidence_selection import EvidenceSelector, query_texts, shifted_grid

from fakes.perception import HashingEmbedder

LINES = ["a man walks into the kitchen", "he opens the fridge", "he takes out a bottle of milk",
         "the cat sleeps on the sofa", "he pours milk into a glass", "a car drives past the window",
         "he drinks the milk", "he washes the glass", "the cat wakes up", "he leaves the kitchen"]


@pytest.fixture()
def items() -> list[np.ndarray]:
    return list(HashingEmbedder().embed_passages(LINES))


def test_even_keeps_the_first_and_last_and_spreads_the_rest(items):
    selector = EvidenceSelector(HashingEmbedder())
    assert selector.select(items, 4, "even", "anything") == [0, 3, 6, 9]


def test_query_chooses_the_lines_that_match_the_question_or_an_option_in_time_order(items):
    selector = EvidenceSelector(HashingEmbedder())
    picked = selector.select(items, 2, "query", "What does the cat do?", ["sleeps", "drives a car"])
    assert picked == sorted(picked) and {LINES[i] for i in picked} <= {
        "the cat sleeps on the sofa", "the cat wakes up", "a car drives past the window"}
    assert 3 in picked  # "the cat sleeps": the question and the first option both match it


def test_mixed_takes_half_by_query_and_fills_the_rest_evenly(items):
    selector = EvidenceSelector(HashingEmbedder())
    picked = selector.select(items, 4, "mixed", "Where does the car drive?", None)
    assert len(picked) == 4 and 5 in picked and picked == sorted(picked)
    assert 0 in picked  # coverage: the grid over what is left starts at the first line


def test_subsets_are_disjoint_where_there_are_lines_enough(items):
    selector = EvidenceSelector(HashingEmbedder())
    for rule in ("even", "query"):
        first, second = selector.subsets(items, 3, rule, "What does he drink?", ["milk", "water"], 2)
        assert len(first) == 3 and len(second) == 3 and not set(first) & set(second), rule


def test_fewer_items_than_k_are_all_read_and_bad_rules_are_refused(items):
    selector = EvidenceSelector(HashingEmbedder())
    assert selector.select(items[:3], 5, "query", "q") == [0, 1, 2]
    with pytest.raises(PlannerError, match="select must be one of"):
        selector.select(items, 3, "best", "q")


def test_an_item_without_an_embedding_is_never_preferred(items):
    selector = EvidenceSelector(HashingEmbedder())
    blank = [np.zeros_like(items[0])] + items[1:]
    scores = selector.relevance(blank, "a man walks into the kitchen", None)
    assert scores[0] == -np.inf and np.isfinite(scores[1:]).all()


def test_queries_are_the_question_then_the_question_with_each_option():
    assert query_texts("Why?", ["a", "b"]) == ["Why?", "Why? a", "Why? b"]


def test_one_grid_keeps_the_ends_and_several_interleave():
    assert shifted_grid(10, 4, 0, 1) == [0, 3, 6, 9]
    parts = [shifted_grid(12, 4, part, 3) for part in range(3)]
    assert parts == [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8, 11]]
