"""Body pose: MoveNet on real frames with CenterNet's person boxes, and pose_words on hand-made poses.

What the real-frame tests expect was checked by eye on the frames with the keypoints drawn on
them: in yoga.mp4 the woman lies in cobra at 4 s (legs along the mat, chest lifted), holds down
dog at 6 s and a side angle with her top arm straight up at 7 s and 8.5 s; the batter in
hitting_baseball.mp4 stands at the plate at 1 s; in dog_barking.mp4 the man stands in a doorway
reaching his arm out to the handle at 5 s; in example1.mp4 the man kneels in the snow, both arms
stretched towards the dog at 4.7 s; in LLaMA-Factory's 3.mp4 a toddler sits on the floor at 0.5 s;
playing_guitar.mp4 at 3 s is a close-up of a hand on a fretboard, no body to see.
"""

from __future__ import annotations


import numpy as np
import pytest

from conftest import video_path
from vidagent.config import Settings
from vidagent.errors import ModelUnavailableError
from vidagent.perception import pose_words as pw
from vidagent.perception.base import Pose
from vidagent.perception.detections import class_names
from vidagent.perception.detections import class_names
from vidagent.perception.detector import CenterNetDetector
from vidagent.perception.node_assets import detector_assets_installed, pose_assets_installed
from vidagent.perception.pose import MoveNetPose, SquareCrop, cut_square, keypoints_to_image, square_around
from vidagent.perception.pose_words import describe_pose, pose_facts
from vidagent.video.video import Video

MODELS_DIR = Settings.from_env().models_dir
needs_models = pytest.mark.skipif(
    not (pose_assets_installed(MODELS_DIR) and detector_assets_installed(MODELS_DIR)),
    reason=f"MoveNet/CenterNet assets not installed in {MODELS_DIR} (run `vidagent models install centernet`)")

NAMES = ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder", "right_shoulder",
         "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip", "right_hip", "left_knee",
         "right_knee", "left_ankle", "right_ankle")


# ----------------------------------------------------------------------------- hand-made poses


def make_pose(points: dict[str, tuple[float, float]], score: float = 0.9) -> Pose:
    """A pose with the named keypoints at ``points`` (pixels) and every other one unseen (score 0)."""
    kp = np.zeros((17, 3), np.float32)
    for name, (x, y) in points.items():
        kp[NAMES.index(name)] = (x, y, score)
    xs, ys = kp[kp[:, 2] > 0, 0], kp[kp[:, 2] > 0, 1]
    return Pose(kp, (float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max())))


HEAD = {"nose": (100, 40), "left_eye": (105, 35), "right_eye": (95, 35), "left_ear": (112, 38),
        "right_ear": (88, 38)}
HANGING_ARMS = {"left_shoulder": (120, 70), "right_shoulder": (80, 70), "left_elbow": (124, 110),
                "right_elbow": (76, 110), "left_wrist": (126, 145), "right_wrist": (74, 145)}
STANDING = {**HEAD, **HANGING_ARMS, "left_hip": (112, 170), "right_hip": (88, 170), "left_knee": (113, 230),
            "right_knee": (87, 230), "left_ankle": (114, 290), "right_ankle": (86, 290)}


def test_standing_with_arms_down():
    assert describe_pose(make_pose(STANDING)) == "standing"


def test_arms_raised_above_the_head():
    both = {**STANDING, "left_elbow": (125, 30), "right_elbow": (75, 30), "left_wrist": (128, -5),
            "right_wrist": (72, -5)}
    assert describe_pose(make_pose(both)) == "standing, arms raised"
    one = {**STANDING, "left_elbow": (125, 30), "left_wrist": (128, -5)}
    assert describe_pose(make_pose(one)) == "standing, one arm raised"


def test_arm_stretched_out_at_shoulder_height():
    out = {**STANDING, "left_elbow": (165, 72), "left_wrist": (205, 75)}
    assert describe_pose(make_pose(out)) == "standing, arm stretched out"
    both = {**out, "right_elbow": (35, 72), "right_wrist": (-5, 75)}
    assert describe_pose(make_pose(both)) == "standing, arms stretched out"
    bent = {**STANDING, "left_elbow": (165, 72), "left_wrist": (150, 62)}  # elbow bent back in
    assert describe_pose(make_pose(bent)) == "standing"


def test_hand_at_face():
    hand = {**STANDING, "right_elbow": (70, 95), "right_wrist": (96, 45)}
    assert describe_pose(make_pose(hand)) == "standing, hand at face"


def test_sitting_on_a_chair():
    sitting = {**HEAD, **HANGING_ARMS, "left_hip": (112, 170), "right_hip": (88, 170), "left_knee": (160, 175),
               "right_knee": (140, 175), "left_ankle": (162, 235), "right_ankle": (142, 235)}
    assert pose_facts(make_pose(sitting)).posture == "sitting"  # shins hang: thighs decide
    legs_out = {**sitting, "left_ankle": (220, 178), "right_ankle": (200, 178)}
    assert describe_pose(make_pose(legs_out)) == "sitting"


def test_kneeling():
    kneeling = {**STANDING, "left_knee": (113, 230), "right_knee": (87, 230), "left_ankle": (60, 235),
                "right_ankle": (40, 235)}
    assert describe_pose(make_pose(kneeling)) == "kneeling"


def test_lying_flat_and_lying_with_the_chest_lifted():
    flat = {"nose": (20, 200), "left_eye": (18, 195), "left_ear": (25, 195), "left_shoulder": (50, 200),
            "left_elbow": (60, 230), "left_wrist": (90, 235), "left_hip": (150, 205), "left_knee": (210, 207),
            "left_ankle": (270, 210)}
    assert describe_pose(make_pose(flat)) == "lying down"
    cobra = {**flat, "nose": (70, 110), "left_eye": (68, 105), "left_ear": (75, 105), "left_shoulder": (90, 150),
             "left_elbow": (95, 180), "left_wrist": (100, 205)}
    assert pose_facts(make_pose(cobra)).posture == "lying"


def test_bending_over():
    bent = {**STANDING, "left_shoulder": (40, 180), "right_shoulder": (40, 170), "nose": (20, 200),
            "left_eye": (18, 196), "right_eye": (18, 192), "left_ear": (25, 190), "right_ear": (25, 190),
            "left_elbow": (40, 230), "right_elbow": (40, 225), "left_wrist": (40, 280), "right_wrist": (40, 275)}
    assert describe_pose(make_pose(bent)).startswith("bending over")


def test_too_few_confident_keypoints_say_nothing():
    assert describe_pose(make_pose(STANDING, score=0.2)) == ""
    five = {name: STANDING[name] for name in ("nose", "left_shoulder", "right_shoulder", "left_hip", "right_hip")}
    assert describe_pose(make_pose(five)) == ""
    no_shoulders = {k: v for k, v in STANDING.items() if "shoulder" not in k}
    assert describe_pose(make_pose(no_shoulders)) == ""


def test_unsure_joints_do_not_count():
    pose = make_pose(STANDING)
    kp = pose.keypoints.copy()
    kp[NAMES.index("left_wrist")] = (128, -5, pw.MIN_SCORE - 0.05)  # a raised wrist the model doubts
    assert describe_pose(Pose(kp, pose.box)) == "standing"


def test_no_knees_no_posture():
    upper = {k: v for k, v in STANDING.items() if "knee" not in k and "ankle" not in k}
    assert describe_pose(make_pose(upper)) == ""


def test_at_most_four_phrases_all_from_the_word_file():
    words = pw.phrases()
    keys = {"standing", "sitting", "kneeling", "lying", "bending", "arm_raised", "arms_raised", "hand_at_face",
            "arm_out", "arms_out"}
    assert keys == set(words)
    busy = {**STANDING, "left_elbow": (125, 30), "left_wrist": (128, -5), "right_elbow": (35, 72),
            "right_wrist": (-5, 75)}
    text = describe_pose(make_pose(busy))
    assert text == "standing, one arm raised, arm stretched out"
    assert len(text.split(", ")) <= 4


# ----------------------------------------------------------------------------- crop geometry


def test_square_around_a_box_keeps_its_centre_and_longer_side():
    sq = square_around((10, 20, 50, 120), margin=0.25)
    assert sq.side == pytest.approx(125.0)
    assert (sq.x0 + sq.side / 2, sq.y0 + sq.side / 2) == pytest.approx((30.0, 70.0))


def test_cut_square_pads_outside_the_image_black_and_maps_back():
    image = np.full((100, 200, 3), 200, np.uint8)
    image[40:60, 90:110] = (255, 0, 0)
    sq = SquareCrop(-50.0, -50.0, 200.0)  # half of it lies above and left of the image
    crop = cut_square(image, sq, 100)
    assert crop.shape == (100, 100, 3)
    assert crop[:20, :20].max() == 0 and crop[80:, 80:].max() == 0  # above and below the image
    assert crop[27:35, 80:].min() == 200
    red = np.argwhere((crop[:, :, 0] > 200) & (crop[:, :, 1] < 60))
    cy, cx = red.mean(axis=0)
    rows = np.array([[cy / 100, cx / 100, 1.0]] * 17, np.float32)  # y, x, score as MoveNet gives them
    x, y, _ = keypoints_to_image(rows, sq)[0]
    assert (x, y) == pytest.approx((100.0, 50.0), abs=2.5)


# ----------------------------------------------------------------------------- the real models


def test_missing_model_names_the_install_command(tmp_path):
    with pytest.raises(ModelUnavailableError, match="vidagent models install centernet"):
        MoveNetPose(tmp_path)
    assert not pose_assets_installed(tmp_path)


def frame(relative: str, t: float) -> np.ndarray:
    (sampled,) = Video(video_path(relative)).frames_at([t])
    return sampled.image


@pytest.fixture(scope="module")
def models():
    with CenterNetDetector(MODELS_DIR) as detector, MoveNetPose(MODELS_DIR) as pose:
        yield detector, pose


def person_words(models, relative: str, t: float) -> list[tuple[tuple[float, ...], str, Pose]]:
    """(box, words, pose) of each person CenterNet finds, largest box first."""
    detector, estimator = models
    image = frame(relative, t)
    (found,) = detector.detect([image])
    boxes = sorted((tuple(map(float, b)) for b, label in zip(found.xyxy, class_names(found)) if label == "person"),
                   key=lambda b: -(b[2] - b[0]) * (b[3] - b[1]))
    poses = estimator.estimate(image, boxes)
    assert [p.box for p in poses] == boxes
    return [(box, describe_pose(p), p) for box, p in zip(boxes, poses)]


@pytest.mark.models
@needs_models
@pytest.mark.parametrize(("relative", "t", "expected"), [
    ("github_Ask-Anything/yoga.mp4", 4.0, "lying down"),
    ("github_Ask-Anything/yoga.mp4", 6.0, "bending over"),
    ("github_Ask-Anything/yoga.mp4", 7.0, "one arm raised"),
    ("github_Ask-Anything/yoga.mp4", 8.5, "one arm raised"),
    ("github_Video-LLaMA/dog_barking.mp4", 5.0, "standing, arm stretched out"),
    ("github_InternVideo/example1.mp4", 4.7, "kneeling, arms stretched out"),
    ("github_LLaMA-Factory/3.mp4", 0.5, "sitting"),
])
def test_words_for_the_one_person_in_view(models, relative, t, expected):
    ((box, words, _),) = person_words(models, relative, t)
    assert words == expected


@pytest.mark.models
@needs_models
def test_batter_stands_and_the_cut_off_onlooker_gets_no_words(models):
    people = person_words(models, "github_Ask-Anything/hitting_baseball.mp4", 1.0)
    assert len(people) == 2
    batter = [p for p in people if p[0][0] > 50]  # the onlooker is cut by the left edge
    onlooker = [p for p in people if p[0][0] <= 50]
    assert batter[0][1] == "standing" and onlooker[0][1] == ""


@pytest.mark.models
@needs_models
def test_keypoints_land_on_the_person(models):
    ((box, _, pose),) = person_words(models, "github_Ask-Anything/yoga.mp4", 8.5)
    kp = pose.keypoints
    assert kp.shape == (17, 3) and kp.dtype == np.float32
    seen = kp[kp[:, 2] >= pw.MIN_SCORE]
    assert len(seen) >= 15
    x1, y1, x2, y2 = box
    pad = 0.1 * max(x2 - x1, y2 - y1)
    assert np.all((seen[:, 0] > x1 - pad) & (seen[:, 0] < x2 + pad))
    assert np.all((seen[:, 1] > y1 - pad) & (seen[:, 1] < y2 + pad))
    left_wrist, left_ankle = kp[pw.LEFT_WRIST], kp[pw.LEFT_ANKLE]
    assert min(kp[pw.LEFT_WRIST, 1], kp[pw.RIGHT_WRIST, 1]) < kp[pw.NOSE, 1]  # the raised hand is above her head
    assert max(left_ankle[1], kp[pw.RIGHT_ANKLE, 1]) > y2 - 0.15 * (y2 - y1)  # feet on the mat
    assert left_wrist[2] > 0


@pytest.mark.models
@needs_models
def test_close_up_without_a_body_says_nothing(models):
    image = frame("github_Ask-Anything/playing_guitar.mp4", 3.0)
    _, estimator = models
    h, w = image.shape[:2]
    (pose,) = estimator.estimate(image, [(0, 0, w, h)])  # the detector calls the whole frame a person
    assert describe_pose(pose) == ""


@pytest.mark.models
@needs_models
def test_no_boxes_no_work_and_a_closed_estimator_works_again(models):
    _, estimator = models
    image = frame("github_Ask-Anything/hitting_baseball.mp4", 1.0)
    assert estimator.estimate(image, []) == []
    estimator.close()
    (pose,) = estimator.estimate(image, [(95, 60, 195, 245)])
    assert pose.keypoints.shape == (17, 3)


@pytest.mark.models
@needs_models
def test_onnx_runtime_finds_the_keypoints_the_tfjs_runtime_finds(models):
    """The converted graph answers the published model's keypoints (the worker sends 4 decimals)."""
    from vidagent.perception.pose import MoveNetNodePose

    detector, estimator = models
    with MoveNetNodePose(MODELS_DIR) as reference:
        people = 0
        for relative, t in [("github_Ask-Anything/hitting_baseball.mp4", 1.0), ("github_Ask-Anything/yoga.mp4", 2.0),
                            ("github_sam2/01_dog.mp4", 1.0)]:
            image = frame(relative, t)
            (found,) = detector.detect([image])
            boxes = [tuple(map(float, b)) for b, label in zip(found.xyxy, class_names(found)) if label == "person"]
            people += len(boxes)
            for expected, pose in zip(reference.estimate(image, boxes), estimator.estimate(image, boxes)):
                assert pose.box == expected.box
                np.testing.assert_allclose(pose.keypoints[:, 2], expected.keypoints[:, 2], atol=2e-4)
                np.testing.assert_allclose(pose.keypoints[:, :2], expected.keypoints[:, :2], atol=0.05)
        assert people >= 3
