"""PP-OCRv5 text reader (rapidocr-onnxruntime): real models, real frames, no mocks.

Text checked by looking at the frames (saved as PNG and viewed):

* ``github_Video-LLaVA/sample_demo_1.mp4`` (and ``github_LLaMA-Factory/1.mp4``, ``3.mp4``): a
  "clideo.com" watermark in the bottom-right corner of every frame (x ~457-625, y ~305-345).
* ``github_LLaMA-Factory/3.mp4``: a small caption "Keep laundry pacs away from children." under
  the watermark (the model reads "laundry" as "laundfy"/"iaundfy"; the rest is exact).
* ``github_VideoAgent/boats.mp4``: the sail number "108" on the right-hand yacht's mainsail.
* ``github_Video-LLaMA/boat.mp4``: a large semi-transparent "shutterstock" logo across the middle of every frame
  (y ~205-240), which the plain pass misses and the equalised pass reads a few letters off.
"""

from __future__ import annotations

import threading

import cv2
import numpy as np
import pytest

from conftest import frame_at
from vidagent.errors import ModelUnavailableError
from vidagent.perception.base import TextBox, TextReader
from vidagent.perception.ocr import DEFAULT_MIN_SCORE, RapidTextReader, reading_order_by_lines



@pytest.fixture(scope="module")
def reader(tmp_path_factory) -> RapidTextReader:
    model = RapidTextReader(cache_dir=tmp_path_factory.mktemp("ocr-cache"))
    model.load()
    return model


def texts(boxes: list[TextBox]) -> list[str]:
    return [box.text.lower() for box in boxes]


def assert_well_formed(boxes: list[TextBox], image: np.ndarray) -> None:
    height, width = image.shape[:2]
    for box in boxes:
        x1, y1, x2, y2 = box.box
        assert 0 <= x1 < x2 <= width and 0 <= y1 < y2 <= height
        assert DEFAULT_MIN_SCORE <= box.score <= 1.0
        assert box.text == box.text.strip() and any(ch.isalnum() for ch in box.text)


@pytest.mark.models
def test_satisfies_protocol(reader):
    model: TextReader = reader
    assert model.name


@pytest.mark.models
def test_watermark(reader):
    image = frame_at("github_Video-LLaVA/sample_demo_1.mp4", 2.0)
    boxes = reader.read(image)
    assert_well_formed(boxes, image)
    assert "clideo.com" in texts(boxes)
    (mark,) = [box for box in boxes if box.text.lower() == "clideo.com"]
    x1, y1, x2, y2 = mark.box
    assert abs(x1 - 457) < 15 and abs(x2 - 625) < 15 and abs(y1 - 305) < 12 and abs(y2 - 345) < 12
    assert mark.score > 0.95


@pytest.mark.models
def test_caption_words_and_reading_order(reader):
    image = frame_at("github_LLaMA-Factory/3.mp4", 1.0)
    boxes = reader.read(image)
    assert_well_formed(boxes, image)
    found = texts(boxes)
    assert found[0] == "clideo.com"  # the watermark sits above the caption
    caption = " ".join(found[1:])
    assert "pacs away from children" in caption and caption.startswith("keep")


@pytest.mark.models
def test_sail_number(reader):
    hits = [texts(reader.read(frame_at("github_VideoAgent/boats.mp4", t))) for t in (0.0, 6.0, 10.0)]
    assert all("108" in found for found in hits), hits


@pytest.mark.models
def test_blank_frames_have_no_text(reader):
    for value in (0, 128, 255):
        assert reader.read(np.full((360, 640, 3), value, np.uint8)) == []
    assert reader.read(np.zeros((720, 1280, 3), np.uint8)) == []


@pytest.mark.models
def test_faint_watermark_is_read_as_the_vendor_name(reader):
    # the plain pass finds nothing at any time; the equalised pass reads the logo at 0.85-0.95 in most frames
    read = []
    for time_s in (1.0, 1.5, 2.0, 2.5, 3.0):
        image = frame_at("github_Video-LLaMA/boat.mp4", time_s)
        boxes = reader.read(image)
        assert_well_formed(boxes, image)
        assert texts(boxes) in ([], ["shutterstock"])  # nothing else is read into the frame
        read += boxes
    assert len(read) >= 3
    for mark in read:
        assert 180 < (mark.box[1] + mark.box[3]) / 2 < 260 and mark.box[2] - mark.box[0] > 200


@pytest.mark.models
def test_the_equalised_pass_runs_only_where_the_plain_detector_saw_something(reader):
    detector = reader._engines.at(0).text_det.infer
    before = detector.runs
    assert reader.read(np.full((360, 640, 3), 128, np.uint8)) == []  # nothing text-like: one detection
    assert detector.runs == before + 1 and detector.peak < 0.05
    image = frame_at("github_Video-LLaMA/boat.mp4", 3.0)  # the plain pass sees the logo but cannot read it
    assert texts(reader.read(image)) == ["shutterstock"]
    assert detector.runs == before + 3


@pytest.mark.models
def test_textureless_real_frame_has_no_text(reader):
    # a courtyard with a woman and a dog: no text anywhere (checked by eye)
    assert reader.read(frame_at("github_sam2/01_dog.mp4", 2.0)) == []


@pytest.mark.models
def test_large_frame_is_downscaled_and_boxes_map_back(reader):
    image = frame_at("github_sam2/01_dog.mp4", 2.0).copy()  # 1280x720, no text of its own
    lines = [("EXIT 42", 2.0, 120), ("Main Street Bakery", 1.2, 270), ("open daily 9am", 1.0, 420)]
    for text, scale, y in lines:
        cv2.putText(image, text, (60, y), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255),
                    max(1, int(scale * 2)), cv2.LINE_AA)
    boxes = reader.read(image)
    assert_well_formed(boxes, image)
    assert [t.replace(" ", "") for t in texts(boxes)] == ["exit42", "mainstreetbakery", "opendaily9am"]
    for box, (_, _, baseline) in zip(boxes, lines):
        x1, y1, x2, y2 = box.box
        assert abs(x1 - 60) < 12 and y1 < baseline < y2 + 8  # in full-resolution pixels


@pytest.mark.models
def test_native_size_option_and_upscaled_frame(tmp_path):
    native = RapidTextReader(cache_dir=tmp_path, side=None)
    image = frame_at("github_Video-LLaVA/sample_demo_1.mp4", 2.0)
    assert "clideo.com" in texts(native.read(image))
    doubled = cv2.resize(image, (1280, 720), interpolation=cv2.INTER_CUBIC)
    (mark,) = [b for b in RapidTextReader(cache_dir=tmp_path).read(doubled) if b.text.lower() == "clideo.com"]
    assert abs(mark.box[0] - 2 * 457) < 30 and abs(mark.box[2] - 2 * 625) < 30


@pytest.mark.models
def test_greyscale_input(reader):
    image = frame_at("github_Video-LLaVA/sample_demo_1.mp4", 2.0)
    grey = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
    assert "clideo.com" in texts(reader.read(grey))


@pytest.mark.models
def test_bad_input_is_rejected(reader):
    with pytest.raises(ValueError):
        reader.read(np.zeros((10, 10, 3), np.float32))
    with pytest.raises(ValueError):
        reader.read(np.zeros((10, 10, 5), np.uint8))


@pytest.mark.models
def test_thread_safe(reader):
    image = frame_at("github_Video-LLaVA/sample_demo_1.mp4", 2.0)
    results: list[list[str]] = []
    threads = [threading.Thread(target=lambda: results.append(texts(reader.read(image)))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 3 and all("clideo.com" in found for found in results)


@pytest.mark.models
def test_copies_read_at_once_what_one_engine_on_both_cores_reads(tmp_path):
    images = [frame_at("github_Video-LLaVA/sample_demo_1.mp4", 2.0), frame_at("github_VideoAgent/boats.mp4", 6.0),
              frame_at("github_LLaMA-Factory/3.mp4", 1.0), frame_at("github_Video-LLaMA/boat.mp4", 3.0),
              np.full((360, 640, 3), 128, np.uint8)]
    one = RapidTextReader(cache_dir=tmp_path, copies=1, threads=2)
    two = RapidTextReader(cache_dir=tmp_path, copies=2, threads=1)
    expected = [one.read(image) for image in images]
    assert [texts(boxes) for boxes in expected] == [["clideo.com"], ["108"], texts(expected[2]), ["shutterstock"], []]
    assert two.read_many(images) == expected
    assert len(two._engines.made()) == 2  # the reads overlapped: a second engine was made for them


@pytest.mark.models
def test_dictionary_copy_and_folded_models_are_cached(tmp_path):
    first = RapidTextReader(cache_dir=tmp_path)
    first.load()
    copies = list(tmp_path.glob("ppocr_keys_v5_noblank-*.txt"))
    assert len(copies) == 1
    assert not copies[0].read_text(encoding="utf-8").startswith("blank")
    folded = sorted(tmp_path.glob("*-folded*.onnx"))
    assert len(folded) == 2  # the detector and the recogniser
    written = {path: path.stat().st_mtime_ns for path in tmp_path.glob("*")}
    RapidTextReader(cache_dir=tmp_path).load()
    assert {path: path.stat().st_mtime_ns for path in tmp_path.glob("*")} == written  # reused, no temporary files


@pytest.mark.models
def test_unwritable_cache_raises_model_unavailable(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    with pytest.raises(ModelUnavailableError, match="OCR unavailable"):
        RapidTextReader(cache_dir=blocker / "ocr").load()


def test_reading_order_groups_lines():
    def box(text: str, x1: float, y1: float, x2: float, y2: float) -> TextBox:
        return TextBox(text, (x1, y1, x2, y2), 0.9)

    boxes = [box("world", 120, 12, 200, 40), box("below", 10, 60, 90, 85), box("hello", 10, 10, 100, 38),
             box("tall", 300, 0, 340, 50)]
    assert [b.text for b in reading_order_by_lines(boxes)] == ["hello", "world", "tall", "below"]


@pytest.mark.models
def test_sessions_do_not_spin(reader):
    # busy-waiting onnxruntime threads halved OCR speed whenever another model kept the cores busy
    from rapidocr_onnxruntime.utils import infer_engine

    engine = reader._engines.at(0)
    for session in (engine.text_det.infer.session, engine.text_rec.session.session):
        assert session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert isinstance(infer_engine.OrtInferSession.__dict__["_init_sess_opts"], staticmethod)
    assert infer_engine.OrtInferSession.__dict__["_init_sess_opts"].__func__.__name__ == "_init_sess_opts"
