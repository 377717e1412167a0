"""What OCR's faint-text pass (a second detection on the locally equalised frame, where the plain pass kept no
line) finds on the frames the ``frames`` stage describes, and what a cheaper gate in front of it would lose.

    .venv/bin/python bench/faint_text.py [--step 2]

For each non-reserved shared clip, the frame in the middle of each ``--step``-second segment at the frames
stage's size, read through the text screen as the describer reads it: the plain pass, and where it kept nothing
the equalised pass, timed; and the equalised pass alone on every screened frame (one detection in place of two: what
it reads where the plain pass read something). For each frame the equalised pass ran on, the gates' verdicts: the text screen on the
equalised frame (``screen``), and the text screen on the plain frame at the gates' scales. Reported: frames,
plain passes, equalised passes and what they found (text, per clip), the seconds each pass took, and per gate
the equalised passes it would skip and the found texts it would lose (a gate is worth having only at 0 lost).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from index_library import shared_clips  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", type=float, default=2.0)
    args = parser.parse_args()

    from vidagent.memory.stages.frames import FRAME_MAX_SIDE
    from vidagent.perception import ocr as ocr_module
    from vidagent.perception.ocr import RapidTextReader
    from vidagent.perception.text_screen import TextScreen
    from vidagent.video.video import Video

    reader, screen = RapidTextReader(), TextScreen()
    reader.load()
    counts: dict[str, int] = defaultdict(int)
    seconds: dict[str, float] = defaultdict(float)
    found: list[tuple[str, float, str, bool]] = []  # clip, time, text, screened-in on the equalised frame
    for clip in shared_clips():
        video = Video(clip)
        times = [t + args.step / 2 for t in np.arange(0, video.duration_s - args.step / 2, args.step)] or [0.0]
        for frame in video.frames_at(times, max_side=FRAME_MAX_SIDE):
            counts["frames"] += 1
            if not screen.may_hold_text(frame.image):
                continue
            rgb = frame.image
            height, width = rgb.shape[:2]
            scale = reader.side / max(height, width)
            bgr = ocr_module._resize_bgr(rgb, scale)
            started = time.perf_counter()
            plain = reader._detect_and_read(bgr, scale, (width, height))
            seconds["plain"] += time.perf_counter() - started
            counts["plain passes"] += 1
            started = time.perf_counter()
            equalised_bgr = ocr_module._equalised(bgr)
            faint = reader._detect_and_read(equalised_bgr, scale, (width, height))
            equalised_s = time.perf_counter() - started
            seconds["equalised alone"] += equalised_s
            if plain:
                counts["plain found"] += 1
                same = sorted(b.text for b in plain) == sorted(b.text for b in faint)
                counts["equalised alone reads the same"] += int(same)
                if not same:
                    print(f"  {clip.name} {frame.time_s:.1f}s plain {[b.text for b in plain]} "
                          f"equalised {[b.text for b in faint]}")
                continue
            seconds["equalised"] += equalised_s
            counts["equalised passes"] += 1
            started = time.perf_counter()
            passes = screen.may_hold_text(np.ascontiguousarray(equalised_bgr[:, :, ::-1]))
            seconds["screen on equalised"] += time.perf_counter() - started
            counts["screen passes equalised"] += int(passes)
            if faint:
                counts["equalised found"] += 1
                found.append((clip.name, frame.time_s, " | ".join(box.text for box in faint), passes))
    print("| measure | value |\n|---|---:|")
    for key, value in counts.items():
        print(f"| {key} | {value} |")
    for key, value in seconds.items():
        print(f"| {key} s | {value:.1f} |")
    print("\nfound by the equalised pass (clip, time, text, the screen on the equalised frame passes it):")
    for clip_name, time_s, text, passes in found:
        print(f"  {clip_name} {time_s:.1f}s {text!r} {'pass' if passes else 'SKIPPED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
