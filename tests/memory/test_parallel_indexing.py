"""Indexing on every core: the detector pool, the shared detection cache, near-duplicate frames
and the frame-stage pipeline, on the real models and real clips."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conftest import frame_at, write_test_video
from vidagent.config import Settings
from vidagent.memory.builder import MemoryBuilder
from vidagent.memory.store import Library
from vidagent.perception.caching import CachingDetector
from vidagent.perception.detections import class_names
from vidagent.perception.detections import class_names
from vidagent.perception.detector import CenterNetDetector
from vidagent.perception.node_assets import detector_assets_installed
from vidagent.perception.detector_pool import DetectorPool
from vidagent.perception.suite import Perception
from vidagent.video.change import ChangeLimits, difference, same_view, thumbnail
from vidagent.video.video import Video

MODELS_DIR = Settings.from_env().models_dir
needs_models = pytest.mark.skipif(not detector_assets_installed(MODELS_DIR),
                                  reason="offline models are not installed (run `vidagent models install`)")


# ----------------------------------------------------------------------------- change test


def test_same_view_ignores_noise_but_sees_a_small_moving_object():
    rng = np.random.default_rng(0)
    base = rng.integers(40, 200, (360, 640, 3), dtype=np.uint8)
    noisy = np.clip(base.astype(np.int16) + rng.integers(-3, 4, base.shape), 0, 255).astype(np.uint8)
    moved = base.copy()
    moved[150:190, 300:340] = 255  # a 40x40 white square appears (a ball, a hand)
    limits = ChangeLimits()
    assert same_view(thumbnail(base), thumbnail(base), limits)
    assert same_view(thumbnail(base), thumbnail(noisy), limits)
    assert not same_view(thumbnail(base), thumbnail(moved), limits)
    mean, cell = difference(thumbnail(base), thumbnail(moved))
    assert mean < limits.mean < cell  # the whole-frame mean alone would have missed it
    assert difference(thumbnail(base), thumbnail(base[:, :320]))[0] == float("inf")


# ----------------------------------------------------------------------------- detector pool


@pytest.mark.models
@needs_models
def test_pool_spreads_frames_over_workers_and_finds_what_one_worker_finds():
    frames = [frame_at("github_sam2/01_dog.mp4", t) for t in (0.5, 2.0, 4.0, 6.0, 8.0)]
    with CenterNetDetector(MODELS_DIR) as single:
        expected = single.detect(frames)
    pool = DetectorPool(lambda: CenterNetDetector(MODELS_DIR), 2)
    try:
        assert pool.name == CenterNetDetector.name
        found = pool.detect(frames)
        assert len(pool._copies.made()) == 2  # both copies ran
        for mine, theirs in zip(found, expected):
            assert class_names(mine) == class_names(theirs)
            np.testing.assert_allclose(mine.xyxy, theirs.xyxy, atol=1e-3)
        # two callers at once (two stages) share the copies and each gets its own frames' results
        answers: dict[int, list] = {}
        callers = [threading.Thread(target=lambda k=k: answers.__setitem__(k, pool.detect(frames[k:k + 3])))
                   for k in (0, 2)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join()
        assert [class_names(d) for d in answers[0]] == [class_names(d) for d in expected[0:3]]
        assert [class_names(d) for d in answers[2]] == [class_names(d) for d in expected[2:5]]
    finally:
        pool.close()


@pytest.mark.models
@needs_models
def test_cache_runs_the_model_once_per_frame_when_threads_ask_together():
    frames = [frame_at("github_VideoAgent/boats.mp4", t) for t in (1.0, 5.0, 9.0)]
    cache = CachingDetector(DetectorPool(lambda: CenterNetDetector(MODELS_DIR), 2))
    try:
        results: list[list] = [[], []]
        callers = [threading.Thread(target=lambda i=i: results[i].extend(cache.detect(frames))) for i in (0, 1)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join()
        assert cache.misses == 3 and cache.hits == 3
        assert [class_names(d) for d in results[0]] == [class_names(d) for d in results[1]]
    finally:
        cache.close()


# ----------------------------------------------------------------------------- near-duplicates in a build


@pytest.fixture(scope="module")
def perception():
    if not detector_assets_installed(MODELS_DIR):
        pytest.skip("offline models are not installed")
    suite = Perception.offline(Settings.from_env())
    yield suite
    suite.close()


def _static_video(path: Path) -> Path:
    """4 s of one still frame of the dog clip, then 2 s of another (10 fps)."""
    first, second = frame_at("github_sam2/01_dog.mp4", 1.0), frame_at("github_sam2/01_dog.mp4", 7.0)
    small = [np.ascontiguousarray(image[::2, ::2]) for image in (first, second)]
    return write_test_video(path, [small[0]] * 40 + [small[1]] * 20, fps=10)


def _tables(library: Library, video_id: str) -> dict[str, list]:
    return {table: library.rows(f"SELECT * FROM {table} WHERE video_id=? ORDER BY 2, 3", (video_id,))
            for table in ("frames", "text_in_frame", "detections", "tracks", "objects", "object_segments")}


def test_near_duplicate_frames_reuse_results_and_leave_the_tables_as_they_were(tmp_path, perception):
    video = Video(_static_video(tmp_path / "still.mp4"))
    tables = {}
    for reuse in (False, True):
        settings = replace(Settings.from_env(), home=tmp_path / str(reuse), reuse_near_duplicates=reuse)
        detector: CachingDetector = perception.detector  # type: ignore[assignment]
        detector.clear()
        misses = detector.misses
        with Library(settings.library_path) as library:
            MemoryBuilder(library, perception, settings).build(video, ("frames", "objects"), progress=False)
            tables[reuse] = _tables(library, video.content_hash)
        ran = detector.misses - misses
        assert ran == (4 if reuse else 12)  # each stage's first look at each still; else every sampled frame
    assert tables[True]["objects"] and tables[True]["frames"]
    for table in ("text_in_frame", "tracks", "object_segments"):
        assert tables[True][table] == tables[False][table], table
    # frames: the same words and objects; their boxes and scores (stored as facts) jitter as detections do
    def seen(rows):
        return [(*row[:5], row[6:], [(o["label"], o["colour"], o["kind"], o["pose"]) for o in json.loads(row[5])])
                for row in rows]
    assert seen(tables[True]["frames"]) == seen(tables[False]["frames"])
    # the stills decode to nearly (not bit-) identical frames: the same objects; boxes move no more
    # than the detector's own jitter between two decodes of one still (seen: 7 px of 640)
    reused, fresh = tables[True]["detections"], tables[False]["detections"]
    assert [(row[2], row[4], row[14]) for row in reused] == [(row[2], row[4], row[14]) for row in fresh]
    np.testing.assert_allclose([row[6:10] for row in reused], [row[6:10] for row in fresh], atol=8)
    assert [row[1:6] for row in tables[True]["objects"]] == [row[1:6] for row in tables[False]["objects"]]
