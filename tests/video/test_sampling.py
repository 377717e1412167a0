"""The even-spacing and frame-geometry helpers every layer shares (pure; no video is opened)."""

import numpy as np

from vidagent.video.pixels import crop_box, fit_side
from vidagent.video.sampling import midpoints, spread_evenly, spread_indices, stepped_indices, take_every


def test_spread_keeps_the_ends_and_everything_that_fits():
    assert spread_indices(3, 5) == [0, 1, 2]
    assert spread_indices(10, 4) == [0, 3, 6, 9]
    assert spread_evenly(list("abcdefghij"), 4) == ["a", "d", "g", "j"]


def test_stepped_indices_are_numpys_linspace_and_differ_from_the_exact_fraction_only_half_way():
    for count in range(3, 120):
        for limit in range(2, count):
            expected = np.unique(np.round(np.linspace(0, count - 1, limit)).astype(np.int64)).tolist()
            assert stepped_indices(count, limit) == expected
    assert stepped_indices(26, 23) != spread_indices(26, 23)  # the smallest case where they part


def test_take_every_starts_at_the_first_and_rounds_down():
    assert take_every(list(range(8)), 4) == [0, 2, 4, 6]
    assert take_every([1, 2], 4) == [1, 2]


def test_midpoints_are_the_centres_of_equal_parts():
    assert midpoints(0.0, 4.0, 2) == [1.0, 3.0]


def test_fit_side_scales_the_longer_side_and_keeps_a_minimum():
    assert fit_side(1920, 1080, 768) == (768, 432)
    assert fit_side(1000, 10, 100, minimum=8) == (100, 8)


def test_crop_box_widens_to_whole_pixels_and_stays_inside():
    image = np.arange(100).reshape(10, 10)
    assert crop_box(image, (1.5, 2.2, 3.1, 4.0)).shape == (2, 3)
    assert crop_box(image, (-5, -5, 0.2, 0.2)).shape == (1, 1)
    assert crop_box(image, (12, 12, 20, 20)).shape == (1, 1)
