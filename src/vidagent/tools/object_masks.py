"""An object's masks frame by frame, and the folder a segmentation is saved as.

``object_masks`` places the object (its ``Track``: its sampled boxes and masks from the object memory)
at the times asked for (default: the times the objects stage sampled it): its mask where the
segmentation backend made one (``source = "mask"``), moved with its box between samples; where none was
made, its box stands in as the mask, said as such (``source = "box"``).

``write_segmentation`` saves them in a folder: ``masks/<frame>.png`` (one-channel PNG, 255 on the object;
``<frame>`` the video frame's index, six digits, as Ref-YouTube-VOS names its annotations),
``masks.json`` (what was referred to and how, and per frame its time, box, mask source, file and COCO
run-length mask) and ``overlay.mp4`` (the stretch the object is seen in with its mask drawn over it).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vidagent.errors import OutputError
from vidagent.perception.masks import box_mask, mask_json, mask_to_png
from vidagent.video import editing
from vidagent.video.editing import Progress
from vidagent.video.track import Track
from vidagent.video.video import Video, error_reason

MASKS_FOLDER = "masks"
MANIFEST = "masks.json"
OVERLAY = "overlay.mp4"


@dataclass(frozen=True)
class FrameMask:
    """The object in one frame: when (``time_s``, and the video frame's index), its box and mask, and
    whether the mask is a segmenter's (``mask``) or its box standing in (``box``)."""

    time_s: float
    frame: int
    box: tuple[float, float, float, float]
    mask: np.ndarray
    source: str

    @property
    def file(self) -> str:
        """Its PNG's path inside a segmentation's folder."""
        return f"{MASKS_FOLDER}/{self.frame:06d}.png"

    def to_dict(self) -> dict[str, Any]:
        return {"time_s": round(self.time_s, 3), "frame": self.frame, "box": [round(v, 1) for v in self.box],
                "source": self.source, "file": self.file, "rle": mask_json(self.mask)}


def object_masks(track: Track, width: int, height: int, fps: float,
                 times: Sequence[float] | None = None) -> list[FrameMask]:
    """The object's mask at each of ``times`` it is placed at (default: its sampled times)."""
    wanted = [s.time_s for s in track.samples] if times is None else list(times)
    out = []
    for time_s in wanted:
        placed = track.place(time_s, width, height)
        if placed is None:
            continue
        if placed.mask is not None:
            mask, source = placed.mask, "mask"
        else:
            mask, source = box_mask(placed.box, width, height), "box"
        out.append(FrameMask(float(time_s), int(round(time_s * fps)) if fps > 0 else 0,
                             tuple(float(v) for v in placed.box), mask, source))  # type: ignore[arg-type]
    return out


def mask_sources(masks: Sequence[FrameMask]) -> str:
    """How the masks were made, in words: ``segmenter``, ``box (no segmenter ran)`` or both with counts."""
    counts = {source: sum(1 for m in masks if m.source == source) for source in ("mask", "box")}
    if not counts["box"]:
        return "segmenter"
    if not counts["mask"]:
        return "box (no segmentation mask in the memory: each box stands in for its mask)"
    return f"segmenter in {counts['mask']} frames, box in {counts['box']}"


def write_segmentation(video: Video, track: Track, masks: Sequence[FrameMask], about: dict[str, Any],
                       folder: Path, *, window: tuple[float, float], progress: Progress | None = None) -> Path:
    """Save ``masks`` (PNG), the manifest (``about`` and each frame's mask) and the overlay video of
    ``window`` in ``folder``, written under a temporary name and renamed when whole."""
    folder = Path(folder)
    temporary = folder.with_name(f".{folder.name}.{os.getpid()}-{secrets.token_hex(4)}.part")
    try:
        (temporary / MASKS_FOLDER).mkdir(parents=True)
        frames = []
        for item in masks:
            (temporary / item.file).write_bytes(mask_to_png(item.mask))
            frames.append(item.to_dict())
        manifest = {**about, "overlay": OVERLAY, "frames": frames}
        (temporary / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        editing.overlay_track(video, track, temporary / OVERLAY, start_s=window[0], end_s=window[1],
                              progress=progress)
        if folder.is_dir():
            folder.rmdir()  # an empty folder given to write into (one with files in it is refused before)
        os.replace(temporary, folder)
    except OSError as error:
        raise OutputError(folder, f"cannot write the masks ({error_reason(error)})") from error
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return folder
