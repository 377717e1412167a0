"""Cheaper ways to read on-screen text, each against OCR as the ``frames`` stage runs it (issue 53).

    .venv/bin/python bench/ocr_cuts.py [--long] [--max-cover 0.6]

(each cut runs OCR again over every frame: about 2 minutes on the clips, 8 more with ``--long``)

On the frames the ``frames`` stage describes (the middle of each 2-s segment, at its size) of the shared non-reserved
clips, and with ``--long`` of the 20-minute video ``index_library.py`` builds, every frame the text screen passes is
read as the stage read it before the map gate (the reference: a plain detection at 960 px, the equalised one wherever
it kept no line), and by each cut:

``region reuse``  the last read frame's lines kept where nothing changed (a 160-px grey difference over 16 levels)
                  in the screen's line boxes of this frame or in the last reading's boxes: OCR only on frames whose
                  text regions changed
``coarse gate``   a detection at 480 px (plain and equalised, thresholds 0.2 / 0.3) in front of the read: the frame
                  is read only where it finds a box
``bands``         the plain detection on the full-width bands around the screen's lines (stacked, 32 grey rows
                  apart), the whole frame where they cover more than ``--max-cover`` of it; the equalised pass on the
                  whole frame where the bands kept no line
``group faint``   the equalised pass run on the mean of each 4 frames' textless ones first, on each frame only where
                  that finds a line
``map gate``      the equalised pass only where the plain detection's probability map reached
                  ``FAINT_PASS_MIN_PEAK`` somewhere (a frame the detector saw nothing text-like in is not read
                  again): what the stage's reader does since this was measured
``map region``    as ``map gate``, and the equalised detection runs only on the box around the map's responses
                  (grown by ``MAP_MARGIN`` px at 960), not the whole frame

Reported per cut and set: seconds against the reference's, frames whose confident text differs, and the texts lost.
A cut is worth having only where it loses none.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from index_library import make_long_video, shared_clips  # noqa: E402

GAP = 32
GROUP = 4
CHANGE_SIDE, CHANGE_LEVEL, CHANGED_SHARE = 160, 16, 0.02
COARSE_SIDE, COARSE_THRESHOLDS = 480, (0.2, 0.3)
MAP_MARGIN = 32
Screened = tuple[str, np.ndarray, list[tuple[int, int, int, int]]]  # where, the frame, the screen's line boxes


class Reader:
    """The stage's reader and its two passes, taken apart so a cut can run them separately."""

    def __init__(self) -> None:
        from vidagent.perception.ocr import RapidTextReader
        from vidagent.perception.text_screen import TextScreen

        self.ocr = RapidTextReader(copies=1)  # one engine, whose detector the cuts watch
        self.ocr.load()
        self.screen = TextScreen()
        # the text detector's probability map of its last run; the reader, no longer seeing the map itself, runs
        # both passes as the reference does, and the cuts decide on the map here
        self.last_map: np.ndarray | None = None
        detector = self.ocr._engines.at(0).text_det
        session = detector.infer

        def keep_map(batch: np.ndarray) -> Any:
            out = session(batch)
            self.last_map = out[0][0, 0]
            return out

        detector.infer = keep_map

    def scaled(self, rgb: np.ndarray) -> tuple[np.ndarray, float]:
        from vidagent.perception.ocr import _resize_bgr

        scale = self.ocr.side / max(rgb.shape[:2])
        return _resize_bgr(rgb, scale), scale

    def plain(self, rgb: np.ndarray) -> list[Any]:
        bgr, scale = self.scaled(rgb)
        return self.ocr._detect_and_read(bgr, scale, (rgb.shape[1], rgb.shape[0]))

    def faint(self, rgb: np.ndarray) -> list[Any]:
        from vidagent.perception.ocr import _equalised

        bgr, scale = self.scaled(rgb)
        return self.ocr._detect_and_read(_equalised(bgr), scale, (rgb.shape[1], rgb.shape[0]))

    def texts(self, boxes: list[Any]) -> list[str]:
        from vidagent.perception.describer import confident_text
        from vidagent.perception.ocr import reading_order_by_lines

        return list(confident_text(reading_order_by_lines(list(boxes)))[1])


def coarse_finds_a_box(reader: Reader, rgb: np.ndarray) -> bool:
    from rapidocr_onnxruntime.ch_ppocr_det.utils import DBPostProcess

    from vidagent.perception.ocr import _equalised

    detector = reader.ocr._engines.at(0).text_det
    post = DBPostProcess(thresh=COARSE_THRESHOLDS[0], box_thresh=COARSE_THRESHOLDS[1], max_candidates=1000,
                         unclip_ratio=1.6, use_dilation=True, score_mode="fast")
    height, width = rgb.shape[:2]
    ratio = COARSE_SIDE / max(height, width)
    size = (max(32, round(width * ratio / 32) * 32), max(32, round(height * ratio / 32) * 32))
    bgr = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR)
    for image in (bgr, _equalised(bgr)):
        small = cv2.resize(image, size, interpolation=cv2.INTER_AREA)  # the detector's normalisation, by hand
        batch = ((small.astype(np.float32) / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None]
        boxes, _ = post(detector.infer(batch)[0], (height, width))
        if len(boxes):
            return True
    return False


def band_read(reader: Reader, rgb: np.ndarray, lines: list[tuple[int, int, int, int]], max_cover: float) -> list[Any]:
    bgr, scale = reader.scaled(rgb)
    rows = np.zeros(bgr.shape[0], bool)
    for _, y, _, h in lines:
        margin = max(8, h)
        rows[max(0, int((y - margin) * scale)):int(np.ceil((y + h + margin) * scale))] = True
    if rows.mean() > max_cover:
        return reference(reader, rgb)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], rows.astype(np.int8), [0]])))
    bands = list(zip(edges[::2], edges[1::2]))
    parts, offsets, at = [], [], 0
    for top, bottom in bands:
        offsets.append((at, top, bottom))
        parts += [bgr[top:bottom], np.full((GAP, bgr.shape[1], 3), 127, np.uint8)]
        at += bottom - top + GAP
    stacked = np.concatenate(parts)
    if stacked.shape[0] % 32:
        stacked = np.concatenate([stacked, np.full((-stacked.shape[0] % 32, bgr.shape[1], 3), 127, np.uint8)])
    height, width = rgb.shape[:2]
    boxes = []
    for box in reader.ocr._detect_and_read(stacked, 1.0, (stacked.shape[1], stacked.shape[0])):
        x1, y1, x2, y2 = box.box  # in the stacked image: moved back into its band, then into the frame's pixels
        band = next(((at, top) for at, top, bottom in offsets if at <= (y1 + y2) / 2 < at + bottom - top), None)
        if band is None:
            continue
        shift = band[1] - band[0]
        moved = np.clip(np.array([x1, y1 + shift, x2, y2 + shift]) / scale, 0, [width, height, width, height])
        boxes.append(replace(box, box=tuple(float(v) for v in moved)))
    return boxes or reader.faint(rgb)


def grey_small(rgb: np.ndarray) -> tuple[np.ndarray, float]:
    from vidagent.video.pixels import fit_side

    grey = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY)
    size = fit_side(grey.shape[1], grey.shape[0], CHANGE_SIDE, minimum=1)
    return cv2.resize(grey, size, interpolation=cv2.INTER_AREA).astype(np.float32), size[0] / grey.shape[1]


def reference(reader: Reader, rgb: np.ndarray) -> list[Any]:
    return reader.plain(rgb) or reader.faint(rgb)


def run_reference(reader: Reader, screened: list[Screened], _: float) -> list[list[Any]]:
    return [reference(reader, rgb) for _, rgb, _ in screened]


def run_region_reuse(reader: Reader, screened: list[Screened], _: float) -> list[list[Any]]:
    out: list[list[Any]] = []
    last: tuple[np.ndarray, list[Any]] | None = None
    for _, rgb, lines in screened:
        small, ratio = grey_small(rgb)
        if last is not None and not changed_under(small, last[0], ratio, lines, last[1]):
            out.append(last[1])
            continue
        boxes = reference(reader, rgb)
        last = (small, boxes)
        out.append(boxes)
    return out


def run_coarse_gate(reader: Reader, screened: list[Screened], _: float) -> list[list[Any]]:
    return [reference(reader, rgb) if coarse_finds_a_box(reader, rgb) else [] for _, rgb, _ in screened]


def run_bands(reader: Reader, screened: list[Screened], max_cover: float) -> list[list[Any]]:
    return [band_read(reader, rgb, lines, max_cover) for _, rgb, lines in screened]


def run_group_faint(reader: Reader, screened: list[Screened], _: float) -> list[list[Any]]:
    out: list[list[Any]] = []
    groups: list[list[tuple[str, np.ndarray]]] = []
    for where, rgb, _ in screened:  # up to GROUP consecutive frames of one video
        video = where.rpartition("@")[0]
        if groups and len(groups[-1]) < GROUP and groups[-1][0][0] == video:
            groups[-1].append((video, rgb))
        else:
            groups.append([(video, rgb)])
    for group in groups:
        images = [rgb for _, rgb in group]
        plain = [reader.plain(rgb) for rgb in images]
        textless = [rgb for boxes, rgb in zip(plain, images) if not boxes]
        flagged = bool(textless) and bool(reader.faint(np.mean(np.stack(textless), axis=0).astype(np.uint8)))
        out += [boxes or (reader.faint(rgb) if flagged else []) for boxes, rgb in zip(plain, images)]
    return out


def map_region(reader: Reader, rgb: np.ndarray, crop: bool) -> list[Any]:
    """The plain read; where it kept nothing, the equalised one only where the plain map responded (``crop``: only
    on the box around the responses)."""
    from vidagent.perception.ocr import FAINT_PASS_MIN_PEAK, _equalised

    plain = reader.plain(rgb)
    if plain:
        return plain
    if reader.last_map is None or not (reader.last_map >= FAINT_PASS_MIN_PEAK).any():
        return []
    responded = reader.last_map >= FAINT_PASS_MIN_PEAK
    if not crop:
        return reader.faint(rgb)
    bgr, scale = reader.scaled(rgb)
    rows, cols = np.flatnonzero(responded.any(axis=1)), np.flatnonzero(responded.any(axis=0))
    ratio_y, ratio_x = bgr.shape[0] / responded.shape[0], bgr.shape[1] / responded.shape[1]
    top, bottom = max(0, int(rows[0] * ratio_y) - MAP_MARGIN), min(bgr.shape[0], int((rows[-1] + 1) * ratio_y) + MAP_MARGIN)
    left, right = max(0, int(cols[0] * ratio_x) - MAP_MARGIN), min(bgr.shape[1], int((cols[-1] + 1) * ratio_x) + MAP_MARGIN)
    part = np.ascontiguousarray(_equalised(bgr)[top:bottom, left:right])
    height, width = rgb.shape[:2]
    boxes = []
    for box in reader.ocr._detect_and_read(part, 1.0, (part.shape[1], part.shape[0])):
        x1, y1, x2, y2 = box.box
        moved = np.clip(np.array([x1 + left, y1 + top, x2 + left, y2 + top]) / scale, 0, [width, height, width, height])
        boxes.append(replace(box, box=tuple(float(v) for v in moved)))
    return boxes


def run_map_gate(reader: Reader, screened: list[Screened], _: float) -> list[list[Any]]:
    return [map_region(reader, rgb, crop=False) for _, rgb, _ in screened]


def run_map_region(reader: Reader, screened: list[Screened], _: float) -> list[list[Any]]:
    return [map_region(reader, rgb, crop=True) for _, rgb, _ in screened]


CUTS: dict[str, Callable[[Reader, list[Screened], float], list[list[Any]]]] = {
    "reference": run_reference, "region reuse": run_region_reuse, "coarse gate": run_coarse_gate,
    "bands": run_bands, "group faint": run_group_faint, "map gate": run_map_gate, "map region": run_map_region}


def changed_under(small: np.ndarray, last: np.ndarray, ratio: float, lines: list[tuple[int, int, int, int]],
                  last_boxes: list[Any]) -> bool:
    """Whether the picture changed under this frame's screened lines or the last reading's boxes."""
    if small.shape != last.shape:
        return True
    changed = cv2.dilate((np.abs(small - last) > CHANGE_LEVEL).astype(np.uint8), np.ones((3, 3), np.uint8))
    regions = [(x, y, x + w, y + h) for x, y, w, h in lines] + [tuple(box.box) for box in last_boxes]
    for x1, y1, x2, y2 in regions:
        area = changed[int(y1 * ratio):int(np.ceil(y2 * ratio)) + 1, int(x1 * ratio):int(np.ceil(x2 * ratio)) + 1]
        if area.size and area.mean() > CHANGED_SHARE:
            return True
    return False


def described_frames(path: Path) -> list[tuple[float, np.ndarray]]:
    from vidagent.memory.stages.frames import FRAME_MAX_SIDE
    from vidagent.video.video import Video

    video = Video(path)
    times = [round((s.start_s + s.end_s) / 2, 3) for s in video.segments(2.0)]
    return [(frame.time_s, frame.image) for frame in video.frames_at(times, max_side=FRAME_MAX_SIDE)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--long", action="store_true", help="also the 20-minute video (about 7 minutes more)")
    parser.add_argument("--max-cover", type=float, default=0.6)
    parser.add_argument("--cuts", nargs="+", choices=list(CUTS), default=list(CUTS),
                        help="the cuts to run (the reference always runs)")
    args = parser.parse_args()
    reader = Reader()
    sets = {"shared clips": shared_clips()} | ({"20-minute video": [make_long_video(20)]} if args.long else {})
    print("| set | cut | screened frames | seconds | against the reference | frames read differently | texts lost |")
    print("|---|---|---:|---:|---:|---:|---|")
    for name, paths in sets.items():
        screened: list[Screened] = []
        for path in paths:
            for time_s, rgb in described_frames(path):
                lines = reader.screen.text_lines(rgb)
                if lines:
                    screened.append((f"{path.name}@{time_s:g}", rgb, lines))
        texts: dict[str, list[list[str]]] = {}
        seconds: dict[str, float] = {}
        chosen = {cut: run for cut, run in CUTS.items() if cut == "reference" or cut in args.cuts}
        for cut, run in chosen.items():
            started = time.perf_counter()
            texts[cut] = [reader.texts(boxes) for boxes in run(reader, screened, args.max_cover)]
            seconds[cut] = time.perf_counter() - started
        for cut in chosen:
            differ = [i for i, (a, b) in enumerate(zip(texts["reference"], texts[cut])) if a != b]
            lost = sorted({f"{screened[i][0]}: {text}" for i in differ for text in texts["reference"][i]
                           if not any(text.lower() in found.lower() or found.lower() in text.lower()
                                      for found in texts[cut][i])})
            print(f"| {name} | {cut} | {len(screened)} | {seconds[cut]:.1f} | "
                  f"{seconds[cut] / seconds['reference']:.2f} | {len(differ)} | {'; '.join(lost[:8]) or '-'} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
