"""Multi-object tracking of detections in sparsely sampled frames: ByteTrack, one per class.

``ByteTracker`` implements the ``Tracker`` protocol on ``trackers.ByteTrackTracker`` (2.6.1): it
takes a frame's ``sv.Detections`` and returns them, in their order, with ``tracker_id`` set. VideoAgent runs ByteTrack on every frame; here detections
come from frames sampled at 1-4 per second (2 by default), so objects move far between samples
and the detector (CenterNet, scores mostly 0.35-0.8) misses objects for a sample or two. The
parameters follow from that:

* **One ByteTrack per class.** ByteTrack itself is class-agnostic; a dog box would continue a
  person track whenever the boxes overlap (a man crouching next to his dog). Each class gets its
  own tracker; all of them draw ids from one counter, so ids are unique per video.
* **Ids from the first sighting.** ByteTrack hands out an id only when a track is matched in a
  second frame, which at 2 fps loses the first half second of every object (and every object
  seen once). Here a new track gets its id at birth: false positives become short tracks, which
  the object memory can drop by length and score, instead of real first sightings being lost.
  The library has no option for that, so after each update the tracks it started in that frame
  (the members of its documented ``tracks`` list, ``TrackletProtocol``, still without an id) are
  found by their box, which is their detection's box, and given the next id of the video.
* **Buffered IoU for association** (``BIoU``: each box grown by ``buffer_ratio`` = 0.5 of its
  width/height on every side before the IoU; a match needs ``min_iou`` = 0.1). Half a second
  apart, a running dog's boxes often barely overlap or not at all, and the Kalman prediction
  overshoots when it turns (``01_dog.mp4``, 4.25 s -> 4.75 s; 6.25 s -> 6.75 s). With these values
  a box still matches a prediction of its size whose centre is up to ~1.6 box widths away; two
  objects of one class side by side are kept apart by the Hungarian assignment (each box goes to
  its best track). A larger
  buffer (1.0) bridged one more turn of that dog but lets a track jump further when its object is
  missed; breaks are cheaper than wrong links (re-ID below mends breaks, nothing mends a link).
* **Confident from 0.45.** ByteTrack's defaults (0.6 to be "high" confidence, 0.7 to start a
  track) suit detectors whose true positives score ~0.9. CenterNet's real objects score
  0.35-0.8, so the defaults would leave most objects untracked. Here detections >= 0.45 match
  first and may start tracks; those between the detector's threshold (0.3) and 0.45 only extend
  existing tracks (ByteTrack's second stage), which keeps clutter from starting tracks.
* **Lost-track buffer in seconds** (``lost_track_s`` = 1.5: 3 samples at 2 fps). The detector
  misses objects for one or two samples (motion blur, odd poses, a label flip), which the buffer
  bridges (the skateboarding dog stays one track for 14 s through 4 misses). Longer gaps are
  left to re-ID (``vidagent.memory.reid``), which merges broken tracks safely, whereas a track
  kept alive too long can swallow a different object. The library counts its buffer in frames
  of a 30 fps video; it is converted here from seconds and the sampling rate
  (``ceil(sample_fps * lost_track_s)`` sampled frames, or the same seconds when ``update`` gets
  timestamps).

Known limit: ByteTrack has no appearance cue, so when the detector gives the same class to two
different objects (a crouching man called "dog" next to a dog), a track can jump from one to the
other when one of them is missed or the camera turns.

Speed: ~0.5-1 ms per sampled frame with a handful of classes on 2 shared cores.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:  # imported where a tracker is made: trackers and supervision take 0.3 s to import, and a
    import supervision as sv  # question answered from a glance tracks nothing
    from trackers import ByteTrackTracker

DEFAULT_SAMPLE_FPS = 2.0
DEFAULT_LOST_TRACK_S = 1.5
DEFAULT_MIN_IOU = 0.1
DEFAULT_BUFFER_RATIO = 0.5
DEFAULT_HIGH_CONFIDENCE = 0.45
DEFAULT_ACTIVATION = 0.45
_LIBRARY_FPS = 30.0  # trackers counts its lost-track buffer in frames of a 30 fps video
_ROW = "vidagent_row"  # data key that carries each detection's row through the library


class ByteTracker:
    """Links detections of consecutive sampled frames into tracks, one ByteTrack per class.

    Call ``update`` once per sampled frame, in time order (frames without detections too: lost
    tracks age by frames). It returns the frame's detections with a ``tracker_id`` each, ``-1`` for
    detections that neither continue a track nor are confident enough to start one. Ids are unique within a video
    (across classes) and start at 0; ``reset()`` before the next video.
    """

    NAME = (f"bytetrack-per-class-biou{DEFAULT_BUFFER_RATIO:g}-iou{DEFAULT_MIN_IOU:g}"
            f"-conf{DEFAULT_HIGH_CONFIDENCE:g}-start{DEFAULT_ACTIVATION:g}-lost{DEFAULT_LOST_TRACK_S:g}s")
    """The name of a tracker with the default parameters (``name`` holds the actual ones)."""

    def __init__(self, sample_fps: float = DEFAULT_SAMPLE_FPS, *,
                 lost_track_s: float = DEFAULT_LOST_TRACK_S, min_iou: float = DEFAULT_MIN_IOU,
                 buffer_ratio: float = DEFAULT_BUFFER_RATIO,
                 high_confidence: float = DEFAULT_HIGH_CONFIDENCE,
                 activation: float = DEFAULT_ACTIVATION, per_class: bool = True) -> None:
        if sample_fps <= 0 or not math.isfinite(sample_fps):
            raise ValueError("sample_fps must be a positive number")
        if lost_track_s < 0:
            raise ValueError("lost_track_s must be >= 0")
        if activation < high_confidence:
            raise ValueError("activation must be >= high_confidence (only confident boxes start tracks)")
        self.sample_fps = float(sample_fps)
        self.lost_track_s = float(lost_track_s)
        self.min_iou = float(min_iou)
        self.buffer_ratio = float(buffer_ratio)
        self.high_confidence = float(high_confidence)
        self.activation = float(activation)
        self.per_class = per_class
        self.name = (f"bytetrack-{'per-class' if per_class else 'any-class'}-biou{buffer_ratio:g}"
                     f"-iou{min_iou:g}-conf{high_confidence:g}-start{activation:g}-lost{lost_track_s:g}s")
        self._trackers: dict[int, ByteTrackTracker] = {}
        self._next_id = 0
        self._timestamped: bool | None = None

    @property
    def lost_track_frames(self) -> int:
        """How many consecutive sampled frames a track may go unmatched before it ends."""
        return math.ceil(self.sample_fps * self.lost_track_s - 1e-9) if self.lost_track_s else 0

    def _new_tracker(self) -> ByteTrackTracker:
        from trackers import ByteTrackTracker
        from trackers.utils.iou import BIoU

        return ByteTrackTracker(
            lost_track_buffer=round(self.lost_track_s * _LIBRARY_FPS),
            frame_rate=self.sample_fps,
            track_activation_threshold=self.activation,
            minimum_consecutive_frames=1,
            minimum_iou_threshold=self.min_iou,
            high_conf_det_threshold=self.high_confidence,
            iou=BIoU(self.buffer_ratio),
        )

    def update(self, detections: sv.Detections, time_s: float | None = None) -> sv.Detections:
        """The next sampled frame's detections, in their order, with ``tracker_id`` set (int64,
        ``-1`` = untracked); the detections given are left as they were.

        ``time_s`` (seconds) is optional; give it for every frame or for none. With times, gaps
        between samples may vary and the lost-track buffer counts seconds.
        """
        stamped = time_s is not None
        if self._timestamped is None:
            self._timestamped = stamped
        elif self._timestamped != stamped:
            raise ValueError("give time_s to every update of a video or to none")
        n = len(detections)
        ids = np.full(n, -1, np.int64)
        class_id = detections.class_id if detections.class_id is not None else np.zeros(n)
        classes = np.asarray(class_id, np.int64) if self.per_class else np.zeros(n, np.int64)
        for cls in sorted(set(classes.tolist()) | set(self._trackers)):
            tracker = self._trackers.get(cls)
            if tracker is None:
                tracker = self._trackers[cls] = self._new_tracker()
            index = np.flatnonzero(classes == cls)
            ids[index] = self._update_one(tracker, detections, index, time_s)
        return dataclasses.replace(detections, tracker_id=ids, data=dict(detections.data))

    def _update_one(self, tracker: ByteTrackTracker, detections: sv.Detections, index: np.ndarray,
                    time_s: float | None) -> np.ndarray:
        """Track ids of the detections at ``index`` (one class) from that class's tracker."""
        boxes = np.asarray(detections.xyxy, np.float64).reshape(-1, 4)[index]
        scores = np.asarray(detections.confidence, np.float64)[index]
        import supervision as sv

        result = tracker.update(sv.Detections(xyxy=boxes, confidence=scores, data={_ROW: np.arange(len(index))}),
                                timestamp=time_s)
        ids = np.full(len(index), -1, np.int64)
        rows = np.asarray(result.data.get(_ROW, np.zeros(0)), np.int64)
        ids[rows] = np.asarray(result.tracker_id, np.int64)
        # Tracks born in this frame have no id yet: each started at its detection's box.
        newborn = [track for track in tracker.tracks if track.tracker_id == -1]
        unclaimed = [int(row) for row in rows[ids[rows] == -1] if scores[row] >= self.activation]
        for track in newborn:
            state = track.get_state_bbox()
            row = next((r for r in unclaimed if np.allclose(state, boxes[r], atol=1e-3)), None)
            if row is None:
                raise RuntimeError("a new track does not start at a detection of its frame: "
                                   "incompatible trackers version")
            unclaimed.remove(row)
            track.tracker_id = ids[row] = self._next_id
            self._next_id += 1
        return ids

    def reset(self) -> None:
        """Forget all tracks; ids start at 0 again (call between videos)."""
        self._trackers.clear()
        self._next_id = 0
        self._timestamped = None


def track_frames(tracker: ByteTracker, detections: Sequence[sv.Detections],
                 times_s: Sequence[float] | None = None) -> list[sv.Detections]:
    """Run ``tracker`` (after a reset) over one video's per-frame detections, in order."""
    tracker.reset()
    if times_s is None:
        return [tracker.update(d) for d in detections]
    if len(times_s) != len(detections):
        raise ValueError("one time per frame of detections")
    return [tracker.update(d, float(t)) for d, t in zip(detections, times_s)]
