"""Build a Hugging Face backend for a perception role from a spec string (see ``spec.py``).

Roles, their default models and their options (every role also takes ``device``, ``dtype``,
``revision`` and ``local_files_only``):

- ``captioner`` (alias ``describer``): Salesforce/blip-image-captioning-base;
  prompt, max_new_tokens, num_beams, batch_size
- ``vqa``: Salesforce/blip-vqa-base; max_frames, max_new_tokens
- ``detector``: PekingU/rtdetr_r50vd; threshold, batch_size
- ``grounding`` (alias ``open_vocabulary_detector``): IDEA-Research/grounding-dino-tiny;
  threshold, nms_iou, batch_size
- ``image_text`` (alias ``image_text_embedder``, ``clip``): openai/clip-vit-base-patch32; batch_size
- ``image_features`` (alias ``image_embedder``, ``dino``): facebook/dinov2-small; batch_size
- ``appearance``: ``CLIP+DINOV2``, default openai/clip-vit-base-patch32+facebook/dinov2-small; batch_size
- ``segmenter``: facebook/sam-vit-base (SAM, SAM-HQ, SAM 2, EdgeTAM); batch_size (box prompts at once)
- ``video_classifier`` (alias ``actions``): MCG-NJU/videomae-base-finetuned-kinetics, or X-CLIP
  (microsoft/xclip-base-patch32) zero-shot over ``labels`` (texts separated by ``|``); batch_size

Nothing is loaded here: backends load their model on first use (or on ``.load()``).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from vidagent.errors import ModelUnavailableError
from vidagent.perception.hf.captioner import DEFAULT_CAPTIONER, HFCaptioner
from vidagent.perception.hf.detector import (
    DEFAULT_DETECTOR,
    DEFAULT_GROUNDING_DETECTOR,
    GroundingDinoDetector,
    HFDetector,
)
from vidagent.perception.hf.embedders import DEFAULT_CLIP, DEFAULT_DINO, ClipDinoAppearance, ClipEmbedder, DinoEmbedder
from vidagent.perception.hf.loading import LoadOptions
from vidagent.perception.hf.segmenter import DEFAULT_SEGMENTER, HFSegmenter
from vidagent.perception.hf.spec import parse_spec
from vidagent.perception.hf.video_classifier import DEFAULT_VIDEO_CLASSIFIER, HFVideoClassifier
from vidagent.perception.hf.vqa import DEFAULT_VQA, HFVisualQA

ROLES = ("captioner", "vqa", "detector", "grounding", "image_text", "image_features", "appearance", "segmenter",
         "video_classifier")
_ALIASES = {
    "describer": "captioner",
    "open_vocabulary_detector": "grounding",
    "image_text_embedder": "image_text",
    "clip": "image_text",
    "image_embedder": "image_features",
    "dino": "image_features",
    "actions": "video_classifier",
}
_LOAD_OPTIONS = ("device", "dtype", "revision", "local_files_only")
_INT = int
_FLOAT = float


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a yes/no value: {text!r}")


_ROLE_OPTIONS: dict[str, dict[str, Callable[[str], Any]]] = {
    "captioner": {"prompt": str, "max_new_tokens": _INT, "num_beams": _INT, "batch_size": _INT},
    "vqa": {"max_frames": _INT, "max_new_tokens": _INT},
    "detector": {"threshold": _FLOAT, "batch_size": _INT},
    "grounding": {"threshold": _FLOAT, "nms_iou": _FLOAT, "batch_size": _INT},
    "image_text": {"batch_size": _INT},
    "image_features": {"batch_size": _INT},
    "appearance": {"batch_size": _INT},
    "segmenter": {"batch_size": _INT},
    "video_classifier": {"labels": lambda text: tuple(part for part in text.split("|") if part.strip()),
                         "batch_size": _INT},
}


def build_backend(role: str, spec: str) -> Any:
    """The Hugging Face backend for ``role`` described by ``spec`` (``hf[:MODEL][?OPTIONS]``).

    Returns an ``HFCaptioner`` (a ``FrameDescriber``), ``HFVisualQA`` (``VisualQA``), ``HFDetector``
    (``ObjectDetector``), ``GroundingDinoDetector`` (``OpenVocabularyDetector``), ``ClipEmbedder``
    (``ImageTextEmbedder``), ``DinoEmbedder`` or ``ClipDinoAppearance`` (``AppearanceModel``),
    ``HFSegmenter`` (``Segmenter``), or ``HFVideoClassifier`` (``VideoClassifier``).
    A bad role, spec or option value raises ``ModelUnavailableError`` naming it.
    """
    canonical = _ALIASES.get(role, role)
    if canonical not in ROLES:
        raise ModelUnavailableError(f"no Hugging Face backend for role {role!r}: roles are {', '.join(ROLES)}")
    parsed = parse_spec(spec)
    load_options, role_options = _split_options(canonical, spec, parsed.options)
    try:
        return _construct(canonical, parsed.model, load_options, role_options)
    except ValueError as error:  # an option value the backend refuses (batch_size=0, threshold=2, ...)
        raise ModelUnavailableError(f"bad model spec {spec!r}: {error}") from error


def _construct(canonical: str, model: str | None, load_options: LoadOptions, role_options: dict[str, Any]) -> Any:
    if canonical == "captioner":
        return HFCaptioner(model or DEFAULT_CAPTIONER, options=load_options, **role_options)
    if canonical == "vqa":
        return HFVisualQA(model or DEFAULT_VQA, options=load_options, **role_options)
    if canonical == "detector":
        return HFDetector(model or DEFAULT_DETECTOR, options=load_options, **role_options)
    if canonical == "grounding":
        return GroundingDinoDetector(model or DEFAULT_GROUNDING_DETECTOR, options=load_options, **role_options)
    if canonical == "image_text":
        return ClipEmbedder(model or DEFAULT_CLIP, options=load_options, **role_options)
    if canonical == "image_features":
        return DinoEmbedder(model or DEFAULT_DINO, options=load_options, **role_options)
    if canonical == "segmenter":
        return HFSegmenter(model or DEFAULT_SEGMENTER, options=load_options, **role_options)
    if canonical == "video_classifier":
        return HFVideoClassifier(model or DEFAULT_VIDEO_CLASSIFIER, options=load_options, **role_options)
    clip_model, dino_model = _pair(model)
    return ClipDinoAppearance(ClipEmbedder(clip_model, options=load_options, **role_options),
                              DinoEmbedder(dino_model, options=load_options, **role_options))


def _split_options(role: str, spec: str, options: Mapping[str, str]) -> tuple[LoadOptions, dict[str, Any]]:
    allowed = _ROLE_OPTIONS[role]
    load: dict[str, Any] = {}
    values: dict[str, Any] = {}
    for key, text in options.items():
        try:
            if key in _LOAD_OPTIONS:
                load[key] = _bool(text) if key == "local_files_only" else text
            elif key in allowed:
                values[key] = allowed[key](text)
            else:
                known = ", ".join((*allowed, *_LOAD_OPTIONS))
                raise ModelUnavailableError(
                    f"bad model spec {spec!r}: {role} takes no option {key!r} (options: {known})"
                )
        except ValueError as error:
            raise ModelUnavailableError(f"bad model spec {spec!r}: option {key}={text!r} ({error})") from error
    return LoadOptions(**load), values


def _pair(model: str | None) -> tuple[str, str]:
    """``CLIP+DINO`` model ids for the appearance role (either may be left empty for its default)."""
    if model is None:
        return DEFAULT_CLIP, DEFAULT_DINO
    clip_model, plus, dino_model = model.partition("+")
    if not plus:
        raise ValueError("the appearance role takes hf:CLIP_MODEL+DINOV2_MODEL")
    return clip_model.strip() or DEFAULT_CLIP, dino_model.strip() or DEFAULT_DINO
