"""Re-ID by grouping (VideoAgent Algorithm 3): rules on hand-made tracks, results on real clips.

Real-clip expectations (counts of objects after re-ID) were checked by eye on contact sheets of
the tracked frames; see ``object_clips.py`` for what each clip shows.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from object_clips import BASEBALL, BOATS, CLIPS, DOG01, SKATE, SNOW, clip, close_detector, tracks
from vidagent.memory.reid import (ALL_MEMBERS_THRESHOLD, ANY_MEMBER_THRESHOLD, MAX_CROPS,
                                  TrackSummary, evenly_spaced, group_tracks, track_crops, track_similarity)
from vidagent.perception.appearance import ColourAppearance
from vidagent.perception.similarity import sigmoid_ensemble_similarity  # below memory: HF backends use it too


@pytest.fixture(scope="module", autouse=True)
def _stop_detector():
    yield
    close_detector()


# ----------------------------------------------------------------------------- paper's formula


def unit_pair(cos: float) -> tuple[np.ndarray, np.ndarray]:
    return np.array([[1.0, 0.0]]), np.array([[cos, np.sqrt(1 - cos ** 2)]])


@pytest.mark.parametrize("cos_clip, cos_dino, expected", [
    # CLIP = 1/(1+e^0) = 0.5 and DINOv2 = 0.5 at the curves' centres: 0.15*0.5 + 0.85*0.5.
    (0.925, 0.5, 0.5),
    # Identical crops: CLIP = 1/(1+e^-1.5) = 0.817574, DINOv2 = 1/(1+e^-2.05) = 0.885948;
    # 0.15*0.817574 + 0.85*0.885948 = 0.122636 + 0.753056 = 0.875692.
    (1.0, 1.0, 0.87569),
    # Orthogonal: CLIP = 1/(1+e^18.5) ~ 9e-9, DINOv2 = 1/(1+e^2.05) = 0.114052; 0.85*0.114052.
    (0.0, 0.0, 0.09694),
    # CLIP = 1/(1+e^2.5) = 0.075858, DINOv2 = 1/(1+e^-1.23) = 0.773819; 0.011379 + 0.657746.
    (0.8, 0.8, 0.66913),
])
def test_sigmoid_ensemble_matches_hand_computed_values(cos_clip, cos_dino, expected):
    clip_a, clip_b = unit_pair(cos_clip)
    dino_a, dino_b = unit_pair(cos_dino)
    sim = sigmoid_ensemble_similarity(clip_a, clip_b, dino_a, dino_b)
    assert sim.shape == (1, 1)
    assert sim[0, 0] == pytest.approx(expected, abs=1e-5)


def test_sigmoid_ensemble_normalises_and_returns_a_matrix():
    rng = np.random.default_rng(0)
    clip_a, clip_b, dino_a, dino_b = (rng.normal(size=(n, 8)) for n in (3, 2, 3, 2))
    sim = sigmoid_ensemble_similarity(clip_a, clip_b, dino_a, dino_b)
    scaled = sigmoid_ensemble_similarity(5 * clip_a, clip_b, dino_a, 0.1 * dino_b)
    assert sim.shape == (3, 2) and np.all((sim > 0) & (sim < 1))
    np.testing.assert_allclose(sim, scaled)
    with pytest.raises(ValueError):
        sigmoid_ensemble_similarity(clip_a, clip_b, dino_a[:2], dino_b)


# ----------------------------------------------------------------------------- Algorithm 3


def table_similarity(table: dict[tuple[int, int], float]):
    """A similarity over one-row 'features' holding the track id, read from a symmetric table."""
    def similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.array([[table.get((int(x[0]), int(y[0])), table.get((int(y[0]), int(x[0])), 0.0))
                          for y in b] for x in a])
    return similarity


def track(track_id: int, times, category: str = "dog") -> TrackSummary:
    return TrackSummary(track_id, category, tuple(float(t) for t in times), np.array([[track_id]], float))


def test_paper_thresholds():
    assert (ALL_MEMBERS_THRESHOLD, ANY_MEMBER_THRESHOLD, MAX_CROPS) == (0.5, 0.62, 10)


def test_disjoint_similar_tracks_merge():
    groups = group_tracks([track(1, [0, 0.5]), track(2, [2, 2.5])], table_similarity({(1, 2): 0.9}))
    assert groups == [[1, 2]]


def test_tracks_sharing_a_frame_never_merge():
    groups = group_tracks([track(1, [0, 0.5, 1]), track(2, [1, 1.5])], table_similarity({(1, 2): 1.0}))
    assert groups == [[1], [2]]


def test_must_exceed_half_to_every_member():
    sims = {(1, 2): 0.9, (3, 1): 0.95, (3, 2): 0.45}
    tracks_ = [track(1, [0]), track(2, [1]), track(3, [2])]
    assert group_tracks(tracks_, table_similarity(sims)) == [[1, 2], [3]]
    sims[(3, 2)] = 0.55
    assert group_tracks(tracks_, table_similarity(sims)) == [[1, 2, 3]]


def test_must_exceed_062_to_one_member_strictly():
    tracks_ = [track(1, [0]), track(2, [1]), track(3, [2])]
    sims = {(1, 2): 0.9, (3, 1): 0.6, (3, 2): 0.62}
    assert group_tracks(tracks_, table_similarity(sims)) == [[1, 2], [3]]
    sims[(3, 2)] = 0.63
    assert group_tracks(tracks_, table_similarity(sims)) == [[1, 2, 3]]


def test_joins_the_first_qualifying_group_in_creation_order():
    # 2 and 5 share frame 0 (two groups, 2 examined first by id); 3 fits both and joins 2's.
    tracks_ = [track(5, [0, 1]), track(2, [0, 1]), track(3, [4])]
    sims = {(2, 5): 0.9, (3, 2): 0.7, (3, 5): 0.95}
    assert group_tracks(tracks_, table_similarity(sims)) == [[2, 3], [5]]


def test_frames_are_walked_in_time_order_whatever_the_input_order():
    tracks_ = [track(7, [3]), track(1, [5]), track(4, [0]), track(9, [0])]
    sims = {(7, 4): 0.9, (1, 9): 0.9}  # 4 and 9 share frame 0
    expected = [[4, 7], [9, 1]]
    assert group_tracks(tracks_, table_similarity(sims)) == expected
    assert group_tracks(tracks_[::-1], table_similarity(sims)) == expected


def test_only_tracks_of_one_category_merge():
    tracks_ = [track(1, [0], "person"), track(2, [1], "dog"), track(3, [2], "person")]
    sims = {(1, 2): 1.0, (2, 3): 1.0, (1, 3): 0.9}
    assert group_tracks(tracks_, table_similarity(sims)) == [[1, 3], [2]]


def test_duplicate_track_ids_are_refused():
    with pytest.raises(ValueError):
        group_tracks([track(1, [0]), track(1, [1])], table_similarity({}))
    with pytest.raises(ValueError):
        TrackSummary(1, "dog", (), np.ones((1, 2)))


def test_crops_are_sampled_evenly_and_zero_rows_skipped():
    assert evenly_spaced(5).tolist() == [0, 1, 2, 3, 4]
    picked = evenly_spaced(25)
    assert len(picked) == 10 and picked[0] == 0 and picked[-1] == 24
    assert np.all(np.diff(picked) >= 2)
    rows = np.arange(30, dtype=float).reshape(15, 2)
    rows[[0, 3, 4]] = 0.0
    kept = track_crops(rows, max_crops=20)
    assert len(kept) == 12 and np.all(kept.any(axis=1))
    assert len(track_crops(np.zeros((4, 3)))) == 4  # nothing else to go on: keep them

    seen: list[tuple[int, int]] = []

    def counting(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        seen.append((len(a), len(b)))
        return np.ones((len(a), len(b)))

    long_track = TrackSummary(1, "dog", tuple(range(25)), np.ones((25, 3)))
    group_tracks([long_track, TrackSummary(2, "dog", (30.0,), np.ones((1, 3)))], counting)
    assert seen == [(10, 1)]


def test_track_similarity_reductions():
    matrix = np.array([[0.9, 0.1], [0.2, 0.3]])
    sim = lambda a, b: matrix  # noqa: E731
    a, b = np.zeros((2, 1)), np.zeros((2, 1))
    assert track_similarity(a, b, sim) == pytest.approx(0.6)  # best: ((0.9+0.3)/2 + (0.9+0.3)/2)/2
    assert track_similarity(a, b, sim, "mean") == pytest.approx(0.375)
    assert track_similarity(a, b, sim, "max") == pytest.approx(0.9)
    with pytest.raises(ValueError):
        track_similarity(a, np.zeros((3, 1)), sim)


# ----------------------------------------------------------------------------- real clips


def summaries(relative: str) -> list[TrackSummary]:
    """Track summaries as the objects stage builds them: a feature row per detection's crop."""
    c, model = clip(relative), ColourAppearance()
    return [TrackSummary(tid, t[0].label, tuple(d.time_s for d in t),
                         model.features([c.crop(d.frame, d.box) for d in t]))
            for tid, t in sorted(tracks(relative).items())]


def groups_by_category(relative: str) -> dict[str, list[list[int]]]:
    tracks_ = summaries(relative)
    category = {t.track_id: t.category for t in tracks_}
    out: dict[str, list[list[int]]] = {}
    for group in group_tracks(tracks_, ColourAppearance().similarity):
        out.setdefault(category[group[0]], []).append(group)
    return out


@pytest.mark.models
def test_one_woman_and_one_dog_from_three_dog_tracks():
    groups = groups_by_category(DOG01)
    assert len(groups["person"]) == 1
    assert len(groups["dog"]) == 1 and len(groups["dog"][0]) == 3


@pytest.mark.models
def test_snow_clip_man_merges_and_yellow_dog_stays_apart_from_him():
    groups = groups_by_category(SNOW)
    # The man's two person tracks (0.25-2.25 s, 3.75-4.75 s) are one person.
    person_tracks = tracks(SNOW, "person")
    assert len(person_tracks) == 2 and len(groups["person"]) == 1
    # The yellow dog and the man called "dog" are seen together: two dog objects, never merged.
    assert len(groups["dog"]) == 2


@pytest.mark.models
@pytest.mark.parametrize("relative, category, count", [
    (SKATE, "dog", 1), (BASEBALL, "person", 2), (BOATS, "boat", 2)])
def test_object_counts_after_reid(relative, category, count):
    long_groups = [g for g in groups_by_category(relative)[category]
                   if sum(len(tracks(relative)[t]) for t in g) >= 10]
    assert len(long_groups) == count


@pytest.mark.models
@pytest.mark.parametrize("relative", CLIPS)
def test_groups_never_hold_tracks_that_share_a_frame(relative):
    tracks_ = {t.track_id: t for t in summaries(relative)}
    groups = group_tracks(list(tracks_.values()), ColourAppearance().similarity)
    assert sorted(t for g in groups for t in g) == sorted(tracks_)  # a partition
    for group in groups:
        assert len({tracks_[t].category for t in group}) == 1
        frames = [f for t in group for f in tracks_[t].times]
        assert len(frames) == len(set(frames))


@pytest.mark.models
def test_reid_speed_and_counts():
    model = ColourAppearance()
    for relative in CLIPS:
        tracks_ = summaries(relative)
        start = time.perf_counter()
        groups = group_tracks(tracks_, model.similarity)
        elapsed_ms = 1000 * (time.perf_counter() - start)
        print(f"{relative}: {len(tracks_)} tracks -> {len(groups)} groups in {elapsed_ms:.1f} ms")
        assert elapsed_ms < 1000
