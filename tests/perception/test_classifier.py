"""The offline ImageNet classifier (EfficientNet-Lite0 through onnxruntime) on real frames, and how the
frame describer uses its guesses.

Frames checked by eye: sample_demo_22.mp4 at 1 s is a bearded man behind a drum kit; hitting_baseball.mp4
at 5 s a boy in a batting cage with a bat; skateboarding_dog.mp4 at 1 s a black-and-white dog (a Border
collie type) on a skateboard.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import frame_at
from vidagent.config import Settings
from vidagent.errors import ModelUnavailableError
from vidagent.perception.base import Label
from vidagent.perception.detections import make_detections
from vidagent.perception.classifier import (INPUT_SIZE, ONNX_FILENAME, EfficientNetClassifier, imagenet_labels,
                                            preprocess)
from vidagent.perception.describer import DetectorDescriber, confident_frame_labels
from vidagent.perception.frame_words import frame_labels_phrase, seen_words
from vidagent.perception.object_kind import kind_note, square_crop

MODELS_DIR = Settings.from_env().models_dir
needs_model = pytest.mark.skipif(not (MODELS_DIR / ONNX_FILENAME).is_file(),
                                 reason="run `vidagent models install efficientnet-lite0`")


@pytest.fixture(scope="module")
def classifier() -> EfficientNetClassifier:
    return EfficientNetClassifier(MODELS_DIR)


def test_labels_are_the_thousand_imagenet_classes() -> None:
    names = imagenet_labels()
    assert len(names) == 1000
    assert names[0] == "tench" and names[207] == "golden retriever" and names[981] == "ballplayer"


def test_preprocess_crops_the_centre_at_the_network_size() -> None:
    wide = np.zeros((360, 640, 3), np.uint8)
    wide[:, 320:] = 255  # right half white
    tensor = preprocess(wide)
    assert tensor.shape == (3, INPUT_SIZE, INPUT_SIZE) and tensor.dtype == np.float32
    # the centre crop keeps the boundary in the middle: left columns dark, right columns bright
    assert tensor[:, :, 10].mean() < 0 < tensor[:, :, -10].mean()
    tiny = preprocess(np.full((5, 9, 3), 128, np.uint8))  # smaller than the input: scaled up, no error
    assert tiny.shape == (3, INPUT_SIZE, INPUT_SIZE)


@pytest.mark.models
@needs_model
@pytest.mark.parametrize("clip, t, expected", [
    ("github_Video-LLaVA/sample_demo_22.mp4", 1.0, "drum"),
    ("github_Ask-Anything/hitting_baseball.mp4", 5.0, "ballplayer"),
    ("github_Video-LLaMA/skateboarding_dog.mp4", 1.0, "Border collie"),
])
def test_real_frames_get_their_kind_first(classifier: EfficientNetClassifier, clip: str, t: float,
                                          expected: str) -> None:
    (labels,) = classifier.classify([frame_at(clip, t)], top_k=3)
    assert labels[0].name == expected
    assert 0.3 < labels[0].score <= 1 and labels[0].score >= labels[1].score >= labels[2].score


@pytest.mark.models
@needs_model
def test_probabilities_are_a_distribution_per_image_in_batches(classifier: EfficientNetClassifier) -> None:
    images = [frame_at("github_Video-LLaVA/sample_demo_22.mp4", 1.0)] * 10  # more than one batch
    probabilities = classifier.probabilities(images)
    assert probabilities.shape == (10, 1000)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-4)
    np.testing.assert_allclose(probabilities[0], probabilities[9], atol=1e-5)
    assert classifier.classify([]) == []


@pytest.mark.models
def test_missing_model_says_how_to_install_it(tmp_path) -> None:
    with pytest.raises(ModelUnavailableError, match="vidagent models install efficientnet-lite0"):
        EfficientNetClassifier(tmp_path).classify([np.zeros((32, 32, 3), np.uint8)])


def test_kind_notes_need_confidence_and_agreement_with_the_detector() -> None:
    assert kind_note("dog", [Label("Border collie", 0.53)]) == "Border collie?"
    assert kind_note("dog", [Label("Border collie", 0.2)]) == ""  # not likely enough
    assert kind_note("skateboard", [Label("schipperke", 0.6)]) == ""  # a thing guessed as an animal
    assert kind_note("dog", [Label("ski", 0.6)]) == ""  # an animal guessed as a thing
    assert kind_note("person", [Label("ballplayer", 0.7)]) == "ballplayer?"
    assert kind_note("person", []) == ""


def test_frame_guesses_keep_the_likely_ones_only() -> None:
    assert confident_frame_labels([Label("drum", 0.61), Label("drumstick", 0.1)]) == (Label("drum", 0.61),)
    assert frame_labels_phrase(confident_frame_labels([Label("drum", 0.61), Label("drumstick", 0.1)])) == \
        "ImageNet guesses for the frame: drum 61%."
    assert frame_labels_phrase(confident_frame_labels([Label("racket", 0.52), Label("ballplayer", 0.24)])) == \
        "ImageNet guesses for the frame: racket 52%, ballplayer 24%."
    assert frame_labels_phrase(confident_frame_labels([Label("oboe", 0.1)])) == ""


def test_square_crop_is_clipped_to_the_image() -> None:
    image = np.zeros((100, 200, 3), np.uint8)
    assert square_crop(image, [90, 40, 110, 60]).shape[:2] == (24, 24)
    corner = square_crop(image, [0, 0, 50, 20])
    assert corner.shape[0] <= 100 and corner.shape[1] <= 200 and min(corner.shape[:2]) > 0


class _OneDogDetector:
    """The detector's answer for the skateboarding dog frame (a box drawn by eye), to test the
    describer's use of the real classifier without the Node detector."""

    name = "centernet-coco"

    def detect(self, images):
        h, w = images[0].shape[:2]
        box = np.array([[0.2 * w, 0.25 * h, 0.85 * w, 0.75 * h]], np.float32)
        return [make_detections(box, [0.8], [16], ["dog"]) for _ in images]


@pytest.mark.models
@needs_model
def test_describer_adds_the_kind_and_the_frame_guesses(classifier: EfficientNetClassifier) -> None:
    describer = DetectorDescriber(_OneDogDetector(), classifier=classifier)
    (description,) = describer.describe([frame_at("github_Video-LLaMA/skateboarding_dog.mp4", 1.0)])
    assert "ImageNet guesses for the frame: Border collie" in seen_words(description)
    assert [o.label for o in description.objects] == ["dog"] and description.labels[0].name == "Border collie"
    assert "efficientnet" in describer.name and "ImageNet" in describer.memory_note
    plain = DetectorDescriber(_OneDogDetector())
    assert "ImageNet" not in seen_words(plain.describe([frame_at("github_Video-LLaMA/skateboarding_dog.mp4", 1.0)])[0])
    assert plain.name != describer.name  # a library built without it is rebuilt with it



def test_names_are_unique() -> None:  # "crane bird" and "crane": the kind of a guess is never ambiguous
    assert len(set(imagenet_labels())) == 1000
