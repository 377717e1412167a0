"""Stage ``actions``: what each object of the object memory does, as verbs with time spans.

A table stage after ``objects``: it reads every object's sightings from ``detections`` (and follows the
camera as the ``camera`` stage measured it between the sample times, ``vidagent.memory.camera_motion``, so a pan is not a walk) and, when pose
perception is on (``Settings.perception`` has "pose"), the pose words the ``frames`` stage stored for
the people in its frames, matched to the person objects by time and box overlap. The verbs come from
the trajectories and poses (``object_actions`` here, no model: ``vidagent.memory.trajectory_actions`` and
``vidagent.memory.pose_actions``, over the types of ``vidagent.memory.actions``) and, with a video classifier
configured (``Settings.backends.video_classifier``), from the classifier over each person's crops
(``vidagent.memory.classified_actions``).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import supervision as sv

from vidagent.memory.actions import Action, Box, ObjectSightings, Sighting, in_order
from vidagent.memory.camera_motion import stored_camera_path
from vidagent.memory.classified_actions import classified_actions
from vidagent.memory.pose_actions import pose_actions, pose_keys
from vidagent.memory.trajectory_actions import moving_together, still_camera, trajectory_actions
from vidagent.memory.stages.base import Rows
from vidagent.memory.store import Library
from vidagent.perception.base import VideoClassifier
from vidagent.video.video import Video

log = logging.getLogger(__name__)

# Raise when the derivation's verbs or thresholds change, so stored actions are rebuilt.
# 2: speeds measured against the camera's own motion
# 3: the camera followed from one object sample time to the next (the camera stage), not between sightings
ACTIONS_VERSION = 3
# A pose read in a frame belongs to the person object seen within this many seconds of it (objects are
# sampled at 2 frames a second, frames in the middle of each segment) whose box overlaps it this much.
POSE_MATCH_S = 0.6
POSE_MATCH_IOU = 0.3


class ActionsStage:
    name = "actions"

    def __init__(self, objects_config: Mapping[str, Any], camera_config: Mapping[str, Any],
                 frames_config: Mapping[str, Any] | None, classifier: VideoClassifier | None = None,
                 segment_seconds: float = 2.0) -> None:
        self.objects_config = dict(objects_config)
        self.camera_config = dict(camera_config)
        self.frames_config = dict(frames_config) if frames_config is not None else None  # None: no poses
        self.classifier = classifier
        self.segment_seconds = segment_seconds
        self.requires: tuple[str, ...] = ("objects", "camera") + (("frames",) if frames_config is not None else ())

    def config(self) -> dict[str, Any]:
        return {
            "version": ACTIONS_VERSION,
            "camera": self.camera_config,
            "objects": self.objects_config,
            **({"frames": self.frames_config} if self.frames_config is not None else {}),
            **({"classifier": self.classifier.name} if self.classifier is not None else {}),
            "segment_seconds": self.segment_seconds,
        }

    def build(self, video: Video, library: Library, progress: bool) -> Rows:
        video_id = video.content_hash
        tracks = object_tracks(library, video_id)
        poses = person_poses(library, video_id, tracks, video.info.width, video.info.height) \
            if self.frames_config is not None else {}
        camera = stored_camera_path(library, video_id, video.info.width, video.info.height)
        found = object_actions(tracks, poses, video.duration_s, camera)
        if self.classifier is not None:
            found += classified_actions(video, tracks, self.classifier, self.segment_seconds)
        ordered = in_order(found)
        log.info("%s: %d actions of %d objects", video.path.name, len(ordered), len(tracks))
        return {"actions": [action.row(i) for i, action in enumerate(ordered)]}


def object_actions(tracks: Sequence[ObjectSightings], poses: Mapping[int, Sequence[tuple[float, frozenset[str]]]],
                   duration_s: float, camera: Callable[[float, float, Box], Box] | None = None) -> list[Action]:
    """Every action the trajectories and poses show, in order (``in_order``); deterministic, no storage.

    ``poses`` maps a person's object id to its pose facts over time: ``(time_s, keys)`` where the keys
    are those of ``vidagent.perception.pose_words.PoseFacts.keys``. ``camera`` says where the camera
    alone carries a box between two times (``trajectory_actions.Camera``; None: a still camera).
    """
    found: list[Action] = []
    for track in tracks:
        found += trajectory_actions(track, duration_s, camera or still_camera)
    found = moving_together(tracks, found)
    for object_id, samples in poses.items():
        found += pose_actions(object_id, samples)
    return in_order(found)


def object_tracks(library: Library, video_id: str) -> list[ObjectSightings]:
    """Every object of the memory with its sightings (one per sampled time: the likeliest detection)."""
    categories = dict(library.rows("SELECT object_id, category FROM objects WHERE video_id=?", (video_id,)))
    rows = library.rows(
        """SELECT object_id, time_s, x1, y1, x2, y2 FROM detections WHERE video_id=? AND object_id IS NOT NULL
           ORDER BY object_id, time_s, score DESC""", (video_id,))
    sightings: dict[int, dict[float, Sighting]] = defaultdict(dict)
    for object_id, time_s, x1, y1, x2, y2 in rows:
        sightings[object_id].setdefault(time_s, Sighting(time_s, (x1, y1, x2, y2)))
    return [ObjectSightings(object_id, categories.get(object_id, "object"), tuple(sightings[object_id].values()))
            for object_id in sorted(sightings)]


def person_poses(library: Library, video_id: str, tracks: Sequence[ObjectSightings], width: int,
                 height: int) -> dict[int, list[tuple[float, frozenset[str]]]]:
    """The pose keys of each person object over time, from the pose words of the stored frames."""
    people = [track for track in tracks if track.is_person]
    poses: dict[int, list[tuple[float, frozenset[str]]]] = defaultdict(list)
    if not people:
        return {}
    for frame in library.frames(video_id):
        frame_w, frame_h = frame.seen.size
        if not frame_w or not frame_h:
            continue
        scale_x, scale_y = width / frame_w, height / frame_h
        taken: set[int] = set()
        for seen in frame.seen.objects:
            keys = pose_keys(seen.pose) if seen.label == "person" and seen.pose else frozenset()
            if not keys:
                continue
            box = (seen.box[0] * scale_x, seen.box[1] * scale_y, seen.box[2] * scale_x, seen.box[3] * scale_y)
            match = _matching_person(people, frame.time_s, box, taken)
            if match is not None:
                taken.add(match)
                poses[match].append((frame.time_s, keys))
    return dict(poses)


def _matching_person(people: Sequence[ObjectSightings], time_s: float, box: tuple[float, float, float, float],
                     taken: set[int]) -> int | None:
    best, best_iou = None, POSE_MATCH_IOU
    for person in people:
        if person.object_id in taken:
            continue
        near = [s for s in person.sightings if abs(s.time_s - time_s) <= POSE_MATCH_S]
        if not near:
            continue
        closest = min(near, key=lambda s: abs(s.time_s - time_s))
        overlap = float(sv.box_iou_batch(np.array([closest.box]), np.array([box]))[0, 0])
        if overlap >= best_iou:
            best, best_iou = person.object_id, overlap
    return best

