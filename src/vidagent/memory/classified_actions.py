"""Actions a video classifier (VideoMAE or X-CLIP on Kinetics) names for each person of the memory.

A person is looked at segment by segment (``segment_seconds``, 2 s): where it was sighted at least
twice in a segment, ``classifier.num_frames`` frames spread evenly from its first to its last sighting
there are cut to the union of its boxes in that segment (grown by ``CROP_MARGIN``), and the classifier
names the clip. Its likeliest label becomes an action when its probability reaches ``MIN_SCORE``, and
the same label in consecutive segments is one span. Frames are decoded in one pass and kept only as
crops (at most ``CROP_SIDE`` pixels a side).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Sequence

import cv2
import numpy as np

from vidagent.memory.actions import CLASSIFIER, Action, ObjectSightings
from vidagent.perception.base import VideoClassifier
from vidagent.video.pixels import crop_box
from vidagent.video.video import Video

log = logging.getLogger(__name__)

# Kinetics-400 heads spread their probability over 400 classes: a label at 0.3 is a clear winner.
MIN_SCORE = 0.3
CROP_MARGIN = 0.1
CROP_SIDE = 256
BATCH = 4


@dataclass(frozen=True)
class _Window:
    object_id: int
    start_s: float
    end_s: float
    box: tuple[float, float, float, float]
    times: tuple[float, ...]


def classified_actions(video: Video, tracks: Sequence[ObjectSightings], classifier: VideoClassifier,
                       segment_seconds: float) -> list[Action]:
    """The classifier's actions of every person track (module doc)."""
    windows = person_windows(tracks, segment_seconds, classifier.num_frames, video.info.width, video.info.height)
    if not windows:
        return []
    wanted: dict[float, list[tuple[int, int]]] = defaultdict(list)  # time -> (window, frame index)
    for w, window in enumerate(windows):
        for f, time_s in enumerate(window.times):
            wanted[round(time_s, 3)].append((w, f))
    clips: list[list[np.ndarray | None]] = [[None] * len(window.times) for window in windows]
    for frame in video.frames_at(sorted(wanted)):
        for w, f in wanted[round(frame.time_s, 3)]:
            clips[w][f] = _small(crop_box(frame.image, windows[w].box))
    labels = []
    for start in range(0, len(windows), BATCH):
        batch = [[image for image in clip if image is not None] for clip in clips[start:start + BATCH]]
        labels += classifier.classify(batch, top_k=1)
    found: list[Action] = []
    for window, guesses in zip(windows, labels):
        if not guesses or guesses[0].score < MIN_SCORE:
            continue
        verb, score = guesses[0].name.strip().lower(), float(guesses[0].score)
        last = found[-1] if found else None
        if last is not None and last.object_id == window.object_id and last.verb == verb \
                and window.start_s - last.end_s <= segment_seconds:
            found[-1] = Action(last.object_id, verb, last.start_s, window.end_s, CLASSIFIER, max(last.confidence, score))
        else:
            found.append(Action(window.object_id, verb, window.start_s, window.end_s, CLASSIFIER, score))
    log.info("video classifier %s: %d actions from %d person clips", classifier.name, len(found), len(windows))
    return found


def person_windows(tracks: Sequence[ObjectSightings], segment_seconds: float, num_frames: int, width: int,
                   height: int) -> list[_Window]:
    """The clips to classify: per person and segment with two sightings or more, in time order per person."""
    windows = []
    for track in tracks:
        if not track.is_person:
            continue
        by_segment: dict[int, list] = defaultdict(list)
        for sighting in track.sightings:
            by_segment[int(sighting.time_s // segment_seconds)].append(sighting)
        for segment in sorted(by_segment):
            seen = sorted(by_segment[segment], key=lambda s: s.time_s)
            if len(seen) < 2:
                continue
            boxes = np.array([s.box for s in seen], np.float64)
            x1, y1 = boxes[:, 0].min(), boxes[:, 1].min()
            x2, y2 = boxes[:, 2].max(), boxes[:, 3].max()
            mx, my = CROP_MARGIN * (x2 - x1), CROP_MARGIN * (y2 - y1)
            box = (max(0.0, x1 - mx), max(0.0, y1 - my), min(float(width), x2 + mx), min(float(height), y2 + my))
            times = tuple(float(t) for t in np.linspace(seen[0].time_s, seen[-1].time_s, num_frames))
            windows.append(_Window(track.object_id, seen[0].time_s, seen[-1].time_s, box, times))
    return windows


def _small(image: np.ndarray) -> np.ndarray:
    side = max(image.shape[:2])
    if side <= CROP_SIDE:
        return np.ascontiguousarray(image)
    scale = CROP_SIDE / side
    size = (max(1, round(image.shape[1] * scale)), max(1, round(image.shape[0] * scale)))
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA)
