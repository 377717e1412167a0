"""J&F on hand-made masks whose values are worked out by hand.

A filled k x k square away from the image's edges has 4k boundary pixels by the DAVIS rule (a pixel that
differs from its right, lower or lower-right neighbour): 2k - 1 of its own (right column, bottom row) and
2k + 1 outside it (the row above, from the column left of it, and the column left of it)."""

from __future__ import annotations

import numpy as np
import pytest

from vidagent.eval.jf import (SequenceScore, boundary, contour_accuracy, mean_scores, region_similarity,
                              score_sequence, tolerance_pixels)


def square(top: int, left: int, k: int, size: tuple[int, int] = (40, 40)) -> np.ndarray:
    mask = np.zeros(size, bool)
    mask[top:top + k, left:left + k] = True
    return mask


def test_a_square_has_4k_boundary_pixels_and_a_pixel_four() -> None:
    for k in (1, 2, 5, 9):
        assert int(boundary(square(10, 10, k)).sum()) == 4 * k
    edge = boundary(square(0, 0, 3, (5, 5)))  # at the corner: only its own right column and bottom row
    assert int(edge.sum()) == 5


def test_identical_masks_score_one_and_empty_ones_agree() -> None:
    mask = square(5, 5, 8)
    assert region_similarity(mask, mask) == 1.0 and contour_accuracy(mask, mask) == 1.0
    empty = np.zeros((40, 40), bool)
    assert region_similarity(empty, empty) == 1.0 and contour_accuracy(empty, empty) == 1.0
    assert region_similarity(empty, mask) == 0.0 and contour_accuracy(empty, mask) == 0.0
    assert contour_accuracy(mask, empty) == 0.0


def test_a_one_pixel_shift_costs_j_but_not_f() -> None:
    truth, shifted = square(10, 10, 5), square(10, 11, 5)
    assert region_similarity(shifted, truth) == pytest.approx(20 / 30)
    assert tolerance_pixels(40, 40) == 1  # 0.008 x 56.6 px, rounded up
    assert contour_accuracy(shifted, truth) == 1.0  # every boundary pixel has one a pixel away


def test_a_missed_part_lowers_recall_only() -> None:
    truth = square(5, 5, 6) | square(30, 30, 2)  # an object in two parts, the second missed
    prediction = square(5, 5, 6)
    assert region_similarity(prediction, truth) == pytest.approx(36 / 40)
    recall = 24 / (24 + 8)  # boundary pixels: 4 x 6 found, 4 x 2 missed; precision 1
    assert contour_accuracy(prediction, truth) == pytest.approx(2 * recall / (1 + recall))


def test_far_apart_masks_score_zero_and_the_tolerance_scales_with_the_image() -> None:
    assert region_similarity(square(2, 2, 5), square(25, 25, 5)) == 0.0
    assert contour_accuracy(square(2, 2, 5), square(25, 25, 5)) == 0.0
    assert tolerance_pixels(480, 854) == 8  # DAVIS 480p: ceil(0.008 x 979.6)
    # 3 pixels apart: out of reach at 1 pixel of tolerance, within it at 3
    assert contour_accuracy(square(10, 13, 5), square(10, 10, 5), tolerance=1) < 0.7
    assert contour_accuracy(square(10, 13, 5), square(10, 10, 5), tolerance=3) == 1.0


def test_masks_of_different_sizes_are_refused() -> None:
    with pytest.raises(ValueError):
        region_similarity(np.zeros((3, 3)), np.zeros((3, 4)))
    with pytest.raises(ValueError):
        contour_accuracy(np.zeros((3, 3, 1)), np.zeros((3, 3, 1)))


def test_a_sequence_is_the_mean_of_its_frames_and_may_skip_its_ends() -> None:
    truth = [square(10, 10, 5)] * 4
    predictions = [square(10, 10, 5), None, square(10, 11, 5), square(30, 30, 5)]
    score = score_sequence(predictions, truth)
    assert score.frames == 4
    assert score.j == pytest.approx((1 + 0 + 20 / 30 + 0) / 4)
    assert score.f == pytest.approx((1 + 0 + 1 + 0) / 4)
    assert score.jf == pytest.approx((score.j + score.f) / 2)
    inner = score_sequence(predictions, truth, skip_ends=True)  # frames 2 and 3 only
    assert inner.frames == 2 and inner.j == pytest.approx(20 / 60) and inner.f == pytest.approx(0.5)
    assert score_sequence(predictions[:2], truth[:2], skip_ends=True).frames == 2  # too short to skip
    with pytest.raises(ValueError):
        score_sequence(predictions, truth[:3])
    with pytest.raises(ValueError):
        score_sequence([], [])


def test_a_benchmark_is_the_mean_of_its_sequences() -> None:
    scores = [SequenceScore(1.0, 0.5, 3), SequenceScore(0.5, 0.5, 7)]
    assert mean_scores(scores) == {"j": 0.75, "f": 0.5, "jf": 0.625, "sequences": 2}
    assert mean_scores([])["sequences"] == 0
    assert SequenceScore(0.5, 0.25, 2).to_dict() == {"j": 0.5, "f": 0.25, "jf": 0.375, "frames": 2}


def test_a_runs_segmentation_rows_are_averaged_over_expressions() -> None:
    from vidagent.eval.jf import segmentation_metrics

    rows = [{"jf": {"j": 1.0, "f": 0.5}}, {"jf": {"j": 0.5, "f": 0.5}}, {"jf": None, "correct": True}]
    assert segmentation_metrics(rows) == {"J": 0.75, "F": 0.5, "J&F": 0.625, "n": 2}
    assert segmentation_metrics([{"correct": True}]) is None
