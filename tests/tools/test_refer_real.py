"""refer_object with the real offline perception on a real clip: ``vidagent segment`` run as a process on the
boats clip (two large sailboats, grey sails on the left, white sails on the right, both in view throughout;
tiny people on them; a small boat far off on the left from 10.5 s), its object memory built by the real
detector, tracker and segmenter, and the masks it writes checked against the boxes they stand for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vidagent.perception.masks import box_mask, mask_iou, png_to_mask

from conftest import video_path

BOATS = "github_VideoAgent/boats.mp4"  # 12.5 s, 640x360

pytestmark = [pytest.mark.models, pytest.mark.clips]


def segment(video: Path, expression: str, home: Path, models_dir: Path, *more: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "VIDAGENT_HOME": str(home), "VIDAGENT_MODELS": str(models_dir)}
    return subprocess.run([sys.executable, "-m", "vidagent.cli", "segment", str(video), expression, "-q", *more],
                          env=env, capture_output=True, text=True, timeout=600)


def test_the_segment_command_finds_the_left_and_the_right_boat_with_their_masks(models_dir, tmp_path):
    boats = video_path(BOATS)
    home = tmp_path / "home"
    left = segment(boats, "the boat on the left", home, models_dir, "--json", "--no-model")
    assert left.returncode == 0, left.stderr
    right = segment(boats, "the rightmost boat", home, models_dir, "-o", str(tmp_path / "right"), "--no-model")
    assert right.returncode == 0, right.stderr
    found = json.loads(left.stdout)
    manifest = json.loads((tmp_path / "right" / "masks.json").read_text())
    assert found["category"] == manifest["category"] == "boat" and found["object_id"] != manifest["object_id"]
    assert right.stdout.startswith(f"{tmp_path / 'right'}: object {manifest['object_id']} (boat) by the parser")
    assert found["first_s"] < 1.0 and found["last_s"] > 11.0  # the grey-sailed boat, not the small one far off

    def centre_x(frames: list[dict], folder: Path) -> float:
        xs = [np.nonzero(png_to_mask((folder / f["file"]).read_bytes()))[1].mean() for f in frames]
        return float(np.median(xs))

    assert centre_x(found["frames"], Path(found["folder"])) + 100 < centre_x(manifest["frames"], tmp_path / "right")
    for frame in manifest["frames"]:  # each mask lies in its box and fills a fair part of it
        mask = png_to_mask((tmp_path / "right" / frame["file"]).read_bytes())
        box = box_mask(frame["box"], 640, 360)
        assert mask.shape == (360, 640) and (mask & ~box).sum() <= 0.02 * mask.sum()
        assert 0.2 < mask_iou(mask, box) <= 1.0
    assert (tmp_path / "right" / "overlay.mp4").stat().st_size > 10_000

    nothing = segment(boats, "the giraffe", home, models_dir, "--no-model")
    assert nothing.returncode == 2 and nothing.stderr.startswith("vidagent: error: no giraffe in this video's object")
