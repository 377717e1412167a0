"""Track classes re-checked in the objects stage: a crouching person the detector called a dog (memory/mistaken_people.py)
and a ball it called a frisbee (memory/ball_tracks.py) are what the detector also said they were."""

from __future__ import annotations

import numpy as np

from vidagent.memory.mistaken_people import box_iou, tracks_of_people


def test_a_dog_track_sharing_a_box_with_a_person_is_the_person_and_a_dog_beside_one_is_not():
    boxes = np.array([
        [320, 143, 433, 295], [335, 147, 431, 297], [335, 147, 431, 297],  # track 1: "dog"; at 2 s also "person"
        [170, 233, 352, 308], [176, 223, 337, 305],  # track 2: the real dog, beside him
        [335, 147, 431, 297],  # the person box at 2 s (track 3)
    ], float)
    times = [1.0, 2.0, 3.0, 1.0, 2.0, 2.0]
    categories = ["dog", "dog", "dog", "dog", "dog", "person"]
    tracks = {1: [0, 1, 2], 2: [3, 4], 3: [5]}
    found = tracks_of_people(boxes, times, categories, tracks, {1: "dog", 2: "dog", 3: "person"})
    assert found == {1}
    # the same boxes at different times are not the same thing
    assert tracks_of_people(boxes, [1.0, 2.0, 3.0, 1.0, 2.0, 9.0], categories, tracks,
                            {1: "dog", 2: "dog", 3: "person"}) == set()


def test_box_iou():
    assert box_iou((0, 0, 10, 10), (0, 0, 10, 10)) == 1.0
    assert box_iou((0, 0, 10, 10), (10, 10, 20, 20)) == 0.0
    assert abs(box_iou((0, 0, 10, 10), (5, 0, 15, 10)) - 1 / 3) < 1e-9


def test_a_frisbee_track_the_detector_also_calls_a_ball_is_a_ball():
    from vidagent.memory.ball_tracks import frisbee_tracks_that_are_balls

    categories = ["frisbee", "sports ball", "frisbee", "frisbee", "frisbee", "frisbee", "frisbee", "sports ball"]
    tracks = {1: np.array([0, 1, 2, 3]), 2: np.array([4, 5, 6]), 3: np.array([7])}  # as the stage holds them
    found = frisbee_tracks_that_are_balls(categories, tracks, {1: "frisbee", 2: "frisbee", 3: "sports ball"})
    assert found == {1}  # 1 of 4 called a ball; track 2 never was, track 3 already is one
