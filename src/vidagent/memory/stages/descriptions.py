"""Stage ``descriptions``: one line per object from everything the memory knows of it
(``vidagent.memory.object_lines``), a captioning model's caption of its best crop when one is configured
(``Settings.backends.captioner``), and a text embedding of the two that object retrieval ranks by.

A table stage after ``actions``: it reads the objects (appearance, motion), their detections (boxes,
scores, masks) and their actions. With a captioner the best crops are decoded in one pass.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any, Mapping, Sequence

import numpy as np

from vidagent.memory.actions import Action
from vidagent.memory.object_lines import MaskedSighting, best_sighting, mask_shape, object_line
from vidagent.memory.stages.base import Rows
from vidagent.memory.store import Library
from vidagent.perception.base import FrameDescriber, TextEmbedder
from vidagent.perception.object_kind import square_crop
from vidagent.video.video import Video

log = logging.getLogger(__name__)

# Raise when the line's wording changes, so stored lines are rebuilt.
# 2: at most MAX_LINE_ACTIONS actions named
LINES_VERSION = 2


class DescriptionsStage:
    name = "descriptions"
    requires: tuple[str, ...] = ("actions",)

    def __init__(self, actions_config: Mapping[str, Any], embedder: TextEmbedder,
                 captioner: FrameDescriber | None = None) -> None:
        self.actions_config = dict(actions_config)
        self.embedder = embedder
        self.captioner = captioner

    def config(self) -> dict[str, Any]:
        return {"version": LINES_VERSION, "actions": self.actions_config, "embedder": self.embedder.name,
                **({"captioner": self.captioner.name} if self.captioner is not None else {})}

    def build(self, video: Video, library: Library, progress: bool) -> Rows:
        video_id = video.content_hash
        width, height = video.info.width, video.info.height
        objects = library.objects(video_id)
        sightings = _sightings(library, video_id)
        actions = _actions(library, video_id)
        lines, best = [], []
        for obj in objects:
            seen = sightings.get(obj.object_id, [])
            shape = mask_shape(seen, width, height)
            lines.append(object_line(obj.appearance, obj.motion, shape, actions.get(obj.object_id, [])))
            best.append(best_sighting(seen, width, height) if seen else None)
        captions = self._captions(video, best) if self.captioner is not None else [None] * len(objects)
        documents = [f"{line}. {caption}" if caption else line for line, caption in zip(lines, captions)]
        vectors = self.embedder.embed_passages(documents) if documents else []
        rows = [(obj.object_id, line, caption, (pick.time_s if pick else obj.first_s),
                 np.asarray(vector, np.float32).tobytes())
                for obj, line, caption, pick, vector in zip(objects, lines, captions, best, vectors)]
        log.info("%s: %d object lines%s", video.path.name, len(rows), " with crop captions" if self.captioner else "")
        return {"object_descriptions": rows}

    def _captions(self, video: Video, best: Sequence[MaskedSighting | None]) -> list[str | None]:
        """The captioner's sentence about each object's best crop (None where it has no sighting)."""
        times = sorted({pick.time_s for pick in best if pick is not None})
        crops: dict[int, np.ndarray] = {}
        for frame in video.frames_at(times):
            for i, pick in enumerate(best):
                if pick is not None and abs(pick.time_s - frame.time_s) < 1e-3:
                    crops[i] = square_crop(frame.image, pick.box)
        order = sorted(crops)
        described = self.captioner.describe([crops[i] for i in order]) if order else []  # type: ignore[union-attr]
        said = {i: (d.caption or "").strip() or None for i, d in zip(order, described)}
        return [said.get(i) for i in range(len(best))]


def _sightings(library: Library, video_id: str) -> dict[int, list[MaskedSighting]]:
    rows = library.rows(
        """SELECT object_id, time_s, x1, y1, x2, y2, score, mask FROM detections
           WHERE video_id=? AND object_id IS NOT NULL ORDER BY object_id, time_s""", (video_id,))
    out: dict[int, list[MaskedSighting]] = defaultdict(list)
    for object_id, time_s, x1, y1, x2, y2, score, mask in rows:
        out[object_id].append(MaskedSighting(time_s, (x1, y1, x2, y2), score, mask))
    return dict(out)


def _actions(library: Library, video_id: str) -> dict[int, list[Action]]:
    """Each object's actions in time order (``actions.in_order``, as action ids go)."""
    rows = library.rows(
        """SELECT object_id, verb, start_s, end_s, source, confidence, other_id FROM actions WHERE video_id=?
           ORDER BY object_id, action_id""", (video_id,))
    out: dict[int, list[Action]] = defaultdict(list)
    for object_id, verb, start_s, end_s, source, confidence, other_id in rows:
        out[object_id].append(Action(object_id, verb, start_s, end_s, source, confidence, other_id))
    return dict(out)
