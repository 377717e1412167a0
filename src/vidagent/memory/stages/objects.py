"""Stage ``objects``: the space-dominant memory (DoraemonGPT) / object memory (VideoAgent).

Frames sampled at ``Settings.object_fps`` go through the detector; every detection's crop gets
appearance features, a colour word and, with an image classifier on, its ImageNet kind when the
classifier is sure, and with a segmenter (the offline one by default) its mask (per frame, checkpointed:
COCO run-length text over the sampled frame, scaled to the displayed video's pixels when the rows are
written to ``detections.mask``). When all frames are done the tracker links detections into tracks,
tracks are re-identified into objects with VideoAgent's grouping algorithm, and each object gets a
trajectory, the segments it appears in, an appearance and a motion description (the appearance names the kind most of its sightings were guessed as), and
a text embedding of those for open-vocabulary retrieval.

Detections stay ``sv.Detections`` throughout: the stage adds its measurements to each frame's
``data`` (``colour``, ``kind``, ``feature``, ``mask``), the tracker adds ``tracker_id``, and all frames are
merged into one (with ``time_s`` and boxes in the video's display pixels) that the rows are read
from. Only the per-frame checkpoint is JSON (``_checkpoint``/``_from_checkpoint``; its format is
what it was, so stored checkpoints and the stage's config hash stay valid).
"""

from __future__ import annotations

import base64
import bisect
import math
import os
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, Mapping, Sequence

import cv2
import numpy as np
import supervision as sv

from vidagent.config import Settings
from vidagent.memory.object_summary import describe_appearance, describe_motion
from vidagent.memory.reid import TrackSummary, group_tracks
from vidagent.memory.same_box_classes import SAME_BOX_IOU, corrected, same_box_classes
from vidagent.memory.stages.base import Rows
from vidagent.memory.store import Library, Unsaved
from vidagent.perception.colour import COLOUR_REGION_VERSION, colour_name, object_region
from vidagent.perception.detections import CLASS_NAME, class_names, make_detections, with_data
from vidagent.perception.masks import decode_mask, encode_mask
from vidagent.perception.object_kind import kind_note, square_crop
from vidagent.perception.segmenter import PendingCut
from vidagent.perception.suite import Perception
from vidagent.perception.tracking import DEFAULT_ACTIVATION
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
# What the stage adds to each detection's ``data`` (beside supervision's "class_name").
COLOUR, KIND, FEATURE, TIME, MASK = "colour", "kind", "feature", "time_s", "mask"
SLOT = "slot"  # a detection's place in its frame's checkpoint
# A detection under the tracker's start confidence can only continue a track, and mostly does not (on the 20-minute
# benchmark video 1,171 of the 1,575 that GrabCut would cut joined no object): its GrabCut mask waits for tracking,
# and is cut in ``finish`` only for a detection of an object (from what GrabCut needs, a few kilobytes; the frame
# is not kept). A frame's waiting cuts are bounded, so that a video's are (MAX_OBJECT_FRAMES frames); past the
# bound they are cut at once.
LATER_MASK_BELOW = DEFAULT_ACTIVATION
MAX_WAITING_BYTES_PER_FRAME = (256 << 20) // MAX_OBJECT_FRAMES


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
            **self.sampling_config(),
            "min_single_sighting_score": MIN_SINGLE_SIGHTING_SCORE,
            "embedder": self.perception.embedder.name,
            "segment_seconds": self.settings.segment_seconds,
            "colour_region": COLOUR_REGION_VERSION,
            "same_box_classes": SAME_BOX_IOU,
            **({"reuse_near_duplicates": self.reuse.config()} if self.reuse else {}),
            **({"classifier": self.perception.classifier.name} if self.perception.classifier else {}),
            **({"segmenter": self.perception.segmenter.name} if self.perception.segmenter else {}),
        }

    def sampling_config(self) -> dict[str, Any]:
        """What ``frame_times`` depends on."""
        return {"fps": self.settings.object_fps, "max_frames": MAX_OBJECT_FRAMES}

    def sampling_fps(self, video: Video) -> float:
        """``Settings.object_fps``, or where that would sample more than ``MAX_OBJECT_FRAMES``, the most whole
        frames a segment that stay within it (one a segment at least)."""
        budget = MAX_OBJECT_FRAMES / max(video.duration_s, 1e-6)
        if self.settings.object_fps <= budget:
            return self.settings.object_fps
        segment = self.settings.segment_seconds
        per_segment = math.floor(budget * segment + 1e-9)
        return per_segment / segment if per_segment >= 1 else budget

    def frame_times(self, video: Video) -> list[float]:
        """Times ``1 / sampling_fps`` apart on a grid through each segment's middle, where the ``frames`` stage
        describes a frame: the describer's detections of that frame are then the ones this stage reads (the
        detector caches by pixels), not a second run on a frame a third of a sample period away. At the default
        2 fps the grid starts at 0 s; on a 20-minute video (1.5 fps) at 1/3 s."""
        period = 1.0 / self.sampling_fps(video)
        phase = math.fmod(self.settings.segment_seconds / 2, period)
        if period - phase < 1e-6:
            phase = 0.0
        count = max(0, math.ceil((video.duration_s - phase) / period - 1e-9))
        return [round(phase + i * period, 3) for i in range(count)] or [0.0]

    # -- per frame ------------------------------------------------------------------------
    def process(self, frames: Sequence[SampledFrame]) -> list[Any]:
        """Detect objects in ``frames`` and measure them, the frames' measurements (masks above all)
        on a thread each, one per core: OpenCV and the person model's worker run outside the GIL."""
        all_detections = self.perception.detector.detect([frame.image for frame in frames])

        def measured(index: int) -> Any:
            frame = frames[index]
            detections, waiting = self._measure(frame.image, all_detections[index])
            return _checkpoint(detections, frame.image, waiting, frame.time_s)

        threads = min(len(frames), os.cpu_count() or 1)
        if threads <= 1:
            return [measured(i) for i in range(len(frames))]
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="objects-measure") as pool:
            return list(pool.map(measured, range(len(frames))))

    def _measure(self, image: np.ndarray, detections: sv.Detections) -> tuple[sv.Detections, dict[int, PendingCut]]:
        """``detections`` with each one's appearance features, colour word, (with a classifier) kind and (with a
        segmenter) mask, "" for a mask left for later; and the cuts of those, by the detection's place."""
        crops = [crop_box(image, box) for box in detections.xyxy]
        usable = [i for i, crop in enumerate(crops) if min(crop.shape[:2]) >= MIN_CROP_PIXELS]
        features = np.zeros((len(crops), self.perception.appearance.dim), np.float32)
        if usable:
            features[usable] = self.perception.appearance.features([crops[i] for i in usable])
        colours = [colour_name(object_region(image, box, label).reshape(-1, 3))
                   for box, label in zip(detections.xyxy, class_names(detections))]
        kinds = self._kinds(image, detections)
        masks, waiting = self._masks(image, detections)
        return with_data(detections, **{FEATURE: features, COLOUR: np.asarray(colours, dtype=str),
                                        **({KIND: np.asarray(kinds, dtype=str)} if kinds is not None else {}),
                                        **({MASK: np.asarray(masks, dtype=object)} if masks is not None else {})}), waiting

    def _masks(self, image: np.ndarray, detections: sv.Detections) -> tuple[list[str] | None, dict[int, PendingCut]]:
        """Each detection's mask as run-length text over ``image`` ("" for one left for later: see
        ``LATER_MASK_BELOW``), or None without a segmenter; and the cuts left for later, by place."""
        segmenter = self.perception.segmenter
        if segmenter is None:
            return None, {}
        if not len(detections):
            return [], {}
        labels = class_names(detections)
        segment_later = getattr(segmenter, "segment_later", None)
        later = [float(score) < LATER_MASK_BELOW for score in detections.confidence]
        if segment_later is None or not any(later):
            return [encode_mask(mask) for mask in segmenter.segment(image, detections.xyxy, labels)], {}
        made = segment_later(image, detections.xyxy, labels, later)
        waiting = {i: cut for i, cut in enumerate(made) if isinstance(cut, PendingCut)}
        kept = 0
        for i in sorted(waiting, key=lambda i: (float(detections.confidence[i]), i)):  # the least sure wait first
            kept += waiting[i].nbytes
            if kept > MAX_WAITING_BYTES_PER_FRAME:
                made[i] = segmenter.complete(waiting.pop(i))  # type: ignore[attr-defined]
        return ["" if i in waiting else encode_mask(mask) for i, mask in enumerate(made)], waiting

    def _kinds(self, image: np.ndarray, detections: sv.Detections) -> list[str] | None:
        """Each detection's ImageNet kind ("" where unsure), or None without a classifier."""
        classifier = self.perception.classifier
        if classifier is None:
            return None
        labels = class_names(detections)
        crops = [square_crop(image, box) for box in detections.xyxy]
        usable = [i for i, crop in enumerate(crops) if min(crop.shape[:2]) >= MIN_CROP_PIXELS]
        kinds = [""] * len(crops)
        for i, labels_of_crop in zip(usable, classifier.classify([crops[i] for i in usable], top_k=1)):
            kinds[i] = kind_note(labels[i], labels_of_crop)
        return kinds

    # -- all frames -----------------------------------------------------------------------
    def finish(self, video: Video, library: Library, results: Mapping[float, Any]) -> Rows:
        seen = self._track(video, results)
        times = seen.data[TIME]
        # a crouching person the detector called a dog too, a ball it called a frisbee too: the truer class names
        # the box and its track, which joins the truer box's track
        categories, track_ids = corrected(class_names(seen), seen.confidence, seen.tracker_id, times,
                                          same_box_classes(seen.xyxy, times, class_names(seen)))
        seen.tracker_id = track_ids
        scores = [round(float(score), 4) for score in seen.confidence]  # as checkpointed
        by_track: dict[int, np.ndarray] = {int(track): np.flatnonzero(seen.tracker_id == track)
                                           for track in dict.fromkeys(seen.tracker_id.tolist()) if track >= 0}
        track_category = {track: _majority(categories[i] for i in rows) for track, rows in by_track.items()}
        groups = self._reidentify(seen, by_track, track_category)
        object_of_track = {track: object_id for object_id, group in enumerate(groups) for track in group}
        segment_ends = [segment.end_s for segment in video.segments(self.settings.segment_seconds)]
        width, height = video.info.width, video.info.height
        masks = seen.data.get(MASK)
        if masks is not None:
            of_objects = [i for i, track in enumerate(seen.tracker_id) if int(track) in object_of_track]
            masks = np.array(masks, dtype=object)
            for i, mask in self._later_masks(video, results, seen, of_objects).items():
                masks[i] = mask

        detection_rows = []
        for i, (box, track) in enumerate(zip(seen.xyxy, seen.tracker_id)):
            x1, y1, x2, y2 = (float(v) for v in box)
            time_s, track_id = float(times[i]), (int(track) if track >= 0 else None)
            object_id = object_of_track.get(track_id) if track_id is not None else None
            detection_rows.append((
                i, time_s, _segment_at(segment_ends, time_s), categories[i], scores[i], x1, y1, x2, y2,
                round((x1 + x2) / 2 / width, 4), round((y1 + y2) / 2 / height, 4),
                round((x2 - x1) * (y2 - y1) / (width * height), 5), track_id, object_id,
                (str(masks[i]) or None) if masks is not None else None,
            ))

        track_rows = []
        for track_id, rows in sorted(by_track.items()):
            seen_at = sorted({float(times[i]) for i in rows})
            track_rows.append((track_id, object_of_track[track_id], track_category[track_id],
                               seen_at[0], seen_at[-1], len(seen_at)))

        object_rows, segment_rows, documents = [], [], []
        kinds = seen.data.get(KIND, np.full(len(seen), "", dtype=str))
        for object_id, group in enumerate(groups):
            members = np.concatenate([by_track[track] for track in group])
            members = members[np.argsort(times[members], kind="stable")]
            boxes = [tuple(float(v) for v in seen.xyxy[i]) for i in members]
            category = _majority(categories[i] for i in members)
            seen_at = sorted({float(times[i]) for i in members})
            trajectory = [(float(times[i]), box) for i, box in zip(members, boxes)]
            appearance = describe_appearance(category, [str(seen.data[COLOUR][i]) for i in members], boxes,
                                             width, height, kind=_kind_of(str(kinds[i]) for i in members))
            motion = describe_motion(trajectory, width, height, duration_s=video.duration_s)
            description = f"{appearance}; {motion}"
            feature = np.mean(seen.data[FEATURE][members], axis=0).astype(np.float32)
            norm = float(np.linalg.norm(feature))
            object_rows.append([object_id, category, seen_at[0], seen_at[-1], len(seen_at), appearance, motion,
                                description, (feature / norm if norm else feature).tobytes()])
            documents.append(description)
            per_segment: dict[int, list[float]] = defaultdict(list)
            for time_s in seen_at:
                per_segment[_segment_at(segment_ends, time_s)].append(time_s)
            for segment_id, present in sorted(per_segment.items()):
                segment_rows.append((object_id, segment_id, present[0], present[-1], len(present)))
        embeddings = self.perception.embedder.embed_passages(documents) if documents else []
        objects = [(*row[:8], np.asarray(vector, np.float32).tobytes(), row[8])
                   for row, vector in zip(object_rows, embeddings)]
        return {"detections": detection_rows, "tracks": track_rows, "objects": objects,
                "object_segments": segment_rows}

    def _later_masks(self, video: Video, results: Mapping[float, Any], seen: sv.Detections,
                     rows: Sequence[int]) -> dict[int, str]:
        """The masks ``process`` left for later of the detections ``rows`` of ``seen``, over the displayed video:
        cut from what ``process`` kept, or (a build resumed from checkpoints) from the frame decoded again."""
        wanted: dict[tuple[float, int], list[int]] = {}  # (time the frame was measured at, place) -> rows
        result_of: dict[tuple[float, int], Mapping[str, Any]] = {}  # -> the frame's result (a near-duplicate's too)
        for i in rows:
            result = results[float(seen.data[TIME][i])]
            slot = int(seen.data[SLOT][i])
            if slot in result.get("later", ()):
                key = (float(result["measured_at"]), slot)
                wanted.setdefault(key, []).append(i)
                result_of.setdefault(key, result)
        if not wanted:
            return {}
        cuts: dict[tuple[float, int], PendingCut | np.ndarray] = {}
        again: dict[float, list[int]] = defaultdict(list)
        source: dict[float, Mapping[str, Any]] = {}
        for (measured_at, slot), result in result_of.items():
            kept = result.get("waiting")
            if isinstance(kept, Unsaved) and slot in kept.value:
                cuts[(measured_at, slot)] = kept.value[slot]
            else:
                again[measured_at].append(slot)
                source[measured_at] = result
        segmenter = self.perception.segmenter
        if again:
            side = max(max(result["size"]) for result in source.values())
            for frame in video.frames_at(sorted(again), max_side=side):
                result, slots = source[frame.time_s], again[frame.time_s]
                boxes = dict(zip(result["later"], result["later_boxes"]))  # as measured, not rounded
                made = segmenter.segment_later(frame.image, [boxes[k] for k in slots],  # type: ignore[union-attr]
                                               [result["labels"][k] for k in slots], [True] * len(slots))
                cuts.update(((frame.time_s, k), cut) for k, cut in zip(slots, made))

        def cut(key: tuple[float, int]) -> str:
            made = cuts[key]
            mask = segmenter.complete(made) if isinstance(made, PendingCut) else made  # type: ignore[union-attr]
            return encode_mask(mask)

        keys = list(wanted)
        with ThreadPoolExecutor(max_workers=min(len(keys), os.cpu_count() or 1), thread_name_prefix="objects-masks") as pool:
            coded = dict(zip(keys, pool.map(cut, keys)))
        masks: dict[int, str] = {}
        for key, found in wanted.items():
            scaled = _scaled_mask(coded[key], tuple(result_of[key]["size"]), (video.info.width, video.info.height))
            masks.update((i, scaled) for i in found)
        return masks

    def _track(self, video: Video, results: Mapping[float, Any]) -> sv.Detections:
        """Every checkpointed detection of the video in time order, tracked (``tracker_id``, -1 for
        none), its box in the video's display pixels and its sample time in ``data["time_s"]``."""
        tracker = self.perception.new_tracker(self.sampling_fps(video))
        dim = self.perception.appearance.dim
        frames: list[sv.Detections] = []
        for time_s in sorted(results):
            detections = _from_checkpoint(results[time_s], dim)
            tracked = tracker.update(detections, float(time_s))  # empty frames too: lost tracks age
            frame_w, frame_h = results[time_s]["size"]
            if MASK in tracked.data:
                tracked = with_data(tracked, **{MASK: np.asarray(
                    [_scaled_mask(str(rle), (frame_w, frame_h), (video.info.width, video.info.height))
                     for rle in tracked.data[MASK]], dtype=object)})
            scale_x, scale_y = video.info.width / frame_w, video.info.height / frame_h
            display = np.array([[round(float(x1) * scale_x, 1), round(float(y1) * scale_y, 1),
                                 round(float(x2) * scale_x, 1), round(float(y2) * scale_y, 1)]
                                for x1, y1, x2, y2 in tracked.xyxy], np.float64).reshape(-1, 4)
            frames.append(with_data(sv.Detections(xyxy=display, confidence=tracked.confidence,
                                                  class_id=tracked.class_id, tracker_id=tracked.tracker_id,
                                                  data=tracked.data),
                                    **{TIME: np.full(len(tracked), float(time_s))}))
        seen = _merge(frames, dim)
        return _drop_unsure_single_sightings(seen)

    def _reidentify(self, seen: sv.Detections, by_track: Mapping[int, np.ndarray],
                    track_category: Mapping[int, str]) -> list[list[int]]:
        summaries = [
            TrackSummary(
                track_id=track_id,
                category=track_category[track_id],
                times=tuple(sorted({float(seen.data[TIME][i]) for i in rows})),
                features=seen.data[FEATURE][rows],
            )
            for track_id, rows in sorted(by_track.items())
        ]
        return group_tracks(summaries, self.perception.appearance.similarity)


def _checkpoint(detections: sv.Detections, image: np.ndarray, waiting: Mapping[int, PendingCut] | None = None,
                time_s: float | None = None) -> dict[str, Any]:
    """One frame's measured detections as the JSON its checkpoint keeps (boxes in that frame's pixels); with the
    masks left for later (``waiting``, by place), their places and boxes (unrounded: a resumed build cuts them
    as an uninterrupted one), the time of the frame they are cut from (``time_s``: a near-duplicate frame's result
    is its model's) and, in memory only, the cuts."""
    kinds = detections.data.get(KIND)
    later = {"later": sorted(waiting), "later_boxes": [[float(v) for v in detections.xyxy[i]] for i in sorted(waiting)],
             "measured_at": time_s, "waiting": Unsaved(dict(waiting))} if waiting else {}
    return {
        **({"kinds": [str(k) for k in kinds]} if kinds is not None else {}),
        "size": [int(image.shape[1]), int(image.shape[0])],
        "boxes": [[round(float(v), 2) for v in box] for box in detections.xyxy],
        "scores": [round(float(s), 4) for s in detections.confidence],
        "class_ids": [int(c) for c in detections.class_id],
        "labels": class_names(detections),
        "colours": [str(c) for c in detections.data[COLOUR]],
        "features": base64.b64encode(detections.data[FEATURE].astype(np.float16).tobytes()).decode("ascii"),
        **({"masks": [str(m) for m in detections.data[MASK]]} if MASK in detections.data else {}),
        **later,
    }


def _from_checkpoint(result: Mapping[str, Any], dim: int) -> sv.Detections:
    """The detections of one checkpointed frame (``_checkpoint``), with their colours, kinds and features."""
    count = len(result["labels"])
    features = np.frombuffer(base64.b64decode(result["features"]), np.float16).astype(np.float32)
    masks = result.get("masks")
    return make_detections(result["boxes"], result["scores"], result["class_ids"], result["labels"], data={
        COLOUR: np.asarray(result["colours"], dtype=str).reshape(count),
        KIND: np.asarray(result.get("kinds") or [""] * count, dtype=str).reshape(count),
        FEATURE: features.reshape(count, dim),
        SLOT: np.arange(count),
        **({MASK: np.asarray(masks, dtype=object).reshape(count)} if masks is not None else {}),
    })


def _scaled_mask(rle: str, frame_size: tuple[int, int], display_size: tuple[int, int]) -> str:
    """A mask over the sampled frame (``frame_size`` width, height) as one over the displayed video."""
    if not rle or tuple(frame_size) == tuple(display_size):
        return rle
    mask = decode_mask(rle, *frame_size).astype(np.uint8) * 255
    scaled = cv2.resize(mask, tuple(display_size), interpolation=cv2.INTER_LINEAR)
    return encode_mask(scaled > 127)


def _merge(frames: Sequence[sv.Detections], dim: int) -> sv.Detections:
    """The frames' detections as one, in order (an empty one with every field when none was seen)."""
    seen = sv.Detections.merge(list(frames))
    if len(seen):
        return seen
    return sv.Detections(xyxy=np.zeros((0, 4)), confidence=np.zeros(0, np.float32), class_id=np.zeros(0, np.int32),
                         tracker_id=np.zeros(0, np.int64),
                         data={CLASS_NAME: np.zeros(0, str), COLOUR: np.zeros(0, str), KIND: np.zeros(0, str),
                               FEATURE: np.zeros((0, dim), np.float32), TIME: np.zeros(0), SLOT: np.zeros(0, int)})


def _drop_unsure_single_sightings(seen: sv.Detections) -> sv.Detections:
    """``seen`` with the tracks seen once at a score under ``MIN_SINGLE_SIGHTING_SCORE`` untracked."""
    ids = np.array(seen.tracker_id, np.int64)
    sightings = Counter(int(track) for track in ids if track >= 0)
    for i, track in enumerate(ids):
        if track >= 0 and sightings[int(track)] == 1 and round(float(seen.confidence[i]), 4) < MIN_SINGLE_SIGHTING_SCORE:
            ids[i] = -1
    return sv.Detections(xyxy=seen.xyxy, confidence=seen.confidence, class_id=seen.class_id, tracker_id=ids,
                         data=dict(seen.data))


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
