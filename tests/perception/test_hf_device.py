"""Every Hugging Face backend hands its model the inputs on the model's device and in its dtype, checked
without a GPU.

Each backend loads a tiny checkpoint through vidagent's own loading code with the device resolved to
torch's ``meta`` device (weights without data) and the dtype set to bfloat16, so ``LoadedModel.device``
is not the CPU, as on a GPU machine. The model's entry points (``forward``, ``generate``,
``get_image_features``, ``get_text_features``) are wrapped by a guard that looks at every tensor
argument, nested ones too: each must be on the meta device, floating ones in bfloat16. A tensor left on
the CPU (on a GPU: "Input type (CPUBFloat16Type) and weight type (CUDABFloat16Type) should be the
same") is reported by name; torch itself would not complain, as it lets CPU tensors meet meta weights.
Once the inputs pass, the guard stops the call (``ReachedModel``): meta tensors hold no data to compute
with, so what follows the model call is not run here.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import hf_tiny_models as tiny  # noqa: E402
from test_hf_segmenter import save_tiny_sam, save_tiny_sam2  # noqa: E402
from test_video_classifier import save_videomae, save_xclip  # noqa: E402
from test_hf_backends import one_torch_thread  # noqa: E402,F401  (module fixture: one torch thread)

from vidagent.perception.hf import (  # noqa: E402
    ClipEmbedder,
    DinoEmbedder,
    GroundingDinoDetector,
    HFCaptioner,
    HFDetector,
    HFSegmenter,
    HFVideoClassifier,
    HFVisualQA,
    LoadedModel,
    LoadOptions,
    load_model,
)
from vidagent.perception.hf import loading  # noqa: E402
from vidagent.perception.hf.images import to_pil  # noqa: E402
from vidagent.video.video import SampledFrame  # noqa: E402

pytestmark = pytest.mark.models

DEVICE = torch.device("meta")
DTYPE = torch.bfloat16
BFLOAT16 = LoadOptions(dtype="bfloat16")
ENTRY_POINTS = ("forward", "generate", "get_image_features", "get_text_features")
IMAGES = [(np.random.default_rng(seed).random((48, 80, 3)) * 255).astype(np.uint8) for seed in (1, 2)]
FRAMES = [SampledFrame(float(index), image) for index, image in enumerate(IMAGES)]
HAS_TORCHVISION = importlib.util.find_spec("torchvision") is not None

SAVERS: dict[str, Callable[[Path], Path]] = {
    "blip_caption": lambda folder: tiny.save_blip(folder, head="caption"),
    "blip_vqa": lambda folder: tiny.save_blip(folder, head="vqa"),
    "llava": tiny.save_llava,
    "rtdetr": lambda folder: tiny.save_rtdetr(folder, ("dog", "person")),
    "grounding_dino": tiny.save_grounding_dino,
    "clip": tiny.save_clip,
    "siglip": tiny.save_siglip,
    "dinov2": tiny.save_dinov2,
    "sam": save_tiny_sam,
    "sam2": save_tiny_sam2,
    "videomae": save_videomae,
    "xclip": save_xclip,
}


class ReachedModel(Exception):
    """Raised by the guard when a model entry point got every input on the model's device and dtype."""


class Checkpoints:
    """Tiny checkpoints by name, each saved on first use into one folder for the module."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.saved: dict[str, str] = {}

    def __getitem__(self, name: str) -> str:
        if name not in self.saved:
            self.saved[name] = str(SAVERS[name](self.root / name))
        return self.saved[name]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> Checkpoints:
    return Checkpoints(tmp_path_factory.mktemp("hf-device"))


@pytest.fixture
def on_meta(monkeypatch):
    """Models load as on an accelerator: ``load_model`` resolves every device to ``meta``."""
    monkeypatch.setattr(loading, "resolve_device", lambda device="auto": DEVICE)


def misplaced(value: Any, where: str) -> list[str]:
    """What is wrong with ``value``'s tensors (``where`` names it): off the model's device, or floating
    in another dtype than the model's."""
    if isinstance(value, torch.Tensor):
        problems = [f"{where} is on {value.device}"] if value.device.type != DEVICE.type else []
        if value.is_floating_point() and value.dtype != DTYPE:
            problems.append(f"{where} is {value.dtype}")
        return problems
    if isinstance(value, (list, tuple)):
        return [problem for index, item in enumerate(value) for problem in misplaced(item, f"{where}[{index}]")]
    if isinstance(value, Mapping):
        return [problem for key, item in value.items() for problem in misplaced(item, f"{where}[{key!r}]")]
    return []


def guarded(name: str) -> Callable[..., Any]:
    """A stand-in for the model's entry point ``name`` that checks its arguments, then stops the call."""

    def check(*args: Any, **kwargs: Any) -> Any:
        problems = [problem for index, arg in enumerate(args) for problem in misplaced(arg, f"argument {index}")]
        problems += [problem for key, arg in kwargs.items() for problem in misplaced(arg, key)]
        assert not problems, f"model.{name} got inputs off the model's device or dtype: {'; '.join(problems)}"
        raise ReachedModel(name)

    return check


def guard(loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """Wrap the loaded model's entry points in ``guarded`` (for this test only)."""
    assert loaded.device == DEVICE and loaded.dtype == DTYPE
    assert next(loaded.model.parameters()).device == DEVICE
    for name in ENTRY_POINTS:
        if callable(getattr(loaded.model, name, None)):
            monkeypatch.setattr(loaded.model, name, guarded(name))


Backend = Any
CASES = [
    pytest.param("blip_caption", lambda path: HFCaptioner(path, prompt="a dog", max_new_tokens=3, options=BFLOAT16),
                 lambda backend: backend.caption(IMAGES), id="caption-blip-with-a-prefix"),
    pytest.param("blip_caption", lambda path: HFCaptioner(path, max_new_tokens=3, options=BFLOAT16),
                 lambda backend: backend.caption(IMAGES), id="caption-blip"),
    pytest.param("llava", lambda path: HFCaptioner(path, max_new_tokens=3, options=BFLOAT16),
                 lambda backend: backend.caption(IMAGES), id="caption-chat-vlm"),
    pytest.param("blip_vqa", lambda path: HFVisualQA(path, max_new_tokens=3, options=BFLOAT16),
                 lambda backend: backend.answer("what is the dog doing?", FRAMES), id="vqa-blip"),
    pytest.param("llava", lambda path: HFVisualQA(path, max_new_tokens=3, options=BFLOAT16),
                 lambda backend: backend.answer("what is the dog doing?", FRAMES), id="vqa-chat-vlm"),
    pytest.param("rtdetr", lambda path: HFDetector(path, threshold=0.0, options=BFLOAT16),
                 lambda backend: backend.detect(IMAGES), id="detect-rtdetr"),
    pytest.param("grounding_dino", lambda path: GroundingDinoDetector(path, threshold=0.0, options=BFLOAT16),
                 lambda backend: backend.detect(IMAGES, ["a dog", "red ball"]), id="detect-grounding-dino"),
    pytest.param("clip", lambda path: ClipEmbedder(path, options=BFLOAT16),
                 lambda backend: backend.embed_images(IMAGES), id="embed-clip-images"),
    pytest.param("clip", lambda path: ClipEmbedder(path, options=BFLOAT16),
                 lambda backend: backend.embed_texts(["a dog", "a red ball on the grass"]), id="embed-clip-texts"),
    pytest.param("siglip", lambda path: ClipEmbedder(path, options=BFLOAT16),
                 lambda backend: backend.embed_texts(["a dog"]), id="embed-siglip-texts"),
    pytest.param("dinov2", lambda path: DinoEmbedder(path, options=BFLOAT16),
                 lambda backend: backend.embed_images(IMAGES), id="embed-dinov2"),
    pytest.param("sam", lambda path: HFSegmenter(path, options=BFLOAT16),
                 lambda backend: backend.segment(IMAGES[0], [(10, 10, 40, 30), (50, 5, 70, 40)], ["dog", "cat"]),
                 id="segment-sam"),
    # SAM 2's image processor is torchvision's: without it test_hf_segmenter checks the clear error instead
    *([pytest.param("sam2", lambda path: HFSegmenter(path, options=BFLOAT16),
                    lambda backend: backend.segment(IMAGES[0], [(10, 10, 40, 30)], ["dog"]), id="segment-sam2")]
      if HAS_TORCHVISION else []),
    pytest.param("videomae", lambda path: HFVideoClassifier(path, options=BFLOAT16),
                 lambda backend: backend.classify([IMAGES * 2]), id="classify-videomae"),
    pytest.param("xclip", lambda path: HFVideoClassifier(path, labels=["waving", "jumping"], options=BFLOAT16),
                 lambda backend: backend.classify([IMAGES * 2]), id="classify-xclip"),
]


@pytest.mark.parametrize("checkpoint, build, use", CASES)
def test_every_backend_hands_its_model_inputs_on_the_models_device_and_dtype(
    checkpoint: str, build: Callable[[str], Backend], use: Callable[[Backend], Any], checkpoints: Checkpoints,
    on_meta: None, monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend = build(checkpoints[checkpoint])
    guard(backend._loaded.get(), monkeypatch)
    with pytest.raises(ReachedModel):
        use(backend)


def test_the_guard_names_a_processor_output_left_on_the_cpu(checkpoints: Checkpoints, on_meta: None,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The mistake that failed on a GPU (processor outputs handed to ``generate`` as they come) is caught."""
    loaded = load_model(checkpoints["blip_caption"], ("AutoModelForImageTextToText",), options=BFLOAT16)
    guard(loaded, monkeypatch)
    inputs = loaded.processor(images=[to_pil(IMAGES[0])], text=["a dog"], return_tensors="pt")
    with pytest.raises(AssertionError) as caught:
        loaded.model.generate(**inputs, max_new_tokens=2)
    for problem in ("pixel_values is on cpu", "pixel_values is torch.float32", "input_ids is on cpu"):
        assert problem in str(caught.value)
    with pytest.raises(ReachedModel):
        loaded.model.generate(**loaded.to_device(inputs), max_new_tokens=2)


def test_to_device_moves_nested_tensors_and_casts_only_floating_ones() -> None:
    loaded = LoadedModel(source="none", role="test", model=None, processor=None, device=DEVICE, dtype=DTYPE)
    moved = loaded.to_device({
        "pixel_values": torch.zeros(1, 3, 4, 4, dtype=torch.float64),
        "input_ids": torch.zeros(1, 2, dtype=torch.int64),
        "pixel_attention_mask": torch.ones(1, 4, 4, dtype=torch.bool),
        "pixel_values_list": [torch.zeros(3, 4, 4), (torch.zeros(2, dtype=torch.int32),)],
        "nested": {"boxes": torch.zeros(1, 4)},
        "text": "kept",
    })
    assert misplaced(moved, "inputs") == []
    assert moved["input_ids"].dtype == torch.int64 and moved["pixel_attention_mask"].dtype == torch.bool
    assert moved["pixel_values_list"][1][0].dtype == torch.int32 and isinstance(moved["pixel_values_list"][1], tuple)
    assert moved["nested"]["boxes"].dtype == DTYPE and moved["text"] == "kept"
