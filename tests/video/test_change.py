"""Reuse by change: near-duplicates at any distance, and the sparse rate where a picture stays still."""

from __future__ import annotations

import numpy as np

from vidagent.video.change import ChangeLimits, SparseRate, reuses, thumbnail


def _picture(level: float, square_x: int | None = None) -> np.ndarray:
    """A flat picture at grey ``level`` with a soft gradient, and a black square at ``square_x``."""
    image = np.clip(level + np.linspace(-30, 30, 320)[None, :, None] + np.zeros((240, 320, 3)), 0, 255).astype(np.uint8)
    if square_x is not None:
        image[100:140, square_x:square_x + 40] = 0
    return image


def test_a_near_duplicate_is_reused_at_any_distance():
    key, same = thumbnail(_picture(120)), thumbnail(_picture(121))
    assert reuses(key, same, 30.0, ChangeLimits())
    assert reuses(key, same, 30.0, ChangeLimits(sparse=SparseRate()))


def test_a_still_picture_that_drifts_is_reused_only_soon_after():
    key, drifted = thumbnail(_picture(120)), thumbnail(_picture(124))  # a slow fade: 4 levels
    assert not reuses(key, drifted, 0.5, ChangeLimits())  # more than a near-duplicate
    sparse = ChangeLimits(sparse=SparseRate(max_gap_s=1.0))
    assert reuses(key, drifted, 0.5, sparse)
    assert not reuses(key, drifted, 1.0, sparse)  # the models run once a second at least


def test_something_that_moves_is_never_reused():
    key, moved = thumbnail(_picture(120, square_x=60)), thumbnail(_picture(120, square_x=90))
    assert not reuses(key, moved, 0.5, ChangeLimits(sparse=SparseRate()))
    assert not reuses(key, thumbnail(_picture(150)), 0.5, ChangeLimits(sparse=SparseRate()))  # a cut or a flash


def test_the_sparse_rate_enters_the_config_only_when_set():
    assert "sparse" not in ChangeLimits().config()  # stages built without it keep their config
    assert ChangeLimits(sparse=SparseRate()).config()["sparse"] == {"mean": 6.0, "cell": 18.0, "max_gap_s": 1.0}
