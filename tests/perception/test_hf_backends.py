"""Hugging Face backends, run for real on tiny randomly initialised checkpoints (no network).

The checkpoints (``hf_tiny_models``) are built from configs, saved with ``save_pretrained`` and loaded
back through vidagent's loading code, then run on real frames of a test clip. Their outputs are
meaningless words and boxes; what is checked is the contract every backend promises: types, shapes,
boxes inside the image, unit embeddings, calibrated similarities, determinism, batching.

torch runs on one thread here: these models are so small that a second thread only adds overhead,
and the test machines' two cores are shared.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import hf_tiny_models as tiny  # noqa: E402
from conftest import video_path  # noqa: E402

from vidagent.errors import ModelUnavailableError, ToolInputError  # noqa: E402
import supervision as sv  # noqa: E402

from vidagent.perception.base import FrameDescription  # noqa: E402
from vidagent.perception.detections import class_names  # noqa: E402
from vidagent.perception.hf import (  # noqa: E402
    ClipDinoAppearance,
    ClipEmbedder,
    DinoEmbedder,
    GroundingDinoDetector,
    HFCaptioner,
    HFDetector,
    HFVisualQA,
    LoadOptions,
    build_backend,
    format_spec,
    load_model,
    parse_spec,
)
from vidagent.perception.hf.generation import chat_prompt  # noqa: E402
from vidagent.perception.hf.images import to_pil  # noqa: E402
from vidagent.perception.hf.vqa import most_common, parse_reply  # noqa: E402
from vidagent.video.sampling import take_every as spread  # noqa: E402
from vidagent.perception.base import VQAResult  # noqa: E402
from vidagent.prompts import load_prompt  # noqa: E402
from vidagent.video.video import SampledFrame, Video  # noqa: E402

CLIP = "github_sam2/01_dog.mp4"
DETECTOR_LABELS = ("dog", "person", "ball")


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def frames() -> list[SampledFrame]:
    return list(Video(video_path(CLIP)).frames_at([1.0, 2.0], max_side=256))


@pytest.fixture(scope="module")
def images(frames) -> list[np.ndarray]:
    return [frame.image for frame in frames]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hf-tiny")
    return {
        "blip_caption": str(tiny.save_blip(root / "blip-caption", head="caption")),
        "blip_vqa": str(tiny.save_blip(root / "blip-vqa", head="vqa")),
        "llava": str(tiny.save_llava(root / "llava")),
        "rtdetr": str(tiny.save_rtdetr(root / "rtdetr", DETECTOR_LABELS)),
        "detr": str(tiny.save_detr(root / "detr", DETECTOR_LABELS)),
        "grounding_dino": str(tiny.save_grounding_dino(root / "grounding-dino")),
        "clip": str(tiny.save_clip(root / "clip")),
        "siglip": str(tiny.save_siglip(root / "siglip")),
        "dinov2": str(tiny.save_dinov2(root / "dinov2")),
    }


@pytest.fixture(scope="module")
def clip_embedder(checkpoints) -> ClipEmbedder:
    return ClipEmbedder(checkpoints["clip"], batch_size=2)


@pytest.fixture(scope="module")
def dino_embedder(checkpoints) -> DinoEmbedder:
    return DinoEmbedder(checkpoints["dinov2"], batch_size=2)


# -- loading ----------------------------------------------------------------------------------------


def test_load_model_gives_an_inference_ready_model_on_the_cpu(checkpoints):
    loaded = load_model(checkpoints["blip_caption"], ("AutoModelForImageTextToText",), role="captioner")
    assert type(loaded.model).__name__ == "BlipForConditionalGeneration"
    assert type(loaded.processor).__name__ == "BlipProcessor"
    assert not loaded.model.training
    assert not any(parameter.requires_grad for parameter in loaded.model.parameters())
    assert loaded.device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert loaded.dtype == torch.float32 or loaded.device.type == "cuda"
    assert next(loaded.model.parameters()).dtype == loaded.dtype
    moved = loaded.to_device({"pixel_values": torch.zeros(1, 3, 4, 4, dtype=torch.float64),
                              "input_ids": torch.zeros(1, 2, dtype=torch.int64)})
    assert moved["pixel_values"].dtype == loaded.dtype and moved["input_ids"].dtype == torch.int64


def test_the_first_auto_class_that_knows_the_checkpoint_loads_it(checkpoints):
    loaded = load_model(checkpoints["blip_vqa"], ("AutoModelForObjectDetection", "BlipForQuestionAnswering"))
    assert type(loaded.model).__name__ == "BlipForQuestionAnswering"


@pytest.mark.models
def test_a_missing_model_folder_is_a_one_line_model_unavailable_error(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelUnavailableError) as caught:
        HFCaptioner(str(missing)).caption([np.zeros((8, 8, 3), np.uint8)])
    message = str(caught.value)
    assert "captioner" in message and str(missing) in message and "does not exist" in message
    assert "\n" not in message


@pytest.mark.models
def test_a_folder_without_weights_is_a_model_unavailable_error(checkpoints, tmp_path):
    folder = tmp_path / "config-only"
    folder.mkdir()
    (folder / "config.json").write_text(Path(checkpoints["dinov2"], "config.json").read_text())
    with pytest.raises(ModelUnavailableError, match=r"image embedder model .*config-only.* cannot be loaded"):
        DinoEmbedder(str(folder)).load()


@pytest.mark.models
def test_a_hub_model_not_in_the_cache_offline_says_how_to_get_it(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # read at load time: only the local cache is consulted
    with pytest.raises(ModelUnavailableError) as caught:
        HFDetector("vidagent-tests/no-such-detector").load()
    message = str(caught.value)
    assert "vidagent-tests/no-such-detector" in message and "object detector" in message
    assert "hf download vidagent-tests/no-such-detector" in message and "\n" not in message


@pytest.mark.models
def test_a_checkpoint_of_the_wrong_kind_is_refused_by_name(checkpoints):
    with pytest.raises(ModelUnavailableError, match=r"is a 'dinov2' model.*cannot use as a captioner"):
        HFCaptioner(checkpoints["dinov2"]).load()


def test_without_torch_the_package_imports_and_loading_says_how_to_install(checkpoints):
    script = (
        "import sys; sys.modules['torch'] = None\n"  # makes `import torch` fail, as when it is not installed
        "import vidagent.perception.hf as hf\n"
        "from vidagent.errors import ModelUnavailableError\n"
        f"try:\n    hf.HFCaptioner({checkpoints['blip_caption']!r}).load()\n"
        "except ModelUnavailableError as error:\n    print('ERROR', error)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "ERROR torch is not installed" in result.stdout and "pip install 'vidagent[hf]'" in result.stdout


# -- specs and the factory ----------------------------------------------------------------------------


def test_specs_parse_and_format_round_trip():
    spec = parse_spec("hf:Salesforce/blip-image-captioning-base?prompt=a picture of&num_beams=3")
    assert spec.model == "Salesforce/blip-image-captioning-base"
    assert dict(spec.options) == {"prompt": "a picture of", "num_beams": "3"}
    assert parse_spec("hf").model is None and parse_spec("hf?device=cpu").options == {"device": "cpu"}
    text = format_spec("/models/my blip", {"prompt": "x & y = z", "num_beams": 2, "unused": None})
    parsed = parse_spec(text)
    assert parsed.model == "/models/my blip" and dict(parsed.options) == {"prompt": "x & y = z", "num_beams": "2"}
    assert format_spec(parsed.model, parsed.options) == text


def test_the_factory_builds_each_role_without_loading(checkpoints):
    captioner = build_backend("captioner", f"hf:{checkpoints['blip_caption']}?prompt=a picture of&max_new_tokens=5")
    assert isinstance(captioner, HFCaptioner) and captioner.prompt == "a picture of" and captioner.max_new_tokens == 5
    assert parse_spec(captioner.name).model == checkpoints["blip_caption"]  # a backend's name is its spec
    assert build_backend("detector", "hf?threshold=0.4").threshold == 0.4
    assert build_backend("detector", "hf").model == "PekingU/rtdetr_r50vd"
    assert build_backend("vqa", "hf").model == "Salesforce/blip-vqa-base"
    assert isinstance(build_backend("grounding", "hf"), GroundingDinoDetector)
    assert isinstance(build_backend("image_text", "hf:google/siglip-base-patch16-224"), ClipEmbedder)
    assert isinstance(build_backend("image_features", "hf"), DinoEmbedder)
    appearance = build_backend("appearance", "hf:openai/clip-vit-base-patch16+facebook/dinov2-base?device=cpu")
    assert isinstance(appearance, ClipDinoAppearance)
    assert (appearance.clip.model, appearance.dino.model) == ("openai/clip-vit-base-patch16", "facebook/dinov2-base")
    assert appearance.clip.options == LoadOptions(device="cpu")


@pytest.mark.parametrize("role, spec, message", [
    ("captioner", "blip", "expected hf"),
    ("captioner", "hf?colour=red", "takes no option 'colour'"),
    ("detector", "hf?threshold=high", "threshold='high'"),
    ("detector", "hf?threshold=2", "threshold must be in"),
    ("vqa", "hf?device=tpu", "unknown device"),
    ("appearance", "hf:openai/clip-vit-base-patch32", "CLIP_MODEL+DINOV2_MODEL"),
    ("speech", "hf", "no Hugging Face backend for role 'speech'"),
])
def test_bad_specs_are_model_unavailable_errors(role, spec, message):
    with pytest.raises(ModelUnavailableError, match=re.escape(message)):
        build_backend(role, spec)


# -- captioning -----------------------------------------------------------------------------------------


@pytest.mark.models
def test_blip_captioner_describes_each_frame(checkpoints, images):
    captioner = HFCaptioner(checkpoints["blip_caption"], max_new_tokens=6, batch_size=2)
    described = captioner.describe(images)
    assert len(described) == len(images)
    assert all(isinstance(d, FrameDescription) and isinstance(d.caption, str) for d in described)
    assert any(d.caption for d in described)
    assert captioner.describe(images) == described  # greedy decoding: same frames, same words
    assert not captioner.chat


@pytest.mark.models
def test_captioner_batches_equal_one_by_one(checkpoints, images):
    captioner = HFCaptioner(checkpoints["blip_caption"], max_new_tokens=6, batch_size=2)
    batched = captioner.caption(images)
    captioner.batch_size = 1
    assert captioner.caption(images) == batched


def _raw_generation(folder: str, image: np.ndarray, prompt: str, max_new_tokens: int) -> tuple[str, str]:
    """What the model's own ``generate`` returns for one image and prompt: (full text, the prompt's text).

    The inputs go to the model's device and dtype as the backends' do (a GPU, where there is one)."""
    loaded = load_model(folder, ("AutoModelForImageTextToText",))
    inputs = loaded.encode(images=[to_pil(image)], text=[prompt], return_tensors="pt")
    with torch.inference_mode():
        output = loaded.model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False).cpu()
    decode = loaded.processor.tokenizer.batch_decode
    return (decode(output, skip_special_tokens=True)[0].strip(),
            decode(inputs["input_ids"].cpu(), skip_special_tokens=True)[0])


@pytest.mark.models
def test_a_text_prefix_echoed_by_blip_is_cut_from_the_caption(checkpoints, images):
    full, prompt = _raw_generation(checkpoints["blip_caption"], images[0], "a dog", 6)
    assert prompt == "a dog" and full.startswith("a dog ")  # BLIP's output repeats its text prefix
    (caption,) = HFCaptioner(checkpoints["blip_caption"], prompt="a dog", max_new_tokens=6).caption(images[:1])
    assert caption == full[len("a dog"):].strip() and caption


@pytest.mark.models
def test_chat_vlm_captioner_returns_only_the_generated_text(checkpoints, images):
    captioner = HFCaptioner(checkpoints["llava"], max_new_tokens=5, batch_size=2)
    captions = captioner.caption(images)
    assert captioner.chat and len(captions) == 2 and all(isinstance(c, str) for c in captions)
    loaded = load_model(checkpoints["llava"], ("AutoModelForImageTextToText",))
    prompt = chat_prompt(loaded.processor, load_prompt("vidagent.perception", "hf_caption_chat").strip(), 1)
    full, echoed = _raw_generation(checkpoints["llava"], images[0], prompt, 5)
    assert full.startswith(echoed) and captions[0] == full[len(echoed):].strip()  # the prompt is cut off
    captioner.batch_size = 1
    assert captioner.caption(images) == captions


# -- visual question answering ----------------------------------------------------------------------------


@pytest.mark.models
def test_blip_vqa_asks_each_frame_and_keeps_the_commonest_answer(checkpoints, frames):
    vqa = HFVisualQA(checkpoints["blip_vqa"], max_new_tokens=4)
    result = vqa.answer("what color is the dog?", frames)
    assert isinstance(result, VQAResult)
    lines = result.description.splitlines()
    assert [line.split(":")[0] for line in lines] == ["1.0 s", "2.0 s"]
    assert result.answer == most_common([line.split(": ", 1)[1] if ": " in line else "" for line in lines])
    assert vqa.answer("what color is the dog?", frames) == result


@pytest.mark.models
def test_chat_vlm_vqa_sees_several_frames_in_one_prompt(checkpoints, frames):
    vqa = HFVisualQA(checkpoints["llava"], max_new_tokens=8, max_frames=2)
    result = vqa.answer("what is the dog doing?", frames)
    assert isinstance(result, VQAResult) and isinstance(result.answer, str)
    assert vqa.answer("what is the dog doing?", frames) == result


def test_vqa_refuses_an_empty_question_or_no_frames(checkpoints, frames):
    vqa = HFVisualQA(checkpoints["blip_vqa"])
    with pytest.raises(ToolInputError):
        vqa.answer("  ", frames)
    with pytest.raises(ToolInputError):
        vqa.answer("what?", [])


def test_vqa_helpers():
    assert parse_reply("Description: a dog runs.\nAnswer: running") == VQAResult("a dog runs.", "running")
    assert parse_reply("just running") == VQAResult("", "just running")
    assert most_common(["Brown", "black", "brown "]) == "Brown"
    assert most_common(["a", "b"]) == "a"
    times = [SampledFrame(float(t), np.zeros((1, 1, 3), np.uint8)) for t in range(10)]
    assert [f.time_s for f in spread(times, 4)] == [0.0, 2.0, 5.0, 7.0]
    assert spread(times[:3], 4) == times[:3]


# -- detection ------------------------------------------------------------------------------------------------


def _check_detections(result: sv.Detections, image: np.ndarray, labels: tuple[str, ...]) -> None:
    height, width = image.shape[:2]
    n = len(result)
    assert result.xyxy.shape == (n, 4) and result.xyxy.dtype == np.float32
    assert result.confidence.shape == (n,) and result.confidence.dtype == np.float32
    assert result.class_id.shape == (n,) and result.class_id.dtype == np.int32
    names = class_names(result)
    assert len(names) == n and all(names[i] == labels[result.class_id[i]] for i in range(n))
    assert np.all(result.xyxy[:, 0] >= 0) and np.all(result.xyxy[:, 2] <= width)
    assert np.all(result.xyxy[:, 1] >= 0) and np.all(result.xyxy[:, 3] <= height)
    assert np.all(result.xyxy[:, 2] > result.xyxy[:, 0]) and np.all(result.xyxy[:, 3] > result.xyxy[:, 1])
    assert np.all(np.diff(result.confidence) <= 0)


@pytest.mark.models
@pytest.mark.parametrize("family", ["rtdetr", "detr"])
def test_detector_boxes_are_pixels_inside_each_frame(checkpoints, images, family):
    detector = HFDetector(checkpoints[family], threshold=0.0, batch_size=2)
    results = detector.detect(images)
    assert len(results) == len(images) and all(len(r) > 0 for r in results)
    for result, image in zip(results, images):
        _check_detections(result, image, DETECTOR_LABELS)
    assert detector.labels == dict(enumerate(DETECTOR_LABELS))


@pytest.mark.models
def test_detector_batches_equal_one_by_one_and_threshold_filters(checkpoints, images):
    detector = HFDetector(checkpoints["rtdetr"], threshold=0.0, batch_size=2)
    batched = detector.detect(images)
    detector.batch_size = 1
    single = detector.detect(images)
    for a, b in zip(batched, single):
        assert class_names(a) == class_names(b)
        np.testing.assert_allclose(a.xyxy, b.xyxy, atol=1e-3)
        np.testing.assert_allclose(a.confidence, b.confidence, atol=1e-5)
    cut = float(np.median(batched[0].confidence))
    strict = HFDetector(checkpoints["rtdetr"], threshold=cut).detect(images[:1])[0]
    assert 0 < len(strict) <= len(batched[0]) and np.all(strict.confidence >= cut - 1e-6)


@pytest.mark.models
def test_grounding_dino_labels_are_the_queries(checkpoints, images):
    queries = ["a dog", "Red Ball"]
    detector = GroundingDinoDetector(checkpoints["grounding_dino"], threshold=0.0, batch_size=2)
    results = detector.detect(images, queries)
    assert len(results) == 2 and all(len(r) > 0 for r in results)
    for result, image in zip(results, images):
        _check_detections(result, image, tuple(queries))
    assert class_names(detector.detect(images, queries)[0]) == class_names(results[0])  # deterministic
    detector.batch_size = 1
    single = detector.detect(images, queries)
    np.testing.assert_allclose(single[1].confidence, results[1].confidence, atol=1e-5)


@pytest.mark.models
def test_grounding_dino_maps_caption_tokens_to_queries(checkpoints):
    detector = GroundingDinoDetector(checkpoints["grounding_dino"])
    caption, token_query = detector._caption(detector._loaded.get(), ["a dog", "red ball"])
    assert caption == "a dog. red ball."
    # [CLS] a dog . red ball . [SEP]
    assert token_query.tolist() == [-1, 0, 0, -1, 1, 1, -1, -1]


@pytest.mark.models
def test_grounding_dino_refuses_empty_or_too_many_queries(checkpoints, images):
    detector = GroundingDinoDetector(checkpoints["grounding_dino"])
    with pytest.raises(ToolInputError):
        detector.detect(images, [])
    with pytest.raises(ToolInputError, match="too long"):
        detector.detect(images, [f"red ball {i}" for i in range(12)])  # the tiny model reads 24 tokens


# -- embeddings and appearance ----------------------------------------------------------------------------------


@pytest.mark.models
def test_clip_embeddings_are_unit_rows_in_one_space(clip_embedder, images):
    image_rows = clip_embedder.embed_images(images)
    text_rows = clip_embedder.embed_texts(["a dog on the grass", "a red ball", "a cat"])
    assert clip_embedder.dim == 24
    assert image_rows.shape == (2, 24) and text_rows.shape == (3, 24)
    assert image_rows.dtype == np.float32 and text_rows.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(image_rows, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(text_rows, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(clip_embedder.embed_images(images), image_rows)


@pytest.mark.models
def test_embedders_batch_equal_one_by_one(clip_embedder, dino_embedder, images):
    for embed in (clip_embedder.embed_images, dino_embedder.embed_images):
        batched = embed(images)
        one_by_one = np.concatenate([embed([image]) for image in images])
        np.testing.assert_allclose(batched, one_by_one, atol=1e-5)
    texts = ["a dog", "the red ball is on the grass"]
    np.testing.assert_allclose(clip_embedder.embed_texts(texts),
                               np.concatenate([clip_embedder.embed_texts([t]) for t in texts]), atol=1e-5)


@pytest.mark.models
def test_siglip_texts_are_padded_as_it_was_trained_so_batching_does_not_change_them(checkpoints, images):
    embedder = ClipEmbedder(checkpoints["siglip"], batch_size=2)
    texts = ["a dog", "the red ball is on the grass with a cat"]
    rows = embedder.embed_texts(texts)
    assert embedder.dim == 32 and rows.shape == (2, 32)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(rows, np.concatenate([embedder.embed_texts([t]) for t in texts]), atol=1e-5)
    assert embedder.embed_images(images).shape == (2, 32)


def test_embedding_widths_come_from_the_config_without_loading_weights(checkpoints):
    clip, dino = ClipEmbedder(checkpoints["clip"]), DinoEmbedder(checkpoints["dinov2"])
    assert ClipDinoAppearance(clip, dino).dim == 24 + 32
    assert not clip._loaded.loaded and not dino._loaded.loaded


@pytest.mark.models
def test_dinov2_features_are_unit_rows(dino_embedder, images):
    rows = dino_embedder.embed_images(images)
    assert dino_embedder.dim == 32 and rows.shape == (2, 32) and rows.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)


@pytest.mark.models
def test_appearance_features_and_similarities(clip_embedder, dino_embedder, images):
    appearance = ClipDinoAppearance(clip_embedder, dino_embedder)
    crops = [images[0][20:120, 40:200], images[1][20:120, 40:200], images[1][50:60, 10:13]]  # last: 3 px wide
    features = appearance.features(crops)
    assert appearance.dim == 24 + 32 and features.shape == (3, 56) and features.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(features[:, :24], axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(features[:, 24:], axis=1), 1.0, atol=1e-5)
    similarity = appearance.similarity(features, features)
    assert similarity.shape == (3, 3) and np.all((similarity >= 0) & (similarity <= 1))
    np.testing.assert_allclose(similarity, similarity.T, atol=1e-6)
    assert appearance.similarity(features[:1], features[1:]).shape == (1, 2)


def test_appearance_similarity_is_videoagents_sigmoid_ensemble(clip_embedder, dino_embedder):
    appearance = ClipDinoAppearance(clip_embedder, dino_embedder)

    def feature(clip_cos: float, dino_cos: float) -> np.ndarray:
        """A feature row whose CLIP part has cosine ``clip_cos`` with e0 and DINOv2 part ``dino_cos``."""
        clip, dino = np.zeros(24, np.float32), np.zeros(32, np.float32)
        clip[0], clip[1] = clip_cos, math.sqrt(1 - clip_cos**2)
        dino[0], dino[1] = dino_cos, math.sqrt(1 - dino_cos**2)
        return np.concatenate([clip, dino])

    anchor = feature(1.0, 1.0)
    others = np.stack([feature(1.0, 1.0), feature(0.925, 0.5), feature(0.0, 0.0)])
    got = appearance.similarity(anchor[None], others)[0]
    # identical: 0.15 / (1 + e^-1.5) + 0.85 / (1 + e^-2.05); at both midpoints: 0.5;
    # orthogonal: 0.15 / (1 + e^18.5) + 0.85 / (1 + e^2.05)
    expected = [0.15 * 0.8175745 + 0.85 * 0.8859476, 0.5, 0.15 * 9.24e-9 + 0.85 * 0.1140524]
    np.testing.assert_allclose(got, expected, atol=1e-6)
