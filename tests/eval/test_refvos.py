"""Ref-YouTube-VOS / Ref-DAVIS: the loader on a benchmark laid out from the generated shapes clip (JPEG frames,
palette PNG annotations, meta_expressions.json), its true masks, the video made from its frames, J&F scoring,
and the whole answer of `vidagent eval`'s worker: the objects stage on the made video (a colour detector and
GrabCut), refer_object's resolution of "the book", and the J&F of the referred object's masks."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

import shapes_clip as shapes
from fakes.library import fake_settings
from fakes.llm import ScriptedLLM
from fakes.perception import scripted_perception
from vidagent.eval.dataset import REFERRING_SEGMENTATION
from vidagent.eval.errors import DatasetError
from vidagent.eval.loaders import detect_benchmark_format, load_dataset
from vidagent.eval.referring import annotated_frames, predict_referred_masks, score_referring_segmentation
from vidagent.eval.refvos import YOUTUBE_VOS_FPS, RefFrames, frames_video
from vidagent.perception.segmenter import GrabCutSegmenter, OfflineSegmenter
from vidagent.session import Session
from vidagent.video.video import Video

FRAMES = 24  # 4 s at Ref-YouTube-VOS's 6 frames a second
OBJECT_IDS = {"disc": 1, "square": 2, "ellipse": 3}


def frame_name(i: int) -> str:
    return f"{5 * i:05d}"  # YouTube-VOS keeps every 5th frame of 30 fps and names it by its number


def make_benchmark(root: Path, split: str = "train", *, annotated: bool = True) -> Path:
    """The shapes clip as a Ref-YouTube-VOS split: frames, annotations, and one expression per shape."""
    images = root / split / "JPEGImages" / "shapes"
    images.mkdir(parents=True)
    if annotated:
        (root / split / "Annotations" / "shapes").mkdir(parents=True)
    for i in range(FRAMES):
        t = i / YOUTUBE_VOS_FPS
        cv2.imwrite(str(images / f"{frame_name(i)}.jpg"), cv2.cvtColor(shapes.frame(t), cv2.COLOR_RGB2BGR),
                    [cv2.IMWRITE_JPEG_QUALITY, 95])
        if annotated:
            ids = np.zeros((shapes.HEIGHT, shapes.WIDTH), np.uint8)
            for truth in shapes.truth(t):
                ids[truth.mask] = OBJECT_IDS[truth.shape.name]
            palette = Image.fromarray(ids, mode="P")
            palette.putpalette([0, 0, 0, 236, 95, 103, 249, 145, 87, 250, 200, 99] + [0] * (256 * 3 - 12))
            palette.save(root / split / "Annotations" / "shapes" / f"{frame_name(i)}.png")
    expressions = {"0": {"exp": "the book", "obj_id": "2"}, "1": {"exp": "the  frisbee ", "obj_id": "3"},
                   "2": {"exp": "the sports ball", "obj_id": "1"}}
    if not annotated:
        expressions = {key: {"exp": value["exp"]} for key, value in expressions.items()}
    meta = root / "meta_expressions" / split / "meta_expressions.json"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"videos": {"shapes": {"expressions": expressions,
                                                      "frames": [frame_name(i) for i in range(FRAMES)]}}}))
    return meta


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory) -> Path:
    return make_benchmark(tmp_path_factory.mktemp("ref-youtube-vos"))


def test_the_loader_reads_expressions_frames_and_true_masks(benchmark: Path) -> None:
    assert detect_benchmark_format(benchmark) == "ref_youtube_vos"
    dataset = load_dataset(benchmark)
    assert [(item.id, item.question, item.task) for item in dataset.items] == [
        ("shapes_0", "the book", REFERRING_SEGMENTATION), ("shapes_1", "the frisbee", REFERRING_SEGMENTATION),
        ("shapes_2", "the sports ball", REFERRING_SEGMENTATION)]
    book = dataset.items[0]
    assert book.video == "shapes" and book.has_key and book.type == "ref_youtube_vos"
    ref = RefFrames.from_extra(book.extra["ref"])
    assert ref.object_id == 2 and ref.fps == 6.0 and len(ref.frames) == FRAMES
    assert annotated_frames(ref) == list(ref.frames)
    assert ref.time_of(12) == 2.0
    [square] = [t for t in shapes.truth(2.0) if t.shape.name == "square"]
    assert np.array_equal(ref.truth(frame_name(12)), square.mask)


def test_the_older_release_shape_and_a_split_without_masks(tmp_path: Path) -> None:
    meta = make_benchmark(tmp_path / "a", "valid", annotated=False)
    items = load_dataset(meta).items
    assert len(items) == 3 and not any(item.has_key for item in items)
    assert score_referring_segmentation(items[0], {}) == {"jf": None}
    older = tmp_path / "a" / "meta_expressions" / "valid" / "older.json"
    older.write_text(json.dumps({"videos": {"shapes": {"objects": {"2": {"category": "book", "expressions": [
        "a blue book", "the book on the right"]}}, "frames": ["00000", "00005"]}}}))
    items = load_dataset(older, "ref_youtube_vos").items
    assert [(i.id, i.question, i.extra["ref"]["object_id"]) for i in items] == [
        ("shapes_2_0", "a blue book", 2), ("shapes_2_1", "the book on the right", 2)]


def test_malformed_benchmarks_are_one_line_errors(tmp_path: Path) -> None:
    meta = make_benchmark(tmp_path / "b")
    data = json.loads(meta.read_text())
    data["videos"]["shapes"]["expressions"]["0"]["obj_id"] = "two"
    meta.write_text(json.dumps(data))
    with pytest.raises(DatasetError, match="object id 'two'"):
        load_dataset(meta)
    lonely = tmp_path / "lonely" / "meta_expressions.json"
    lonely.parent.mkdir()
    lonely.write_text(json.dumps({"videos": {"v": {"expressions": {"0": {"exp": "a cat", "obj_id": "1"}},
                                                   "frames": ["00000"]}}}))
    with pytest.raises(DatasetError, match="JPEGImages"):
        load_dataset(lonely, "ref_youtube_vos")


def test_the_video_made_from_the_frames_shows_frame_i_at_i_over_fps(benchmark: Path, tmp_path: Path) -> None:
    ref = RefFrames.from_extra(load_dataset(benchmark).items[0].extra["ref"])
    path = frames_video(ref, tmp_path / "shapes.mp4")
    video = Video(path)
    assert (video.info.width, video.info.height) == (shapes.WIDTH, shapes.HEIGHT)
    assert video.duration_s == pytest.approx(FRAMES / 6.0, abs=0.2)
    [sampled] = list(video.frames_at([2.0]))
    found = shapes.ColourDetector().detect([sampled.image])[0]
    [disc] = [box for box, name in zip(found.xyxy, found.data["class_name"]) if name == shapes.DISC.label]
    [truth] = [t for t in shapes.truth(2.0) if t.shape is shapes.DISC]
    assert abs(disc[0] - truth.box[0]) <= 3  # the disc moves 8 pixels a frame: this is frame 12
    assert frames_video(ref, path) == path  # made once


def test_scoring_perfect_empty_and_ref_davis_masks(benchmark: Path) -> None:
    item = load_dataset(benchmark).items[0]
    ref = RefFrames.from_extra(item.extra["ref"])
    truth = {frame: ref.truth(frame) for frame in ref.frames}
    assert score_referring_segmentation(item, truth)["jf"] == {"j": 1.0, "f": 1.0, "jf": 1.0, "frames": FRAMES}
    assert score_referring_segmentation(item, {})["jf"]["jf"] == 0.0
    padded = {frame: np.pad(mask, ((0, 1), (0, 1))) for frame, mask in truth.items()}  # a video padded to even sides
    assert score_referring_segmentation(item, padded)["jf"]["jf"] == 1.0
    davis = replace(item, type="ref_davis")
    assert score_referring_segmentation(davis, truth)["jf"]["frames"] == FRAMES - 2  # the toolkit's skipped ends


def test_the_worker_answers_a_referring_question_with_the_objects_masks(benchmark: Path, tmp_path: Path,
                                                                        monkeypatch) -> None:
    from vidagent.eval import worker as worker_module

    settings = fake_settings(tmp_path)
    perception = replace(scripted_perception(), detector=shapes.ColourDetector(),
                         segmenter=OfflineSegmenter(GrabCutSegmenter()))
    session = Session(settings, llm=ScriptedLLM([]), perception=perception)
    monkeypatch.setattr(worker_module, "Session", lambda _settings: session)
    worker = worker_module.QuestionWorker(worker_module.WorkerConfig(settings=settings, planner="react"))
    scores = {}
    for item in load_dataset(benchmark).items:
        row = worker.answer(item.with_video_path(Path(item.extra["ref"]["images"])))  # frames, as the runner finds them
        assert row["error"] is None, row["error"]
        assert row["artifacts"]["how"] == "parser"  # read without the chat model
        scores[item.question] = row["jf"]["jf"]
    # measured: J&F 0.969-0.979 (masks sampled at 2 fps, moved with their boxes to the 6 fps annotations)
    assert min(scores.values()) > 0.8, scores
    assert (settings.home / "eval-videos" / "ref_youtube_vos" / "shapes.mp4").is_file()
    book = load_dataset(benchmark).items[0]
    masks, found = predict_referred_masks(session, book, settings.home / "eval-videos" / "ref_youtube_vos" / "shapes.mp4")
    assert list(masks) == list(RefFrames.from_extra(book.extra["ref"]).frames)
    assert found.referent.fact.category == "book" and set(found.sources) == {"mask"}


def test_vidagent_eval_runs_the_benchmark_and_reports_j_and_f(benchmark: Path, tmp_path: Path, monkeypatch) -> None:
    from vidagent.eval import worker as worker_module
    from vidagent.eval.runner import RunConfig, run_eval

    settings = fake_settings(tmp_path)
    perception = replace(scripted_perception(), detector=shapes.ColourDetector(),
                         segmenter=OfflineSegmenter(GrabCutSegmenter()))
    session = Session(settings, llm=ScriptedLLM([]), perception=perception)
    monkeypatch.setattr(worker_module, "Session", lambda _settings: session)
    result = run_eval(RunConfig(dataset=benchmark, planner="react", out=tmp_path / "run", progress=False), settings,
                      log=lambda message: None)
    summary = json.loads((result.out / "summary.json").read_text())
    assert summary["meta"]["missing"] == 0  # the frames stand for the video
    assert summary["segmentation"]["J&F"] > 0.9
    report = (result.out / "summary.md").read_text()
    assert "Referring segmentation" in report and "not by accuracy" in report
