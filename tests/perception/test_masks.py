"""Mask coding: run-length text (what detections.mask holds), COCO RLE objects, PNG, boxes as masks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vidagent.perception.masks import (box_mask, decode_mask, encode_mask, mask_box, mask_from_json, mask_iou,
                                       mask_json, mask_to_png, png_to_mask)
from vidagent.video.track import decode_mask_or_none as track_decode_mask


def disc(width: int, height: int, cx: float, cy: float, r: float) -> np.ndarray:
    ys, xs = np.mgrid[0:height, 0:width]
    return (xs - cx) ** 2 + (ys - cy) ** 2 <= r * r


def test_round_trip_of_shapes_empty_and_full() -> None:
    rng = np.random.default_rng(0)
    for mask in (disc(64, 48, 20, 30, 9), np.zeros((5, 7), bool), np.ones((5, 7), bool),
                 rng.random((33, 17)) > 0.5):
        height, width = mask.shape
        text = encode_mask(mask)
        assert isinstance(text, str) and text.isascii()
        assert np.array_equal(decode_mask(text, width, height), mask)
        assert np.array_equal(decode_mask(text.encode(), width, height), mask)
        assert np.array_equal(mask_from_json(json.loads(json.dumps(mask_json(mask)))), mask)


def test_the_known_coco_example_in_every_form() -> None:
    mask = np.zeros((4, 4), bool)
    mask[1:3, 1:3] = True
    assert encode_mask(mask) == "52203"  # pycocotools' string for this mask (column-major runs 5,2,2,2,5)
    for form in ("52203", [5, 2, 2, 2, 5], "[5, 2, 2, 2, 5]", np.array([5, 2, 2, 2, 5])):
        assert np.array_equal(decode_mask(form, 4, 4), mask)
    assert mask_json(mask) == {"size": [4, 4], "counts": "52203"}


def test_the_video_layer_reads_what_is_stored() -> None:
    mask = disc(40, 30, 12, 10, 6)
    assert np.array_equal(track_decode_mask(encode_mask(mask), 40, 30), mask)


def test_a_column_major_run_order() -> None:
    mask = np.zeros((3, 2), bool)
    mask[0, 1] = True  # the first pixel of the second column: after 3 + 0 background pixels
    assert decode_mask([3, 1, 2], 2, 3).tolist() == mask.tolist()


@pytest.mark.parametrize("bad", ["52203", "[1, 2]", "[not json", "[\"a\"]"])
def test_a_mask_of_another_size_or_no_mask_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        decode_mask(bad, 5, 5)


def test_refusals_of_shapes_and_objects() -> None:
    with pytest.raises(ValueError):
        encode_mask(np.zeros((2, 2, 2), bool))
    with pytest.raises(ValueError):
        encode_mask(np.zeros((0, 3), bool))
    with pytest.raises(ValueError):
        mask_from_json({"counts": "52203"})
    with pytest.raises(ValueError):
        mask_iou(np.zeros((2, 2)), np.zeros((3, 2)))


def test_png_round_trip() -> None:
    mask = disc(50, 20, 25, 10, 7)
    data = mask_to_png(mask)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert np.array_equal(png_to_mask(data), mask)
    with pytest.raises(ValueError):
        png_to_mask(b"not an image")


def test_box_mask_rounds_outwards_and_clips() -> None:
    mask = box_mask((1.5, 0.2, 3.1, 2.0), 6, 4)
    assert mask.shape == (4, 6)
    assert mask_box(mask) == (1.0, 0.0, 4.0, 2.0)
    assert int(mask.sum()) == 3 * 2
    assert box_mask((-5, -5, 100, 100), 6, 4).all()
    assert not box_mask((10, 10, 20, 20), 6, 4).any()
    assert mask_box(np.zeros((3, 3), bool)) is None


def test_iou() -> None:
    a = box_mask((0, 0, 4, 4), 8, 8)
    b = box_mask((2, 0, 6, 4), 8, 8)
    assert mask_iou(a, b) == pytest.approx(8 / 24)
    assert mask_iou(a, a) == 1.0
    assert mask_iou(np.zeros((2, 2)), np.zeros((2, 2))) == 1.0
