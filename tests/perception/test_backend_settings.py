"""Settings select Hugging Face backends in place of the offline defaults, and the memory stages
run on them (tiny randomly initialised checkpoints built in the test: no network)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import hf_tiny_models as tiny  # noqa: E402
from conftest import video_path  # noqa: E402

from vidagent.config import BackendSettings, Settings  # noqa: E402
from vidagent.memory.builder import MemoryBuilder  # noqa: E402
from vidagent.memory.store import Library  # noqa: E402
from vidagent.perception.detections import class_names  # noqa: E402
from vidagent.perception.detections import class_names  # noqa: E402
from vidagent.perception.node_assets import detector_assets_installed  # noqa: E402
from vidagent.perception.suite import Perception  # noqa: E402
from vidagent.video.video import Video  # noqa: E402


def test_backend_specs_come_from_the_environment():
    settings = Settings.from_env({"VIDAGENT_CAPTIONER": "hf:Salesforce/blip-image-captioning-base",
                                  "VIDAGENT_APPEARANCE": "hf"})
    assert settings.backends == BackendSettings(captioner="hf:Salesforce/blip-image-captioning-base", appearance="hf")
    assert Settings.from_env({}).backends == BackendSettings()


@pytest.mark.models
def test_frames_and_objects_stages_run_on_configured_hf_backends(tmp_path: Path, models_dir: Path):
    if not detector_assets_installed(models_dir):
        pytest.skip("offline models are not installed (run `vidagent models install`)")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        blip = tiny.save_blip(tmp_path / "blip", head="caption")
        clip, dino = tiny.save_clip(tmp_path / "clip"), tiny.save_dinov2(tmp_path / "dino")
        settings = replace(Settings.from_env({}), home=tmp_path / "home", models=models_dir,
                           backends=BackendSettings(captioner=f"hf:{blip}", appearance=f"hf:{clip}+{dino}"))
        perception = Perception.from_settings(settings)
        try:
            video = Video(video_path("github_LLaMA-Factory/3.mp4"))  # 6 s: a child, a teddy bear, a watermark
            with Library(settings.library_path) as library:
                memory = MemoryBuilder(library, perception, settings).build(video, ["frames", "objects"], progress=False)
                frames, objects = memory.frames, memory.objects
                configs = dict(library.rows("SELECT stage, config FROM stages WHERE video_id=?", (video.content_hash,)))
                texts = library.text_in_frames(video.content_hash)
        finally:
            perception.close()
    finally:
        torch.set_num_threads(threads)
    assert len(frames) == 3
    assert all(f.seen.caption is not None and not f.seen.objects for f in frames)  # captions, not detector facts
    assert any("clideo" in text.lower() for _, _, text in texts)  # OCR still feeds the text memory
    assert any("clideo" in " ".join(f.seen.on_screen_text).lower() for f in frames)  # beside each frame's caption
    assert "caption+text(hf:" in configs["frames"] and "hf:" in configs["objects"]
    assert objects  # re-identified with CLIP+DINOv2 features
    feature_dim = perception.appearance.dim
    with Library(settings.library_path) as library:
        blob = library.rows("SELECT feature FROM objects WHERE video_id=? LIMIT 1", (video.content_hash,))[0][0]
    assert len(blob) == 4 * feature_dim


def test_llm_threads_come_from_the_environment():
    assert Settings.from_env({"VIDAGENT_LLM_THREADS": "1"}).llm.threads == 1
    assert Settings.from_env({}).llm.threads is None  # all CPUs


@pytest.mark.models
def test_an_hf_detector_needs_no_offline_detector_installed(tmp_path: Path):
    empty = tmp_path / "models"
    empty.mkdir()
    rtdetr = tiny.save_rtdetr(tmp_path / "rtdetr", ("person", "dog", "teddy bear"))
    settings = replace(Settings.from_env({}), home=tmp_path / "home", models=empty,
                       backends=BackendSettings(detector=f"hf:{rtdetr}?threshold=0.0"))
    assert not detector_assets_installed(empty)
    perception = Perception.from_settings(settings)  # used to build (and fail on) the missing CenterNet first
    try:
        assert perception.detector.name.startswith("hf:")
        assert perception.describer.detector is perception.detector  # frames and objects share one detector
        image = torch.zeros(48, 64, 3, dtype=torch.uint8).numpy()
        (found,) = perception.detector.detect([image])
        assert len(found.xyxy) == len(class_names(found)) > 0  # threshold 0: the random model answers every query
    finally:
        perception.close()


def test_the_describer_says_what_wrote_the_descriptions(tmp_path: Path):
    empty = tmp_path / "models"
    empty.mkdir()
    rtdetr = tiny.save_rtdetr(tmp_path / "rtdetr", ("person", "dog"))
    blip = tiny.save_blip(tmp_path / "blip", head="caption")
    base = replace(Settings.from_env({}), home=tmp_path / "home", models=empty)
    captioned = Perception.from_settings(replace(base, backends=BackendSettings(captioner=f"hf:{blip}",
                                                                                detector=f"hf:{rtdetr}")))
    detected = Perception.from_settings(replace(base, backends=BackendSettings(detector=f"hf:{rtdetr}")))
    try:
        note = captioned.describer.memory_note
        assert "No captioning model" not in note  # a real captioner is not told it has none
        assert "caption of one frame written by an image-captioning model" in note and "text reader" in note
        note = detected.describer.memory_note
        assert note.startswith("No captioning model is installed: each description lists what an object detector")
        assert "a fixed set of object classes" in note  # not CenterNet's 80 COCO classes: RT-DETR's own labels
    finally:
        captioned.close()
        detected.close()
