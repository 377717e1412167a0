"""Image embeddings from Hugging Face models, and VideoAgent's re-ID appearance model built on them.

* ``ClipEmbedder`` (``ImageTextEmbedder``): CLIP ``openai/clip-vit-base-patch32`` (default) or SigLIP
  / SigLIP 2 (``google/siglip-base-patch16-224``): images and texts in one space, L2-normalised rows.
  SigLIP's text tower was trained on texts padded to 64 tokens, so its texts are padded that way.
* ``DinoEmbedder``: DINOv2 ``facebook/dinov2-small`` (default) image features: the pooled output (the
  final layer-normed CLS token), L2-normalised.
* ``ClipDinoAppearance`` (``AppearanceModel``): the features of an object crop are its CLIP and DINOv2
  embeddings side by side; ``similarity`` is VideoAgent's calibrated ensemble
  (``vidagent.perception.similarity.sigmoid_ensemble_similarity``): 0.15 sigmoid(20 (cos_clip - 0.925)) +
  0.85 sigmoid(4.1 (cos_dino - 0.5)), in [0, 1].
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from vidagent.perception.hf.images import batches, to_pil
from vidagent.perception.hf.loading import LazyBackend, LazyModel, LoadedModel, LoadOptions, inference, load_config
from vidagent.perception.hf.spec import format_spec
from vidagent.perception.similarity import sigmoid_ensemble_similarity

DEFAULT_CLIP = "openai/clip-vit-base-patch32"
DEFAULT_DINO = "facebook/dinov2-small"
_SIGLIP_TEXT_LENGTH = 64


class ClipEmbedder(LazyBackend):
    """``ImageTextEmbedder`` over CLIP or SigLIP; loads on first use."""

    def __init__(self, model: str = DEFAULT_CLIP, *, batch_size: int = 16, options: LoadOptions | None = None) -> None:
        super().__init__(model, batch_size=batch_size, options=options, name=format_spec(model),
                         model_classes=("AutoModel",), role="image-text embedder")
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        """Width of the embeddings (read from the checkpoint's config; the weights need not load)."""
        if self._dim is None:
            config = _config(self._loaded, self.model, "image-text embedder", self.options)
            projection = getattr(config, "projection_dim", None)
            self._dim = int(projection if projection else config.text_config.hidden_size)
        return self._dim

    def embed_images(self, images: Sequence[np.ndarray]) -> np.ndarray:
        """``(N, dim)`` float32 unit rows, one per RGB image."""
        return _embed(self, images, _image_inputs, lambda model, inputs: _pooled(model.get_image_features(**inputs)))

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """``(N, dim)`` float32 unit rows, one per text (truncated to the model's text length)."""
        loaded = self._loaded.get()
        siglip = loaded.model.config.model_type.startswith("siglip")
        padding: dict[str, Any] = (
            {"padding": "max_length", "max_length": _SIGLIP_TEXT_LENGTH} if siglip else {"padding": True}
        )
        return _embed(self, texts,
                      lambda processor, batch: processor(text=list(batch), return_tensors="pt", truncation=True,
                                                         **padding),
                      lambda model, inputs: _pooled(model.get_text_features(**inputs)))


class DinoEmbedder(LazyBackend):
    """DINOv2 image features (pooled CLS token), L2-normalised; loads on first use."""

    def __init__(self, model: str = DEFAULT_DINO, *, batch_size: int = 16, options: LoadOptions | None = None) -> None:
        super().__init__(model, batch_size=batch_size, options=options, name=format_spec(model),
                         model_classes=("AutoModel",), processor_class="AutoImageProcessor", role="image embedder")
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        """Width of the features (read from the checkpoint's config; the weights need not load)."""
        if self._dim is None:
            self._dim = int(_config(self._loaded, self.model, "image embedder", self.options).hidden_size)
        return self._dim

    def embed_images(self, images: Sequence[np.ndarray]) -> np.ndarray:
        """``(N, dim)`` float32 unit rows, one per RGB image."""
        return _embed(self, images, _image_inputs, lambda model, inputs: model(**inputs).pooler_output)


class ClipDinoAppearance:
    """``AppearanceModel``: CLIP + DINOv2 crop features with VideoAgent's calibrated similarity."""

    def __init__(self, clip: ClipEmbedder | None = None, dino: DinoEmbedder | None = None) -> None:
        self.clip = clip or ClipEmbedder()
        self.dino = dino or DinoEmbedder()
        self.name = f"hf:{self.clip.model}+{self.dino.model}"

    def load(self) -> None:
        self.clip.load()
        self.dino.load()

    @property
    def dim(self) -> int:
        """CLIP's width plus DINOv2's."""
        return self.clip.dim + self.dino.dim

    @property
    def text_dim(self) -> int:
        """The leading feature columns that are CLIP's (``TextSearchableAppearance``)."""
        return self.clip.dim

    def text_features(self, texts: Sequence[str]) -> np.ndarray:
        """CLIP text rows, comparable with the CLIP part of a crop's features."""
        return self.clip.embed_texts(texts)

    def features(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        """``(N, clip.dim + dino.dim)`` float32: each crop's unit CLIP row, then its unit DINOv2 row."""
        return np.concatenate([self.clip.embed_images(crops), self.dino.embed_images(crops)], axis=1)

    def similarity(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``(len(a), len(b))`` calibrated similarities in [0, 1] between rows of two feature matrices."""
        a, b = np.atleast_2d(np.asarray(a, np.float32)), np.atleast_2d(np.asarray(b, np.float32))
        split = self.clip.dim
        if a.shape[1] != self.dim or b.shape[1] != self.dim:
            raise ValueError(f"features must have {self.dim} columns (CLIP {split} + DINOv2 {self.dim - split})")
        similarity = sigmoid_ensemble_similarity(a[:, :split], b[:, :split], a[:, split:], b[:, split:])
        return np.clip(similarity, 0.0, 1.0).astype(np.float32)


def _config(loaded: LazyModel[LoadedModel], model: str, role: str, options: LoadOptions) -> Any:
    """The model's config: from the loaded model, else read alone (similarities of stored features
    need the widths without loading the weights)."""
    return loaded.get().model.config if loaded.loaded else load_config(model, role=role, options=options)


def _embed(backend: ClipEmbedder | DinoEmbedder, items: Sequence[Any], prepare: Callable[[Any, Sequence[Any]], Any],
           forward: Callable[[Any, Any], Any]) -> np.ndarray:
    """Unit rows for ``items`` in batches: ``prepare(processor, batch)`` makes the model inputs and
    ``forward(model, inputs)`` returns one vector per item."""
    loaded = backend._loaded.get()
    rows = []
    for batch in batches(list(items), backend.batch_size):
        inputs = loaded.to_device(prepare(loaded.processor, batch))
        with inference():
            rows.append(_normalised(forward(loaded.model, inputs)))
    return np.concatenate(rows) if rows else np.zeros((0, backend.dim), np.float32)


def _image_inputs(processor: Any, images: Sequence[np.ndarray]) -> Any:
    return processor(images=[to_pil(image) for image in images], return_tensors="pt")


def _pooled(output: Any) -> Any:
    """transformers 5 returns a model output whose pooler_output holds the projected features; 4.x a tensor."""
    return getattr(output, "pooler_output", output)


def _normalised(tensor: Any) -> np.ndarray:
    rows = tensor.float().cpu().numpy().astype(np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.maximum(norms, 1e-12)
