"""Real clips for the object-memory component tests: decoded, detected and tracked once per run.

The tracking, appearance, re-ID and object-summary tests share these results through the
module-level caches below (the detector costs ~0.2 s per frame). Frames are sampled at 2 fps with
the longer side at most 768 pixels, as the objects stage does.

What the clips show (checked by eye on frames with the boxes and track ids drawn):

* ``github_sam2/01_dog.mp4``: one woman (white top, jeans) on the left throughout; one white and
  brown dog, detected 0.25-0.75 s, missed while it leaps (1.25-1.75 s, 2.75-3.25 s), then
  2.25-9.25 s: three tracks of the one dog.
* ``github_Video-LLaMA/skateboarding_dog.mp4``: one black-and-white dog on a skateboard; the
  detector misses it or calls it "person" in 4 of 28 frames.
* ``github_Ask-Anything/hitting_baseball.mp4``: a boy in a white shirt at the left edge and a
  batter in grey, both in every frame (the camera pans at ~3 s); a coach and children in the
  background are detected with low scores only.
* ``github_VideoAgent/boats.mp4``: two large sailboats, grey sails on the left, white sails on the
  right, both in view throughout; tiny people on them.
* ``github_InternVideo/example1.mp4``: a man in a dark coat and a yellow dog in snow; the detector
  often calls the crouching man "dog" (0.75-3.25 s, and at 7.75 s), and once boxes man and dog
  together as "person" (1.25 s); from 5.25 s the camera turns to the dog alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pytest
import supervision as sv

from conftest import video_path
from vidagent.config import Settings
from vidagent.perception.detections import class_names
from vidagent.perception.detector import CenterNetDetector
from vidagent.perception.node_assets import detector_assets_installed
from vidagent.perception.tracking import ByteTracker
from vidagent.video.video import Video

FPS = 2.0
MAX_SIDE = 768
DOG01 = "github_sam2/01_dog.mp4"
SKATE = "github_Video-LLaMA/skateboarding_dog.mp4"
BASEBALL = "github_Ask-Anything/hitting_baseball.mp4"
BOATS = "github_VideoAgent/boats.mp4"
SNOW = "github_InternVideo/example1.mp4"
CLIPS = (DOG01, SKATE, BASEBALL, BOATS, SNOW)


@dataclass(frozen=True)
class TrackedDetection:
    frame: int  # index into the clip's sampled frames
    time_s: float
    label: str
    score: float
    box: tuple[float, float, float, float]
    track_id: int


@dataclass(frozen=True)
class Clip:
    path: str
    times: tuple[float, ...]
    images: tuple[np.ndarray, ...]
    detections: tuple[sv.Detections, ...]
    duration_s: float

    @property
    def width(self) -> int:
        return int(self.images[0].shape[1])

    @property
    def height(self) -> int:
        return int(self.images[0].shape[0])

    def crop(self, frame: int, box: tuple[float, float, float, float]) -> np.ndarray:
        """The box's pixels, as the objects stage cuts them (floor/ceil, clipped to the frame)."""
        image = self.images[frame]
        h, w = image.shape[:2]
        x1, y1, x2, y2 = box
        left, top = int(np.clip(math.floor(x1), 0, w - 1)), int(np.clip(math.floor(y1), 0, h - 1))
        right = int(np.clip(math.ceil(x2), left + 1, w))
        bottom = int(np.clip(math.ceil(y2), top + 1, h))
        return image[top:bottom, left:right]


_detector: CenterNetDetector | None = None


@lru_cache(maxsize=None)
def clip(relative: str) -> Clip:
    """The clip's frames at 2 fps and the CenterNet detections in them (skips without assets)."""
    global _detector
    models_dir = Settings.from_env().models_dir
    if not detector_assets_installed(models_dir):
        pytest.skip(f"CenterNet detector assets not installed in {models_dir}")
    video = Video(video_path(relative))
    frames = list(video.sample(FPS, max_side=MAX_SIDE))
    if _detector is None:
        _detector = CenterNetDetector(models_dir)
    detections = _detector.detect([f.image for f in frames])
    return Clip(relative, tuple(f.time_s for f in frames), tuple(f.image for f in frames),
                tuple(detections), video.duration_s)


def close_detector() -> None:
    global _detector
    if _detector is not None:
        _detector.close()
        _detector = None


@lru_cache(maxsize=None)
def tracked(relative: str) -> tuple[TrackedDetection, ...]:
    """Every detection of the clip with its ``ByteTracker`` id (defaults, 2 fps, no timestamps)."""
    c = clip(relative)
    tracker = ByteTracker(FPS)
    out = []
    for frame, (time_s, dets) in enumerate(zip(c.times, c.detections)):
        found = tracker.update(dets)
        for box, label, score, track_id in zip(found.xyxy, class_names(found), found.confidence, found.tracker_id):
            out.append(TrackedDetection(frame, time_s, label, float(score),
                                        tuple(float(v) for v in box), int(track_id)))
    return tuple(out)


def tracks(relative: str, label: str | None = None) -> dict[int, list[TrackedDetection]]:
    """Tracked detections by track id (ids >= 0), optionally of one label, in time order."""
    out: dict[int, list[TrackedDetection]] = {}
    for d in tracked(relative):
        if d.track_id >= 0 and (label is None or d.label == label):
            out.setdefault(d.track_id, []).append(d)
    return out
