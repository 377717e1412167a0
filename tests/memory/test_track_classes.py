"""One thing, two classes (memory/same_box_classes.py): a crouching person the detector also called a dog, a ball
it also called a frisbee, take the truer class, and their tracks join the truer box's track."""

from __future__ import annotations

import numpy as np

from vidagent.memory.same_box_classes import box_iou, corrected, same_box_classes

MAN, BESIDE = [335, 147, 431, 297], [170, 233, 352, 308]


def test_a_dog_track_sharing_a_box_with_a_person_is_that_person_and_joins_the_persons_track():
    boxes = np.array([[320, 143, 433, 295], MAN, [330, 150, 430, 296],  # track 1, "dog": the crouching man
                      BESIDE, [176, 223, 337, 305],  # track 2: the real dog, beside him
                      MAN, [330, 100, 430, 290]], float)  # track 3: "person", on his box at 2 s, and at 4 s
    times = [1.0, 2.0, 3.0, 1.0, 2.0, 2.0, 4.0]
    categories = ["dog", "dog", "dog", "dog", "dog", "person", "person"]
    tracks = np.array([1, 1, 1, 2, 2, 3, 3])
    partners = same_box_classes(boxes, times, categories)
    assert partners == {1: 5}
    scores = [0.6, 0.4, 0.6, 0.7, 0.7, 0.43, 0.7]  # at 2 s the detector was surer of "person" (0.43 against 0.40)
    names, ids = corrected(categories, scores, tracks, times, partners)
    assert names == ["person", "person", "person", "dog", "dog", "person", "person"]
    assert ids.tolist() == [3, -1, 3, 2, 2, 3, 3]  # one man, one track; the duplicate box at 2 s leaves it
    assert tracks.tolist() == [1, 1, 1, 2, 2, 3, 3]  # the caller's ids are not changed
    # a long track covered once by a less sure box keeps its class (the skateboarding dog)
    names, ids = corrected(categories, [0.6, 0.4, 0.6, 0.7, 0.7, 0.3, 0.7], tracks, times, partners)
    assert names == categories and ids.tolist() == tracks.tolist()
    # the same boxes at different times are not the same thing
    assert same_box_classes(boxes, [1.0, 2.0, 3.0, 1.0, 2.0, 9.0, 4.0], categories) == {}


def test_a_frisbee_on_the_box_of_a_ball_is_the_ball_and_an_untracked_one_is_relabelled_alone():
    ball = [611, 284, 688, 364]
    boxes = np.array([ball, ball, [647, 301, 729, 392], [900, 100, 980, 180]], float)
    categories = ["sports ball", "frisbee", "frisbee", "frisbee"]
    partners = same_box_classes(boxes, [0.0, 0.0, 0.5, 0.5], categories)
    assert partners == {1: 0}
    names, ids = corrected(categories, [0.45, 0.4, 0.5, 0.5], np.array([1, -1, 2, 4]), [0.0, 0.0, 0.5, 0.5], partners)
    assert names == ["sports ball", "sports ball", "frisbee", "frisbee"] and ids.tolist() == [1, -1, 2, 4]


def test_box_iou():
    assert box_iou((0, 0, 10, 10), (0, 0, 10, 10)) == 1.0
    assert box_iou((0, 0, 10, 10), (10, 10, 20, 20)) == 0.0
    assert abs(box_iou((0, 0, 10, 10), (5, 0, 15, 10)) - 1 / 3) < 1e-9
