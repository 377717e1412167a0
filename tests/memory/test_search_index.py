"""The library search index on a library built with the scripted perception: lines of every kind, hybrid
ranking, filters, keeping up with the library, and refusals."""

from __future__ import annotations

import sqlite3
from dataclasses import replace

import numpy as np
import pytest

from vidagent.errors import MemoryStoreError
from vidagent.memory.builder import ALL_STAGES
from vidagent.memory.search_index import EXACT_LIMIT, SearchFilters, SearchIndex
from vidagent.memory.search_lines import SearchLine, merged_spans
from vidagent.memory.search_moments import SearchHit, moments
from vidagent.memory.search_ranking import fuse_ranks, query_words, singular
from vidagent.memory.store import Library

from fakes.library import library_from_rows
from fakes.perception import FakeClip, HashingEmbedder, Scene, SceneObject

DOG = SceneObject("dog", (0.1, 0.4, 0.5, 0.9))
PERSON = SceneObject("person", (0.55, 0.1, 0.9, 0.95))
BOAT = SceneObject("boat", (0.2, 0.3, 0.8, 0.7))


def clips() -> list[FakeClip]:
    return [
        FakeClip("garden", [Scene("a lawn with a fence"), Scene("a dog runs across the lawn", objects=(DOG,)),
                            Scene("a dog and a man play fetch", objects=(DOG, PERSON))],
                 speech=[(0.5, 1.5, "come here buddy")]),
        FakeClip("river", [Scene("a tour boat passes under a bridge", objects=(BOAT,), text=("SAIL 42",)),
                           Scene("the boat reaches the pier", objects=(BOAT,), text=("SAIL 42",))]),
        FakeClip("kitchen", [Scene("a woman mixes batter in a bowl", objects=(PERSON,)),
                             Scene("the batter goes into the oven")],
                 speech=[(0.2, 1.8, "now we preheat the oven to two hundred degrees")]),
    ]


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    path = tmp_path_factory.mktemp("search") / "library.sqlite"
    videos = library_from_rows(path, clips(), ALL_STAGES)
    return path, {name: video.content_hash for name, video in videos.items()}


@pytest.fixture
def index(library, tmp_path):
    path, _ = library
    with Library(path) as lib, SearchIndex(tmp_path / "search.sqlite") as made:
        made.sync(lib, HashingEmbedder())
        yield made


def search(index: SearchIndex, query: str, filters: SearchFilters = SearchFilters(), limit: int = 10):
    vector = HashingEmbedder().embed_queries([query])[0]
    return index.search(query, vector, filters, limit=limit)


def test_every_kind_of_line_is_indexed(index, library):
    _, ids = library
    kinds = {row for row in index._conn.execute("SELECT DISTINCT kind FROM lines")}
    assert {("object",), ("text",), ("speech",), ("segment",)} <= kinds
    assert index.video_count() == 3
    assert set(index.categories()) >= {"dog", "person", "boat"}


def test_a_category_finds_every_video_with_it_and_when(index, library):
    _, ids = library
    hits = search(index, "which videos show a dog, and when?")
    dog_objects = [hit for hit in hits if hit.kind == "object" and hit.category == "dog"]
    assert [hit.video_id for hit in dog_objects] == [ids["garden"]]
    assert hits[0].category == "dog" and "category" in hits[0].matched_by and "words" in hits[0].matched_by
    dog = dog_objects[0]
    assert dog.start_s >= 1.5 and dog.end_s <= 6.5 and dog.spans  # the dog is seen from the second scene on
    people = {hit.video_id for hit in search(index, "people") if hit.category == "person"}
    assert people == {ids["garden"], ids["kitchen"]}  # "people" names the person category


def test_on_screen_text_and_speech_are_found_by_their_words(index, library):
    _, ids = library
    text = search(index, "sail 42")[0]
    assert (text.kind, text.video_id, text.text) == ("text", ids["river"], "SAIL 42")
    said = search(index, "preheat the oven")[0]
    assert said.kind == "speech" and said.video_id == ids["kitchen"] and "words" in said.matched_by


def test_filters_restrict_video_kind_and_time_added(index, library):
    _, ids = library
    only_river = search(index, "dog boat", SearchFilters(videos=(ids["river"],)))
    assert only_river and {hit.video_id for hit in only_river} == {ids["river"]}
    speech = search(index, "oven", SearchFilters(kinds=("speech",)))
    assert speech and {hit.kind for hit in speech} == {"speech"}
    assert search(index, "dog", SearchFilters(since="2999-01-01")) == []
    with pytest.raises(ValueError, match="unknown kind"):
        SearchFilters(kinds=("scenes",))


def test_the_index_follows_the_library(library, tmp_path):
    path, ids = library
    copy = tmp_path / "library.sqlite"
    with sqlite3.connect(path) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    embedder = HashingEmbedder()
    with Library(copy) as lib, SearchIndex(tmp_path / "search.sqlite") as index:
        first = index.sync(lib, embedder)
        assert len(first.updated) == 3 and first.lines == index.line_count()
        assert index.sync(lib, embedder).updated == []  # nothing changed: nothing rewritten
        lib.rows("SELECT 1")
        with sqlite3.connect(copy) as conn:  # a video removed from the library by any path
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("DELETE FROM videos WHERE video_id = ?", (ids["river"],))
        again = index.sync(lib, embedder)
        assert again.removed == [ids["river"]] and index.video_count() == 2
        assert all(hit.video_id != ids["river"] for hit in search(index, "boat sail"))
        rebuilt = index.sync(lib, embedder, rebuild=True)
        assert len(rebuilt.updated) == 2 and index.line_count() == rebuilt.lines


def test_vectors_past_the_exact_limit_are_found_through_their_binary_copy(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((400, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    lines = [SearchLine("segment", float(i), float(i + 1), f"line {i}") for i in range(400)]
    with SearchIndex(tmp_path / "search.sqlite") as index:
        index.add_lines("a" * 16, "/v.mp4", "2026-01-01", 400.0, "sig", lines, vectors)
        monkeypatch.setattr("vidagent.memory.search_index.EXACT_LIMIT", 100)
        for target in (7, 123, 391):
            query = vectors[target] + 0.05 * rng.standard_normal(32).astype(np.float32)
            hits = index.search("", query, limit=3)
            assert hits[0].start_s == float(target) and hits[0].matched_by == ("meaning",)
    assert EXACT_LIMIT >= 10_000


def test_a_damaged_index_file_is_a_clear_error(tmp_path):
    broken = tmp_path / "search.sqlite"
    broken.write_bytes(b"this is not a database" * 100)
    with pytest.raises(MemoryStoreError, match="search index .*rebuild"):
        SearchIndex(broken).sync  # noqa: B018


def test_query_words_and_fusion():
    words = query_words("Which videos show two dogs and people playing with a ball?")
    assert words.terms == ("two", "dogs", "people", "playing", "ball")
    assert words.categories_among(["dog", "person", "sports ball", "cat"]) == ("dog", "person", "sports ball")
    assert singular("puppies") == "puppy" and singular("boxes") == "box" and singular("glass") == "glass"
    fused = fuse_ranks({"meaning": [1, 2, 3], "words": [3, 1], "category": [3]})
    assert [item for item, _, _ in fused] == [3, 1, 2] and fused[0][2] == ("meaning", "words", "category")
    assert merged_spans([(4.0, 6.0), (0.0, 2.0), (2.0, 4.0), (9.0, 10.0)]) == ((0.0, 6.0), (9.0, 10.0))


def test_a_long_query_reads_a_bounded_number_of_words(index):
    words = query_words(" ".join(f"word{i}" for i in range(500)))
    assert len(words.terms) == 32
    assert search(index, " ".join(f"word{i}" for i in range(500)) + " dog")  # still answers


def test_a_damaged_index_is_made_anew_by_a_rebuild_and_never_fails_indexing(library, tmp_path, caplog):
    from fakes.library import fake_settings
    from vidagent.memory.library_search import refresh_search_index

    settings = fake_settings(tmp_path / "home", library=library[0])
    settings.search_index_path.parent.mkdir(parents=True, exist_ok=True)
    settings.search_index_path.write_bytes(b"not a database" * 100)
    assert refresh_search_index(settings) is None  # logged, not raised: the memories are as they were
    assert "search index was not brought up to date" in caplog.text
    SearchIndex.remove(settings.search_index_path)
    assert not settings.search_index_path.exists()


def test_filters_past_the_exact_limit_and_past_sqlites_variable_limit(tmp_path, monkeypatch):
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((600, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with SearchIndex(tmp_path / "search.sqlite") as index:
        for video in range(6):
            lines = [SearchLine("segment", float(i), float(i + 1), f"line {video} {i}") for i in range(100)]
            index.add_lines(f"{video:016x}", f"/v{video}.mp4", "2026-01-01", 100.0, "sig", lines,
                            vectors[video * 100:(video + 1) * 100])
        monkeypatch.setattr("vidagent.memory.search_index.EXACT_LIMIT", 50)
        wanted = (f"{2:016x}", f"{4:016x}", *(f"missing{i}" for i in range(40_000)))  # more ids than SQLite's variables
        hits = index.search("", vectors[250], SearchFilters(videos=wanted), limit=3)
        assert hits[0].video_id == f"{2:016x}" and hits[0].start_s == 50.0
        assert {hit.video_id for hit in index.search("", vectors[10], SearchFilters(videos=wanted), limit=20)} <= set(wanted)


def test_a_moments_lines_found_by_words_or_category_come_before_those_found_by_meaning_alone():
    def hit(kind: str, text: str, score: float, matched_by: tuple[str, ...]) -> SearchHit:
        return SearchHit("v", "boats.mp4", kind, 1.0, 11.0, text, "person" if kind == "object" else None,
                         ((1.0, 11.0),), score, 0.8, matched_by)

    people = [hit("object", f"person {i}", 0.013 - i / 1000, ("meaning",)) for i in range(3)]
    sail = hit("text", "108", 0.024, ("meaning", "words"))
    boats = hit("segment", "2 boats", 0.016, ("meaning",))
    (moment,) = moments([*people, boats, sail], limit=5)
    assert [line.text for line in moment.lines] == ["108", "person 0", "person 1", "person 2", "2 boats"]
    assert moment.strong and moment.score == sail.score
    (by_kind,) = moments([*people, boats], limit=5)  # none found by words: what says most first
    assert [line.kind for line in by_kind.lines] == ["object", "object", "object", "segment"]
    (twice,) = moments([*people, sail, replace(sail, start_s=7.0, spans=((7.0, 11.0),), score=0.0243)], limit=5)
    assert [line.text for line in twice.lines[:2]] == ["108", "108"]  # the number read at 1 s and at 7-11 s
    assert [line.text for line in twice.distinct_lines(2)] == ["108", "person 0"]  # listed once where lines are few
