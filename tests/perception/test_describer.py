"""DetectorDescriber (facts) and frame_words (their words): hand-made pixels and boxes, then the real
detector on real frames.

Frames were checked by eye: in 01_dog.mp4 at 1 s a woman (white top, blue jeans) stands on the
left and a white dog with brown patches is right of centre; skateboarding_dog.mp4 at 12 s shows
a mostly black dog on a grey skateboard.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import frame_at
from vidagent.config import Settings
from vidagent.perception.base import FrameDescription, Label, SeenObject, TextBox
from vidagent.perception.colour import colour_name, object_region
from vidagent.perception.describer import DESCRIPTION_PREFIX, DESCRIPTION_PREFIX_OCR, DetectorDescriber
from vidagent.perception.detections import make_detections, no_detections
from vidagent.perception.detector import COCO_LABELS, CenterNetDetector
from vidagent.perception.node_assets import detector_assets_installed
from vidagent.perception.frame_words import (MAX_WORDS, describer_sentence, position_words, seen_words,
                                             size_word)

MODELS_DIR = Settings.from_env().models_dir



def pixels(*rgb: tuple[int, int, int], n: int = 20) -> np.ndarray:
    return np.array([c for c in rgb for _ in range(n)], np.uint8)


# ----------------------------------------------------------------------------- colour words


@pytest.mark.parametrize("rgb, name", [
    ((230, 20, 20), "red"), ((255, 140, 0), "orange"), ((240, 220, 30), "yellow"),
    ((30, 160, 40), "green"), ((20, 200, 210), "cyan"), ((30, 60, 200), "blue"),
    ((40, 50, 110), "blue"),  # navy / denim
    ((120, 30, 160), "purple"), ((255, 105, 180), "pink"), ((255, 190, 200), "pink"),
    ((120, 70, 20), "brown"), ((200, 170, 130), "brown"),  # tan
    ((5, 5, 5), "black"), ((40, 45, 50), "black"), ((128, 128, 128), "grey"),
    ((90, 110, 100), "grey"),  # tinted grey (little chroma) is not green
    ((250, 250, 250), "white"), ((235, 235, 220), "white"),
])
def test_colour_name_single_colours(rgb, name):
    assert colour_name(pixels(rgb)) == name


def test_colour_name_majority_and_two_tone():
    mostly_red = np.concatenate([pixels((230, 20, 20), n=80), pixels((30, 60, 200), n=20)])
    assert colour_name(mostly_red) == "red"
    two_tone = np.concatenate([pixels((5, 5, 5), n=55), pixels((250, 250, 250), n=45)])
    assert colour_name(two_tone) == "black and white"


def test_colour_name_accepts_image_patches_and_empty():
    patch = np.zeros((10, 12, 3), np.uint8)
    patch[..., 2] = 220
    assert colour_name(patch) == "blue"
    assert colour_name(np.zeros((0, 3), np.uint8)) == "unknown"


def test_a_person_is_coloured_by_the_top_and_other_objects_by_the_middle():
    """Issue 51: a woman in a white top and blue jeans was "person (blue)" (the box's middle half is half jeans)."""
    image = np.zeros((200, 100, 3), np.uint8)
    image[:30] = (150, 100, 60)  # hair and face (brown)
    image[30:100] = (240, 240, 240)  # white top
    image[100:] = (40, 60, 200)  # blue jeans
    box = (0, 0, 100, 200)
    assert colour_name(object_region(image, box, "person")) == "white"
    assert colour_name(object_region(image, box, "dog")) == "blue and white"  # the middle half, as before
    assert colour_name(object_region(image, box, "person").reshape(-1, 3)) == "white"


# ----------------------------------------------------------------------------- geometry words


@pytest.mark.parametrize("box, words", [
    ((0, 0, 100, 100), "top left"), ((550, 0, 600, 50), "top right"),
    ((250, 150, 350, 250), "centre"), ((0, 150, 100, 250), "middle left"),
    ((500, 150, 600, 250), "middle right"), ((250, 350, 350, 400), "bottom centre"),
    ((0, 0, 600, 400), "centre"), ((0, 300, 600, 400), "bottom centre"),
])
def test_position_words(box, words):
    assert position_words(box, 600, 400) == words


def test_size_word():
    assert size_word((0, 0, 10, 10), 600, 400) == "small"
    assert size_word((0, 0, 150, 100), 600, 400) == "medium"
    assert size_word((0, 0, 600, 200), 600, 400) == "large"


# ----------------------------------------------------------------------------- sentences


class FakeDetector:
    name = "fake"

    def __init__(self, boxes: list[tuple[float, float, float, float, str]]) -> None:
        self.boxes = boxes

    def detect(self, images):
        if not self.boxes:
            return [no_detections() for _ in images]
        labels = tuple(b[4] for b in self.boxes)
        return [make_detections([b[:4] for b in self.boxes], np.linspace(0.9, 0.5, len(labels)),
                                [COCO_LABELS.index(lab) for lab in labels], labels)
                for _ in images]


class FakeReader:
    name = "fake-ocr"

    def __init__(self, boxes: list[TextBox]) -> None:
        self.boxes = boxes

    def read(self, image):
        return list(self.boxes)


def scene() -> np.ndarray:
    image = np.full((400, 600, 3), 128, np.uint8)
    image[100:300, 0:150] = (200, 30, 30)  # red object, middle left
    image[300:400, 400:600] = (250, 250, 250)  # white object, bottom right
    image[0:50, 500:560] = (30, 60, 200)  # small blue object, top right
    return image


def test_facts_then_words_group_classes_with_colour_size_position():
    detector = FakeDetector([(0, 100, 150, 300, "person"), (400, 300, 600, 400, "dog"),
                             (500, 0, 560, 50, "dog")])
    describer = DetectorDescriber(detector)
    (desc,) = describer.describe([scene()])
    assert desc.caption is None and desc.size == (600, 400) and desc.on_screen_text == ()
    assert [(o.label, o.box, o.colour) for o in desc.objects] == [
        ("person", (0, 100, 150, 300), "red"), ("dog", (400, 300, 600, 400), "white"),
        ("dog", (500, 0, 560, 50), "blue")]
    assert desc.objects[0].score == pytest.approx(0.9)
    assert seen_words(desc) == "1 person (red, medium, middle left); 2 dogs (white, medium, bottom right; blue, small, top right)."
    assert describer.label == DESCRIPTION_PREFIX
    assert describer_sentence(desc, describer.label) == f"{DESCRIPTION_PREFIX} {seen_words(desc)}"


def test_words_of_kinds_poses_and_frame_guesses():
    frame = FrameDescription(objects=(SeenObject("person", 0.9, (0, 0, 300, 400), "white", "ballplayer", "standing"),
                                      SeenObject("dog", 0.8, (500, 300, 560, 350), "", "Border collie")),
                             labels=(Label("drum", 0.614), Label("drumstick", 0.1)), size=(600, 400))
    assert seen_words(frame) == ("1 person (ballplayer?, standing, white, large, middle left); "
                                 "1 dog (Border collie?, small, bottom right). "
                                 "ImageNet guesses for the frame: drum 61%, drumstick 10%.")
    assert seen_words(FrameDescription(caption="a  dog\nruns")) == "a dog runs"  # a caption is what was seen
    assert describer_sentence(FrameDescription(caption="a dog", on_screen_text=("EXIT",))) == 'a dog On-screen text: "EXIT".'


def test_empty_frame_says_so_and_reports_text():
    reader = FakeReader([TextBox("EXIT", (10, 10, 50, 30), 0.95), TextBox("x", (0, 0, 5, 5), 0.99),
                         TextBox("blurry", (0, 50, 50, 60), 0.3),
                         TextBox("Gate 12", (100, 10, 150, 30), 0.9)])
    describer = DetectorDescriber(FakeDetector([]), reader)
    (desc,) = describer.describe([scene()])
    assert describer_sentence(desc, describer.label) == \
        f'{DESCRIPTION_PREFIX_OCR} no COCO objects detected. On-screen text: "EXIT", "Gate 12".'
    assert desc.on_screen_text == ("EXIT", "Gate 12") and desc.objects == ()
    assert [b.text for b in desc.text_boxes] == ["EXIT", "Gate 12"]
    assert "fake-ocr" in describer.name


def test_crowded_frame_stays_short():
    rng = np.random.default_rng(0)
    boxes = []
    for label in ("person", "car", "boat", "dog", "bird", "chair", "cup"):
        for _ in range(6):
            x, y = rng.uniform(0, 500), rng.uniform(0, 300)
            boxes.append((x, y, x + rng.uniform(5, 100), y + rng.uniform(5, 100), label))
    long_text = TextBox(" ".join(f"word{i}" for i in range(40)), (0, 0, 600, 20), 0.9)
    image = rng.integers(0, 255, (400, 600, 3), dtype=np.uint8)
    describer = DetectorDescriber(FakeDetector(boxes), FakeReader([long_text]))
    (desc,) = describer.describe([image])
    seen = seen_words(desc)
    assert len(seen.split()) <= MAX_WORDS
    assert len(re.findall(r"(?<!\w)6 [a-z]+", seen)) == 4  # 4 classes counted...
    assert re.search(r"also \w+, \w+, \w+\.", seen)  # ...and the other 3 named
    sentence = describer_sentence(desc, describer.label)
    assert '"word0 word1' in sentence and "word11…" in sentence and "word12" not in sentence
    assert len(desc.objects) == 42  # every detection is kept as a fact, whatever the words name


# ----------------------------------------------------------------------------- real detector


@pytest.fixture(scope="module")
def describer():
    if not detector_assets_installed(MODELS_DIR):
        pytest.skip(f"CenterNet detector assets not installed in {MODELS_DIR} "
                    "(run vidagent.perception.detector.install_detector_assets)")
    with CenterNetDetector(MODELS_DIR) as detector:
        yield DetectorDescriber(detector)


@pytest.mark.models
def test_real_frames(describer):
    dog_scene = frame_at("github_sam2/01_dog.mp4", 1.0)
    skate = frame_at("github_Video-LLaMA/skateboarding_dog.mp4", 12.0)
    blank = np.zeros((360, 640, 3), np.uint8)
    woman, skater, empty = (seen_words(d) for d in describer.describe([dog_scene, skate, blank]))

    assert "1 person (" in woman and "1 dog (white" in woman
    assert "middle left" in woman.split("1 dog")[0]  # the woman stands on the left

    assert "1 dog (black" in skater and "1 skateboard (grey" in skater
    assert empty == "no COCO objects detected."
    for seen in (woman, skater, empty):
        assert len(seen.split()) <= MAX_WORDS


@pytest.mark.models
def test_the_detector_describer_tells_the_llm_no_captioner_wrote_its_descriptions(describer):
    note = describer.memory_note
    assert note.startswith("No captioning model is installed: each description lists what an object detector "
                           "(80 everyday object classes, with colour and position) found in a frame.")
    assert "text reader" not in note  # this describer has no OCR
    from vidagent.perception.ocr import RapidTextReader

    with_text = DetectorDescriber(describer.detector, RapidTextReader(cache_dir=MODELS_DIR / "ocr")).memory_note
    assert "(80 everyday object classes, with colour and position) and a text reader found in a frame" in with_text
    assert "Descriptions do not name actions" in with_text


@pytest.mark.models
def test_people_get_pose_words_from_the_real_pose_model(describer):
    """hitting_baseball.mp4 at 1 s: the batter stands at the plate (checked by eye)."""
    from vidagent.perception.node_assets import pose_assets_installed
    from vidagent.perception.pose import MoveNetPose

    if not pose_assets_installed(MODELS_DIR):
        pytest.skip("MoveNet is not installed (run `vidagent models install centernet`)")
    with MoveNetPose(MODELS_DIR) as pose:
        with_pose = DetectorDescriber(describer.detector, pose=pose)
        (description,) = with_pose.describe([frame_at("github_Ask-Anything/hitting_baseball.mp4", 1.0)])
    text = seen_words(description)
    people = text.split("people (")[1].split(")")[0]
    assert "standing" in people and "baseball bat" in text
    assert any("standing" in o.pose for o in description.objects if o.label == "person")
    assert "body-pose model" in with_pose.memory_note and "movenet" in with_pose.name
    plain = describer.describe([frame_at("github_Ask-Anything/hitting_baseball.mp4", 1.0)])[0]
    assert "standing" not in seen_words(plain) and not any(o.pose for o in plain.objects)
