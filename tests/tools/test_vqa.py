"""Visual question answering in tools/ (it combines a perception model with the chat model): the
offline backend describes real frames with the detector and lets a real local LLM answer."""

from __future__ import annotations

import pytest

from conftest import video_path
from vidagent.config import Settings
from vidagent.errors import ModelUnavailableError
from vidagent.perception.base import VQAResult
from vidagent.perception.describer import DESCRIPTION_PREFIX, DetectorDescriber
from vidagent.perception.detector import CenterNetDetector
from vidagent.perception.node_assets import detector_assets_installed
from vidagent.tools.vqa import DescribedFramesVQA, VisionChatVQA
from vidagent.video.video import Video

MODELS_DIR = Settings.from_env().models_dir


@pytest.mark.models
def test_described_frames_vqa_answers_from_detector_descriptions():
    if not detector_assets_installed(MODELS_DIR):
        pytest.skip("offline models are not installed (run `vidagent models install`)")
    from vidagent.llm.client import build_llm

    try:
        llm = build_llm(Settings(home=MODELS_DIR.parent, models=MODELS_DIR).with_llm(model="smollm2-135m", cache=False))
    except ModelUnavailableError:
        pytest.skip("smollm2-135m is not installed (run `vidagent models install smollm2-135m`)")
    frames = list(Video(video_path("github_sam2/01_dog.mp4")).frames_at([0.5, 1.0], max_side=480))
    with CenterNetDetector(MODELS_DIR) as detector:
        vqa = DescribedFramesVQA(DetectorDescriber(detector), llm)
        result = vqa.answer("What animal is in the video?", frames)
    assert isinstance(result, VQAResult)
    lines = result.description.splitlines()
    assert [line.split(" s: ")[0] for line in lines] == [f"{f.time_s:.1f}" for f in frames]
    assert all(DESCRIPTION_PREFIX not in line for line in lines) and "dog" in result.description
    assert result.answer  # the LLM's words, read from the tools/ prompt
    assert vqa.name == "described-frames(detector-describer(centernet-mobilenetv3-coco+ball-not-frisbee))"
    assert VisionChatVQA.name == "vision-chat"
