"""Referring video object segmentation benchmarks: Ref-YouTube-VOS and Ref-DAVIS (in Ref-YouTube-VOS's layout).

The layout (Ref-YouTube-VOS as released; Ref-DAVIS17 as the referring-segmentation codebases convert it)::

    <root>/meta_expressions/<split>/meta_expressions.json
    <root>/<split>/JPEGImages/<video>/<frame>.jpg
    <root>/<split>/Annotations/<video>/<frame>.png     (palette PNGs: each pixel's object id, 0 background)

``meta_expressions.json`` is ``{"videos": {VIDEO: {"expressions": {EXP_ID: {"exp": TEXT, "obj_id": ID}},
"frames": [FRAME, ...]}}}``; the older release's ``{"videos": {VIDEO: {"objects": {ID: {"expressions":
[TEXT, ...]}}, "frames": [...]}}}`` is read too. ``Annotations`` is looked for beside the file and in
``<root>/<split>`` (``val`` also as ``valid``). A split without object ids or annotations (Ref-YouTube-VOS's
``valid``, scored by its server) loads with no key.

Each expression becomes one ``EvalItem`` (``task = REFERRING_SEGMENTATION``, ``question`` the expression)
whose ``extra`` says where its frames and masks are (``RefFrames``). The videos are the JPEG frames: a
video file is made from them when needed (``frames_video``) at the benchmark's frame rate (Ref-YouTube-VOS
keeps every 5th frame of 30 fps video: 6 fps; DAVIS is 24 fps), so annotated frame ``i`` is at ``i / fps`` s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from vidagent.eval.dataset import REFERRING_SEGMENTATION, EvalItem, read_json
from vidagent.eval.errors import DatasetError

YOUTUBE_VOS_FPS = 6.0  # the released frames: every 5th of 30 fps
DAVIS_FPS = 24.0
FRAME_SUFFIXES = (".jpg", ".jpeg", ".png")


@dataclass(frozen=True)
class RefFrames:
    """Where one expression's frames and true masks are: ``frames`` in order (the names without suffix),
    shown at ``fps``; ``object_id`` the palette index of the referred object (None: not given)."""

    images: Path
    annotations: Path | None
    frames: tuple[str, ...]
    fps: float
    object_id: int | None

    def time_of(self, index: int) -> float:
        return index / self.fps

    def truth(self, frame: str) -> np.ndarray:
        """The referred object's true mask in ``frame`` (bool, the annotation's size)."""
        if self.annotations is None or self.object_id is None:
            raise DatasetError("this split gives no masks")
        return object_mask(self.annotations / f"{frame}.png", self.object_id)

    def to_extra(self) -> dict[str, Any]:
        return {"images": str(self.images), "annotations": str(self.annotations) if self.annotations else None,
                "frames": list(self.frames), "fps": self.fps, "object_id": self.object_id}

    @classmethod
    def from_extra(cls, extra: Mapping[str, Any]) -> "RefFrames":
        return cls(Path(extra["images"]), Path(extra["annotations"]) if extra.get("annotations") else None,
                   tuple(extra["frames"]), float(extra["fps"]), extra.get("object_id"))


def object_mask(png: Path, object_id: int) -> np.ndarray:
    """The pixels of ``object_id`` in a palette (or one-channel) annotation PNG."""
    from PIL import Image

    try:
        with Image.open(png) as image:
            if image.mode not in ("P", "L", "I", "I;16"):
                raise DatasetError(f"{png}: an annotation is a palette or one-channel PNG, not {image.mode}")
            indices = np.asarray(image)
    except FileNotFoundError:
        raise DatasetError(f"no annotation {png}") from None
    except OSError as error:
        raise DatasetError(f"{png}: not a readable image ({error})") from None
    return indices == int(object_id)


def load_ref_youtube_vos(path: Path) -> list[EvalItem]:
    """Ref-YouTube-VOS's ``meta_expressions.json`` (6 fps frames)."""
    return _load(path, YOUTUBE_VOS_FPS, "ref_youtube_vos")


def load_ref_davis(path: Path) -> list[EvalItem]:
    """Ref-DAVIS17 in Ref-YouTube-VOS's layout (24 fps frames)."""
    return _load(path, DAVIS_FPS, "ref_davis")


def is_meta_expressions(data: Any) -> bool:
    """Whether a JSON value has the shape of a ``meta_expressions.json``."""
    if not isinstance(data, dict) or not isinstance(data.get("videos"), dict) or not data["videos"]:
        return False
    first = next(iter(data["videos"].values()))
    return isinstance(first, dict) and ("expressions" in first or "objects" in first)


def _load(path: Path, fps: float, benchmark: str) -> list[EvalItem]:
    data = read_json(path)
    if not is_meta_expressions(data):
        raise DatasetError(f"{path}: not a meta_expressions.json ({{\"videos\": {{VIDEO: {{\"expressions\": ...}}}}}})")
    images_root, annotations_root = _folders(path)
    items: list[EvalItem] = []
    for video, record in sorted(data["videos"].items()):
        where = f"{path}: video {video}"
        if not isinstance(record, dict):
            raise DatasetError(f"{where}: expected an object")
        frames = tuple(sorted(str(frame) for frame in record.get("frames") or ()))
        if not frames:
            raise DatasetError(f"{where}: no frames listed")
        annotations = annotations_root / video if annotations_root is not None else None
        for expression_id, text, object_id in _expressions(record, where):
            if not text:
                continue
            ref = RefFrames(images_root / video, annotations if object_id is not None else None, frames, fps,
                            object_id)
            items.append(EvalItem(id=f"{video}_{expression_id}", video=video, question=text,
                                  task=REFERRING_SEGMENTATION, type=benchmark, group=benchmark,
                                  extra={"ref": ref.to_extra()}))
    return items


def _expressions(record: Mapping[str, Any], where: str) -> list[tuple[str, str, int | None]]:
    """(expression id, text, object id or None) of one video, in either release's shape."""
    out: list[tuple[str, str, int | None]] = []
    if isinstance(record.get("expressions"), dict):
        for expression_id, expression in sorted(record["expressions"].items(), key=lambda kv: _order(kv[0])):
            if not isinstance(expression, dict):
                raise DatasetError(f"{where}: expression {expression_id} is not an object")
            out.append((str(expression_id), " ".join(str(expression.get("exp") or "").split()),
                        _object_id(expression.get("obj_id"), f"{where} expression {expression_id}")))
        return out
    for object_id, described in sorted((record.get("objects") or {}).items(), key=lambda kv: _order(kv[0])):
        texts = described.get("expressions") if isinstance(described, dict) else None
        if not isinstance(texts, list):
            raise DatasetError(f"{where}: object {object_id} has no list of expressions")
        number = _object_id(object_id, f"{where} object {object_id}")
        out += [(f"{object_id}_{i}", " ".join(str(text).split()), number) for i, text in enumerate(texts)]
    return out


def _object_id(value: Any, where: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(str(value))
    except ValueError:
        raise DatasetError(f"{where}: object id {value!r} is not a whole number") from None


def _order(key: str) -> tuple[int, str]:
    return (int(key), key) if str(key).isdigit() else (1 << 30, str(key))


def _folders(path: Path) -> tuple[Path, Path | None]:
    """The split's ``JPEGImages`` and ``Annotations`` (None where the split has none) for ``path``."""
    split = path.parent.name
    bases = [path.parent]
    for name in dict.fromkeys((split, "valid" if split == "val" else split)):
        bases.append(path.parent.parent.parent / name)
    images = next((base / "JPEGImages" for base in bases if (base / "JPEGImages").is_dir()), None)
    annotations = next((base / "Annotations" for base in bases if (base / "Annotations").is_dir()), None)
    if images is None:
        raise DatasetError(f"{path}: no JPEGImages folder beside it or in {bases[-1]}")
    return images, annotations


def frame_files(ref: RefFrames) -> list[Path]:
    """The image file of each listed frame, in order."""
    files = []
    for frame in ref.frames:
        found = next((ref.images / f"{frame}{suffix}" for suffix in FRAME_SUFFIXES
                      if (ref.images / f"{frame}{suffix}").is_file()), None)
        if found is None:
            raise DatasetError(f"frame {frame} of {ref.images} is missing")
        files.append(found)
    return files


def frames_video(ref: RefFrames, out: Path) -> Path:
    """The frames as an H.264 mp4 at ``ref.fps`` (made once: an existing ``out`` is kept), frame ``i`` at
    ``i / fps`` s; odd sizes are padded by a pixel (H.264 wants even ones), which the masks ignore."""
    if out.is_file():
        return out
    import av
    import cv2

    files = frame_files(ref)
    first = cv2.imread(str(files[0]), cv2.IMREAD_COLOR)
    if first is None:
        raise DatasetError(f"{files[0]}: not a readable image")
    height, width = first.shape[:2]
    even_w, even_h = width + width % 2, height + height % 2
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial.mp4")
    with av.open(str(partial), "w") as container:
        stream = container.add_stream("libx264" if "libx264" in av.codecs_available else "mpeg4",
                                      rate=_rate(ref.fps))
        stream.width, stream.height, stream.pix_fmt = even_w, even_h, "yuv420p"
        for file in files:
            image = cv2.imread(str(file), cv2.IMREAD_COLOR)
            if image is None or image.shape[:2] != (height, width):
                raise DatasetError(f"{file}: not a readable image of the sequence's {width}x{height}")
            canvas = np.zeros((even_h, even_w, 3), np.uint8)
            canvas[:height, :width] = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
            for packet in stream.encode(av.VideoFrame.from_ndarray(canvas, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    partial.replace(out)
    return out


def _rate(fps: float) -> Any:
    from fractions import Fraction

    return Fraction(fps).limit_denominator(1001)


def annotated_times(ref: RefFrames, frames: Sequence[str] | None = None) -> list[float]:
    """The times of ``frames`` (default: every listed frame) in the video ``frames_video`` makes."""
    index = {frame: i for i, frame in enumerate(ref.frames)}
    return [ref.time_of(index[frame]) for frame in (frames if frames is not None else ref.frames)]
