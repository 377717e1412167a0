"""``HFVideoClassifier``: a ``VideoClassifier`` over Hugging Face video models.

* Closed-set classifiers ``AutoModelForVideoClassification`` loads: VideoMAE fine-tuned on Kinetics-400
  ``MCG-NJU/videomae-base-finetuned-kinetics`` (the default; 16 frames a clip), TimeSformer, ViViT, ...
  Labels are the checkpoint's ``id2label``; probabilities a softmax over them.
* X-CLIP (``microsoft/xclip-base-patch32``, 8 frames): zero-shot over label texts, by default the
  everyday actions of ``perception/data/action_labels.txt`` (``labels`` replaces them); probabilities a
  softmax over the clip's similarities to the texts.

A clip is a sequence of RGB frames in time order; one with more or fewer frames than the model takes
(``num_frames``) is resampled evenly to that many. Clips are classified in batches.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any, Sequence

import numpy as np

from vidagent.perception.base import Label
from vidagent.perception.hf.images import batches, to_pil
from vidagent.perception.hf.loading import LazyBackend, LoadOptions, inference, load_config
from vidagent.perception.hf.spec import format_spec

DEFAULT_VIDEO_CLASSIFIER = "MCG-NJU/videomae-base-finetuned-kinetics"
VIDEO_CLASSIFIER_CLASSES = ("AutoModelForVideoClassification", "XCLIPModel")


@cache
def default_action_labels() -> tuple[str, ...]:
    """The label texts a zero-shot classifier chooses among when given none."""
    text = resources.files("vidagent.perception").joinpath("data/action_labels.txt").read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


class HFVideoClassifier(LazyBackend):
    """Names the action in short clips with a Hugging Face video model; loads on first use."""

    def __init__(self, model: str = DEFAULT_VIDEO_CLASSIFIER, *, labels: Sequence[str] | None = None,
                 batch_size: int = 4, options: LoadOptions | None = None) -> None:
        texts = tuple(label.strip() for label in labels if label.strip()) if labels else None
        super().__init__(model, batch_size=batch_size, options=options,
                         name=format_spec(model, {"labels": "|".join(texts) if texts else None}),
                         model_classes=VIDEO_CLASSIFIER_CLASSES, role="video classifier")
        self.labels = texts
        self._num_frames: int | None = None

    @property
    def num_frames(self) -> int:
        """Frames a clip should have (read from the checkpoint's config; the weights need not load)."""
        if self._num_frames is None:
            loaded = self._loaded
            config = loaded.get().model.config if loaded.loaded else load_config(
                self.model, role="video classifier", options=self.options)
            vision = getattr(config, "vision_config", None)
            self._num_frames = int(getattr(vision, "num_frames", None) or getattr(config, "num_frames", 16))
        return self._num_frames

    def classify(self, clips: Sequence[Sequence[np.ndarray]], top_k: int = 3) -> list[list[Label]]:
        """The ``top_k`` likeliest labels of each clip, likeliest first."""
        loaded = self._loaded.get()
        zero_shot = loaded.model.config.model_type == "xclip"
        names = list(self.labels or default_action_labels()) if zero_shot else [
            str(loaded.model.config.id2label[i]) for i in range(len(loaded.model.config.id2label))]
        out: list[list[Label]] = []
        for batch in batches([self._frames(clip) for clip in clips], self.batch_size):
            videos = [[to_pil(frame) for frame in clip] for clip in batch]
            with inference():
                probabilities = self._probabilities(loaded, videos, names if zero_shot else None)
            for row in probabilities:
                order = np.argsort(-row, kind="stable")[:top_k]
                out.append([Label(names[i], float(row[i])) for i in order])
        return out

    def _probabilities(self, loaded: Any, videos: list, texts: list[str] | None) -> np.ndarray:
        if texts is None:
            inputs = loaded.to_device(loaded.processor(videos, return_tensors="pt"))
            logits = loaded.model(**inputs).logits
        else:
            inputs = loaded.to_device(loaded.processor(text=texts, videos=videos, return_tensors="pt", padding=True))
            logits = loaded.model(**inputs).logits_per_video
        return logits.float().softmax(dim=-1).cpu().numpy()

    def _frames(self, clip: Sequence[np.ndarray]) -> list[np.ndarray]:
        """``clip`` resampled evenly to ``num_frames`` frames (an empty clip is refused)."""
        if not len(clip):
            raise ValueError("a clip to classify needs at least one frame")
        picks = np.linspace(0, len(clip) - 1, self.num_frames).round().astype(int)
        return [np.asarray(clip[i]) for i in picks]
