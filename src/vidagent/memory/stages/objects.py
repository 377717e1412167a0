"""Stage ``objects``: the space-dominant memory (DoraemonGPT) / object memory (VideoAgent).

Frames sampled at ``Settings.object_fps`` go through the detector; every detection's crop gets
appearance features, a colour word and, with an image classifier on, its ImageNet kind when the
classifier is sure (per frame, checkpointed). When all frames are done the
tracker links detections into tracks, tracks are re-identified into objects with VideoAgent's
grouping algorithm, and each object gets a trajectory, the segments it appears in, an appearance
and a motion description (the appearance names the kind most of its sightings were guessed as), and
a text embedding of those for open-vocabulary retrieval.
"""

from __future__ import annotations

import base64
import bisect
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from vidagent.config import Settings
from vidagent.memory.object_summary import describe_appearance, describe_motion
from vidagent.memory.reid import TrackSummary, group_tracks
from vidagent.memory.stages.base import Rows
from vidagent.memory.store import Library
from vidagent.perception.base import Detections
from vidagent.perception.colour import central_region, colour_name
from vidagent.perception.describer import kind_note, square_crop
from vidagent.perception.suite import Perception
from vidagent.video.change import ChangeLimits
from vidagent.video.pixels import crop_box
from vidagent.video.video import SampledFrame, Video

MAX_OBJECT_FRAMES = 1800  # longer videos are sampled more sparsely (an hour: one frame per 2 s)
OBJECT_MAX_SIDE = 768
# The classifier is sure of a crop's kind in a minority of sightings (the skateboarding dog: "Border collie"
# in 6 of 26, "schipperke" once, unsure in 19; its skateboard "stretcher" in 2 of 30): a kind is named when
# it comes up often and the sure guesses agree.
MIN_KIND_SHARE = 0.2
MIN_KIND_AGREEMENT = 0.6
MIN_CROP_PIXELS = 8  # crops thinner than this get no features (their row is zeros)
# A track seen in one sampled frame only is mostly a false detection (e.g. the skateboarding dog
# labelled "person" for one frame): it becomes an object only when the detector was this sure.
MIN_SINGLE_SIGHTING_SCORE = 0.6


@dataclass(frozen=True)
class _Detection:
    detection_id: int
    time_s: float
    box: tuple[float, float, float, float]  # display pixels
    score: float
    category: str
    colour: str
    feature: np.ndarray
    track_id: int | None
    kind: str = ""  # the ImageNet guess for its crop ("Border collie?"), when a classifier is on and sure


class ObjectsStage:
    name = "objects"
    requires: tuple[str, ...] = ()
    max_side = OBJECT_MAX_SIDE
    batch_size = 8

    def __init__(self, perception: Perception, settings: Settings, *, reuse: ChangeLimits | None = None) -> None:
        self.perception = perception
        self.settings = settings
        self.reuse = reuse  # a frame that looks like the last detected one reuses its detections

    def config(self) -> dict[str, Any]:
        return {
            "detector": self.perception.detector.name,
            "appearance": self.perception.appearance.name,
            "tracker": self.perception.tracker_name,
            "fps": self.settings.object_fps,
            "max_frames": MAX_OBJECT_FRAMES,
            "min_single_sighting_score": MIN_SINGLE_SIGHTING_SCORE,
            "embedder": self.perception.embedder.name,
            "segment_seconds": self.settings.segment_seconds,
            **({"reuse_near_duplicates": self.reuse.config()} if self.reuse else {}),
            **({"classifier": self.perception.classifier.name} if self.perception.classifier else {}),
        }

    def sampling_fps(self, video: Video) -> float:
        return min(self.settings.object_fps, MAX_OBJECT_FRAMES / max(video.duration_s, 1e-6))

    def frame_times(self, video: Video) -> list[float]:
        fps = self.sampling_fps(video)
        count = max(1, math.ceil(video.duration_s * fps - 1e-9))
        return [round(i / fps, 3) for i in range(count)]

    # -- per frame ------------------------------------------------------------------------
    def process(self, frames: Sequence[SampledFrame]) -> list[Any]:
        all_detections = self.perception.detector.detect([frame.image for frame in frames])
        out = []
        for frame, detections in zip(frames, all_detections):
            image = frame.image
            crops = [crop_box(image, box) for box in detections.boxes]
            usable = [i for i, crop in enumerate(crops) if min(crop.shape[:2]) >= MIN_CROP_PIXELS]
            features = np.zeros((len(crops), self.perception.appearance.dim), np.float32)
            if usable:
                features[usable] = self.perception.appearance.features([crops[i] for i in usable])
            kinds = self._kinds(image, detections.boxes, detections.labels)
            out.append({
                **({"kinds": kinds} if kinds is not None else {}),
                "size": [int(image.shape[1]), int(image.shape[0])],
                "boxes": [[round(float(v), 2) for v in box] for box in detections.boxes],
                "scores": [round(float(s), 4) for s in detections.scores],
                "class_ids": [int(c) for c in detections.class_ids],
                "labels": list(detections.labels),
                "colours": [colour_name(central_region(image, box).reshape(-1, 3)) for box in detections.boxes],
                "features": base64.b64encode(features.astype(np.float16).tobytes()).decode("ascii"),
            })
        return out

    def _kinds(self, image: np.ndarray, boxes: np.ndarray, labels: Sequence[str]) -> list[str] | None:
        """Each detection's ImageNet kind ("" where unsure), or None without a classifier."""
        classifier = self.perception.classifier
        if classifier is None:
            return None
        crops = [square_crop(image, box) for box in boxes]
        usable = [i for i, crop in enumerate(crops) if min(crop.shape[:2]) >= MIN_CROP_PIXELS]
        kinds = [""] * len(crops)
        for i, labels_of_crop in zip(usable, classifier.classify([crops[i] for i in usable], top_k=1)):
            kinds[i] = kind_note(labels[i], labels_of_crop)
        return kinds

    # -- all frames -----------------------------------------------------------------------
    def finish(self, video: Video, library: Library, results: Mapping[float, Any]) -> Rows:
        detections = self._track(video, results)
        by_track: dict[int, list[_Detection]] = defaultdict(list)
        for d in detections:
            if d.track_id is not None:
                by_track[d.track_id].append(d)
        track_category = {track_id: _majority(d.category for d in members) for track_id, members in by_track.items()}
        groups = self._reidentify(by_track, track_category)
        object_of_track = {track: object_id for object_id, group in enumerate(groups) for track in group}
        segment_ends = [segment.end_s for segment in video.segments(self.settings.segment_seconds)]
        width, height = video.info.width, video.info.height

        detection_rows = []
        for d in detections:
            x1, y1, x2, y2 = d.box
            object_id = object_of_track.get(d.track_id) if d.track_id is not None else None
            detection_rows.append((
                d.detection_id, d.time_s, _segment_at(segment_ends, d.time_s), d.category, d.score, x1, y1, x2, y2,
                round((x1 + x2) / 2 / width, 4), round((y1 + y2) / 2 / height, 4),
                round((x2 - x1) * (y2 - y1) / (width * height), 5), d.track_id, object_id, None,
            ))

        track_rows = []
        for track_id, members in sorted(by_track.items()):
            times = sorted({d.time_s for d in members})
            track_rows.append((track_id, object_of_track[track_id], track_category[track_id],
                               times[0], times[-1], len(times)))

        object_rows, segment_rows, documents = [], [], []
        for object_id, group in enumerate(groups):
            members = sorted((d for track in group for d in by_track[track]), key=lambda d: d.time_s)
            category = _majority(d.category for d in members)
            times = sorted({d.time_s for d in members})
            trajectory = [(d.time_s, d.box) for d in members]
            appearance = describe_appearance(category, [d.colour for d in members],
                                             [d.box for d in members], width, height,
                                             kind=_kind_of(d.kind for d in members))
            motion = describe_motion(trajectory, width, height, duration_s=video.duration_s)
            description = f"{appearance}; {motion}"
            feature = np.mean([d.feature for d in members], axis=0).astype(np.float32)
            norm = float(np.linalg.norm(feature))
            object_rows.append([object_id, category, times[0], times[-1], len(times), appearance, motion,
                                description, (feature / norm if norm else feature).tobytes()])
            documents.append(description)
            per_segment: dict[int, list[float]] = defaultdict(list)
            for time_s in times:
                per_segment[_segment_at(segment_ends, time_s)].append(time_s)
            for segment_id, seen in sorted(per_segment.items()):
                segment_rows.append((object_id, segment_id, seen[0], seen[-1], len(seen)))
        embeddings = self.perception.embedder.embed_passages(documents) if documents else []
        objects = [(*row[:8], np.asarray(vector, np.float32).tobytes(), row[8])
                   for row, vector in zip(object_rows, embeddings)]
        return {"detections": detection_rows, "tracks": track_rows, "objects": objects,
                "object_segments": segment_rows}

    def _track(self, video: Video, results: Mapping[float, Any]) -> list[_Detection]:
        tracker = self.perception.new_tracker(self.sampling_fps(video))
        dim = self.perception.appearance.dim
        detections: list[_Detection] = []
        for time_s in sorted(results):
            result = results[time_s]
            frame_w, frame_h = result["size"]
            scale_x, scale_y = video.info.width / frame_w, video.info.height / frame_h
            count = len(result["labels"])
            boxes = np.asarray(result["boxes"], np.float32).reshape(count, 4)
            frame_detections = Detections(boxes, np.asarray(result["scores"], np.float32),
                                          np.asarray(result["class_ids"], np.int32), tuple(result["labels"]))
            track_ids = tracker.update(frame_detections, float(time_s))  # empty frames too: lost tracks age
            features = np.frombuffer(base64.b64decode(result["features"]), np.float16).astype(np.float32)
            features = features.reshape(count, dim)
            kinds = result.get("kinds") or [""] * count
            for i in range(count):
                x1, y1, x2, y2 = (float(v) for v in boxes[i])
                track = int(track_ids[i])
                detections.append(_Detection(
                    len(detections), float(time_s),
                    (round(x1 * scale_x, 1), round(y1 * scale_y, 1), round(x2 * scale_x, 1), round(y2 * scale_y, 1)),
                    float(result["scores"][i]), result["labels"][i], result["colours"][i], features[i],
                    track if track >= 0 else None, kinds[i],
                ))
        return _drop_unsure_single_sightings(detections)

    def _reidentify(self, by_track: Mapping[int, list[_Detection]], track_category: Mapping[int, str]) -> list[list[int]]:
        summaries = [
            TrackSummary(
                track_id=track_id,
                category=track_category[track_id],
                times=tuple(sorted({d.time_s for d in members})),
                features=np.stack([d.feature for d in members]),
            )
            for track_id, members in sorted(by_track.items())
        ]
        return group_tracks(summaries, self.perception.appearance.similarity)


def _drop_unsure_single_sightings(detections: list[_Detection]) -> list[_Detection]:
    sightings = Counter(d.track_id for d in detections if d.track_id is not None)
    return [
        replace(d, track_id=None)
        if d.track_id is not None and sightings[d.track_id] == 1 and d.score < MIN_SINGLE_SIGHTING_SCORE else d
        for d in detections
    ]


def _kind_of(kinds: Iterable[str]) -> str:
    """The kind an object's sightings were most often guessed as, when the guess is made often enough
    (``MIN_KIND_SHARE`` of its sightings, twice at least) and the guesses mostly agree (``MIN_KIND_AGREEMENT``)."""
    kinds = list(kinds)
    named = [k for k in kinds if k]
    if not named:
        return ""
    best = _majority(named)
    count = named.count(best)
    sure = count >= 2 and count >= MIN_KIND_SHARE * len(kinds) and count >= MIN_KIND_AGREEMENT * len(named)
    return best if sure else ""


def _segment_at(segment_ends: Sequence[float], time_s: float) -> int:
    """Id of the segment holding ``time_s`` (segments run from 0 and ``segment_ends`` ascend)."""
    return min(bisect.bisect_right(segment_ends, time_s), len(segment_ends) - 1)


def _majority(items: Any) -> str:
    return Counter(items).most_common(1)[0][0]
