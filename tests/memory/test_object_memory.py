"""The objects stage on real clips: detections tracked and re-identified into objects, stored
consistently, queryable with SQL, deterministic, and resumable after an interruption."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from vidagent.config import Settings
from vidagent.memory.builder import MemoryBuilder
from vidagent.memory.sql import ReadOnlyQueries
from vidagent.memory.stages import objects as stage
from vidagent.memory.stages.objects import ObjectsStage
from vidagent.memory.store import Library
from vidagent.perception.node_assets import detector_assets_installed
from vidagent.perception.detections import class_names, make_detections, with_data
from vidagent.perception.suite import Perception
from vidagent.video.video import Video

from conftest import video_path

SKATEBOARD = "github_Video-LLaMA/skateboarding_dog.mp4"  # one dog riding a skateboard, 14 s
SNOW = "github_InternVideo/example1.mp4"  # a man and a yellow dog in a snowy yard, 8 s
TABLES = ("detections", "tracks", "objects", "object_segments")


@pytest.fixture(scope="module")
def settings(tmp_path_factory, models_dir: Path) -> Settings:
    if not detector_assets_installed(models_dir):
        pytest.skip("offline models are not installed (run `vidagent models install`)")
    return replace(Settings.from_env(), home=tmp_path_factory.mktemp("objects-home"), models=models_dir)


@pytest.fixture(scope="module")
def perception(settings: Settings):
    suite = Perception.offline(settings)
    yield suite
    suite.close()


@pytest.fixture(scope="module")
def built(settings: Settings, perception: Perception) -> Path:
    with Library(settings.library_path) as library:
        builder = MemoryBuilder(library, perception, settings)
        for clip in (SKATEBOARD, SNOW):
            builder.build(Video(video_path(clip)), ["objects"], progress=False)
    return settings.library_path


def _rows(library_path: Path, clip: str, table: str) -> list[tuple]:
    with Library(library_path) as library:
        return library.rows(f"SELECT * FROM {table} WHERE video_id=? ORDER BY 2, 3", (Video(video_path(clip)).content_hash,))


def _query(library_path: Path, clip: str, sql: str) -> list[tuple]:
    with ReadOnlyQueries(library_path, Video(video_path(clip)).content_hash) as queries:
        return queries.run(sql).rows


def test_the_skateboarding_dog_is_one_object_seen_throughout(built):
    # Checked by eye: one black-and-white dog rides a skateboard in every frame until about 12 s.
    dogs = _query(built, SKATEBOARD, "SELECT object_id, first_s, last_s, frame_count FROM objects WHERE category='dog'")
    main = max(dogs, key=lambda row: row[3])
    assert main[1] <= 0.5 and main[2] >= 10.0 and main[3] >= 20
    assert sum(row[3] for row in dogs) - main[3] <= 4  # any other "dog" is a brief false detection
    assert _query(built, SKATEBOARD, "SELECT COUNT(*) FROM objects WHERE category='skateboard'")[0][0] >= 1


def test_objects_rows_agree_with_detections_and_tracks(built):
    for clip in (SKATEBOARD, SNOW):
        # Every tracked detection belongs to its track's object; untracked ones have no object.
        assert _query(built, clip, """SELECT COUNT(*) FROM detections d JOIN tracks t ON t.track_id = d.track_id
                                      WHERE d.object_id != t.object_id""") == [(0,)]
        assert _query(built, clip, "SELECT COUNT(*) FROM detections WHERE track_id IS NULL AND object_id IS NOT NULL") == [(0,)]
        # An object's first/last sighting and frame count come from its detections.
        mismatched = _query(built, clip, """
            SELECT o.object_id FROM objects o JOIN detections d ON d.object_id = o.object_id GROUP BY o.object_id
            HAVING MIN(d.time_s) != o.first_s OR MAX(d.time_s) != o.last_s OR COUNT(DISTINCT d.time_s) != o.frame_count""")
        assert mismatched == []
        # Per-segment presence adds up to the frame count.
        assert _query(built, clip, """SELECT COUNT(*) FROM objects o WHERE o.frame_count !=
                                      (SELECT SUM(frame_count) FROM object_segments s WHERE s.object_id = o.object_id)""") == [(0,)]
        # Re-ID never puts two tracks that share a frame into one object.
        assert _query(built, clip, """SELECT COUNT(*) FROM detections a JOIN detections b
                                      ON a.object_id = b.object_id AND a.time_s = b.time_s AND a.track_id < b.track_id""") == [(0,)]
        # Positions are fractions of the frame.
        assert _query(built, clip, "SELECT COUNT(*) FROM detections WHERE cx < 0 OR cx > 1 OR cy < 0 OR cy > 1") == [(0,)]


def test_objects_have_appearance_motion_and_a_searchable_embedding(built):
    with Library(built) as library:
        objects = library.objects(Video(video_path(SNOW)).content_hash)
    categories = {o.category for o in objects}
    assert {"person", "dog"} <= categories  # checked by eye: a man and a dog play in the snow
    for o in objects:
        assert o.category in o.appearance and o.motion and o.description.startswith(o.appearance)
        assert o.embedding.shape == (384,)


def test_objects_stage_is_deterministic(settings, perception, built, tmp_path):
    again = replace(settings, home=tmp_path)
    with Library(again.library_path) as library:
        MemoryBuilder(library, perception, again).build(Video(video_path(SNOW)), ["objects"], progress=False)
    for table in TABLES:
        assert _rows(again.library_path, SNOW, table) == _rows(built, SNOW, table), table


class _Interrupted(Exception):
    pass


class _StopsAfter(ObjectsStage):
    """The real objects stage, interrupted after ``chunks`` checkpointed chunks (like a kill)."""

    def __init__(self, perception: Perception, settings: Settings, chunks: int) -> None:
        super().__init__(perception, settings)
        self.chunks_left = chunks

    def process(self, frames):
        if self.chunks_left == 0:
            raise _Interrupted()
        self.chunks_left -= 1
        return super().process(frames)


def test_an_interrupted_objects_stage_resumes_and_equals_an_uninterrupted_build(settings, perception, built, tmp_path):
    resumed = replace(settings, home=tmp_path)
    video = Video(video_path(SNOW))
    with Library(resumed.library_path) as library:
        builder = MemoryBuilder(library, perception, resumed)
        builder._stages["objects"] = _StopsAfter(perception, resumed, chunks=1)
        with pytest.raises(_Interrupted):
            builder.build(video, ["objects"], progress=False)
        assert all(library.count_rows(table, video.content_hash) == 0 for table in TABLES)
        # the objects stage's first chunk is kept (the camera stage, in the same decoding pass, may keep one too)
        assert library.rows("SELECT COUNT(*) FROM stage_checkpoints WHERE video_id=? AND stage='objects'",
                            (video.content_hash,))[0][0] == 1
        rebuilt = _StopsAfter(perception, resumed, chunks=1)  # one chunk is enough for the rest
        builder._stages["objects"] = rebuilt
        builder.build(video, ["objects"], progress=False)
        assert rebuilt.chunks_left == 0
    for table in TABLES:
        assert _rows(resumed.library_path, SNOW, table) == _rows(built, SNOW, table), table


def test_a_video_where_nothing_is_detected_has_an_empty_object_memory(settings, perception, tmp_path):
    import numpy as np

    from conftest import write_test_video

    frames = [np.full((64, 96, 3), 30 + 5 * i, np.uint8) for i in range(12)]  # dark, plain frames
    path = write_test_video(tmp_path / "plain.mp4", frames, fps=4)
    with Library(settings.library_path) as library:
        memory = MemoryBuilder(library, perception, settings).build(Video(path), ["objects"], progress=False)
        assert memory.objects == [] and "objects" in memory.stages


def test_a_one_frame_rotated_video_gets_boxes_in_display_pixels(settings, perception, tmp_path):
    import numpy as np

    from conftest import frame_at, set_mp4_rotation, write_test_video

    image = frame_at(SKATEBOARD, 3.0)[::2, ::2].copy()  # portrait 288x512: the dog on its skateboard
    landscape = np.ascontiguousarray(np.rot90(image, 1))  # stored on its side, displayed upright
    path = write_test_video(tmp_path / "one.mp4", [landscape], fps=1)
    set_mp4_rotation(path, clockwise_quarter_turns=1)
    video = Video(path)
    assert (video.info.width, video.info.height) == (image.shape[1], image.shape[0])
    with Library(settings.library_path) as library:
        memory = MemoryBuilder(library, perception, settings).build(video, ["objects"], progress=False)
        objects = memory.objects
    with ReadOnlyQueries(settings.library_path, video.content_hash) as queries:
        boxes = queries.run("SELECT category, x1, y1, x2, y2, cy FROM detections").rows
    assert any(category == "dog" for category, *_ in boxes)
    for _, x1, y1, x2, y2, _ in boxes:
        assert 0 <= x1 < x2 <= image.shape[1] + 1 and 0 <= y1 < y2 <= image.shape[0] + 1
    assert objects and all(o.first_s == 0.0 for o in objects)


def test_an_hour_long_video_is_sampled_within_bounded_frame_counts(settings, perception, tmp_path):
    import numpy as np

    from vidagent.memory.stages.objects import MAX_OBJECT_FRAMES
    from conftest import write_test_video

    frames = [np.full((32, 32, 3), i % 250, np.uint8) for i in range(3600)]  # one frame per second
    video = Video(write_test_video(tmp_path / "hour.mp4", frames, fps=1))
    assert video.duration_s == pytest.approx(3600, abs=1)
    with Library(settings.library_path) as library:
        builder = MemoryBuilder(library, perception, settings)
        object_times = builder.stage("objects").frame_times(video)
        frame_times = builder.stage("frames").frame_times(video)
    assert len(object_times) == MAX_OBJECT_FRAMES and object_times == sorted(set(object_times))
    assert object_times[-1] < video.duration_s
    assert len(frame_times) == 1800  # one per 2 s segment
    assert set(frame_times) <= set(object_times)  # the described frames are among the detected ones


@pytest.mark.parametrize(("minutes", "per_segment"), [(10, 4), (20, 3), (25, 2), (40, 1)])
def test_a_long_video_is_sampled_on_a_grid_through_the_described_frames(settings, perception, tmp_path, minutes,
                                                                       per_segment):
    from vidagent.memory.stages.objects import MAX_OBJECT_FRAMES

    from vidagent.video.video import VideoInfo

    video = Video.__new__(Video)  # only its length is read: no file of that length is written
    video.info = VideoInfo("long.mp4", "0" * 32, minutes * 60.0, 25.0, 640, 360, 0, False, "h264", "mp4")
    with Library(settings.library_path) as library:
        builder = MemoryBuilder(library, perception, settings)
        objects, frames = builder.stage("objects"), builder.stage("frames")
        object_times = objects.frame_times(video)
    assert objects.sampling_fps(video) == per_segment / settings.segment_seconds
    assert len(object_times) <= MAX_OBJECT_FRAMES
    assert set(frames.frame_times(video)) <= set(object_times)


def test_frames_and_objects_built_together_run_the_detector_once_per_frame(settings, perception, built, tmp_path):
    from vidagent.perception.caching import CachingDetector

    detector = perception.detector
    assert isinstance(detector, CachingDetector) and perception.describer.detector is detector
    together = replace(settings, home=tmp_path)
    video = Video(video_path(SNOW))  # 8 s: frames at 1, 3, 5, 7 s are also objects-stage frames
    detector.clear()  # earlier tests decoded the same frames
    hits, misses = detector.hits, detector.misses
    with Library(together.library_path) as library:
        builder = MemoryBuilder(library, perception, together)
        builder.build(video, ["frames", "objects"], progress=False)
        object_times = builder.stage("objects").frame_times(video)
        frame_times = builder.stage("frames").frame_times(video)
    assert set(frame_times) <= set(object_times)
    assert detector.misses - misses == len(object_times)  # each distinct frame once
    assert detector.hits - hits == len(frame_times)
    for table in TABLES:  # and the stored objects are the same as when built alone
        assert _rows(together.library_path, SNOW, table) == _rows(built, SNOW, table)


@pytest.mark.models
def test_with_the_imagenet_classifier_objects_name_their_kind(settings, tmp_path):
    """The skateboarding dog is a black-and-white Border collie type (checked by eye); the object memory
    says so when the classifier is on, and its stage config changes so a library rebuilds."""
    from vidagent.perception.classifier import ONNX_FILENAME

    if not (settings.models_dir / ONNX_FILENAME).is_file():
        pytest.skip("run `vidagent models install efficientnet-lite0`")
    with_kinds = replace(settings, home=tmp_path, perception=frozenset({"imagenet"}))
    suite = Perception.from_settings(with_kinds)
    try:
        with Library(with_kinds.library_path) as library:
            builder = MemoryBuilder(library, suite, with_kinds)
            assert "classifier" in builder.stage("objects").config()
            builder.build(Video(video_path(SKATEBOARD)), ["objects"], progress=False)
        appearances = {row[0]: row[1] for row in _query(with_kinds.library_path, SKATEBOARD,
                                                         "SELECT category, appearance FROM objects")}
    finally:
        suite.close()
    assert "(Border collie?)" in appearances["dog"]


# -- pure parts: no model, no clip ---------------------------------------------------------------------------


def _measured(count: int, dim: int = 4):
    found = make_detections([[10 * i, 5, 10 * i + 8, 25.5] for i in range(count)], [0.61234 - 0.1 * i for i in range(count)],
                            [16] * count, ["dog"] * count)
    features = np.arange(count * dim, dtype=np.float32).reshape(count, dim) / 7
    return with_data(found, **{stage.FEATURE: features, stage.COLOUR: ["white"] * count,
                               stage.KIND: (["Border collie?"] + [""] * count)[:count]})


def test_a_frame_checkpoint_keeps_what_the_stage_measured():
    measured = _measured(3)
    saved = stage._checkpoint(measured, np.zeros((48, 64, 3), np.uint8))
    assert saved["size"] == [64, 48] and saved["labels"] == ["dog"] * 3 and saved["scores"][0] == 0.6123
    back = stage._from_checkpoint(saved, 4)
    assert class_names(back) == ["dog"] * 3 and back.tracker_id is None
    np.testing.assert_allclose(back.xyxy, measured.xyxy)
    np.testing.assert_allclose(back.data[stage.FEATURE], measured.data[stage.FEATURE], rtol=1e-3)  # float16
    assert back.data[stage.KIND].tolist() == ["Border collie?", "", ""]
    empty = stage._from_checkpoint(stage._checkpoint(_measured(0), np.zeros((8, 8, 3), np.uint8)), 4)
    assert len(empty) == 0 and empty.data[stage.FEATURE].shape == (0, 4)


def test_unsure_single_sightings_lose_their_track():
    seen = _measured(3)
    seen.tracker_id = np.array([0, 1, 1])  # track 0: seen once at 0.61 (kept); track 1 twice
    assert stage._drop_unsure_single_sightings(seen).tracker_id.tolist() == [0, 1, 1]
    seen.tracker_id = np.array([1, 0, 1])  # track 0: seen once at 0.51 (dropped)
    assert stage._drop_unsure_single_sightings(seen).tracker_id.tolist() == [1, -1, 1]
    nothing = stage._merge([], 4)
    assert len(nothing) == 0 and nothing.tracker_id.shape == (0,) and nothing.data[stage.FEATURE].shape == (0, 4)
