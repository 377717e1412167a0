"""Segment Anything through Hugging Face: SAM (``facebook/sam-vit-base``, the default), SAM-HQ, SAM 2
(``facebook/sam2.1-hiera-tiny``; its image processor needs torchvision) and EdgeTAM, whichever
``AutoModelForMaskGeneration`` loads. Implements ``Segmenter``.

Each image is encoded once and every box of it is one box prompt (in chunks of ``batch_size`` prompts);
the model's single-mask output (``multimask_output=False``, SAM's choice for a box prompt) is scaled back
to the image by the processor's own post-processing and thresholded at 0 (logits). An empty mask (SAM
found nothing in a box) is kept empty: whoever stores it can tell.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from vidagent.perception.hf.images import batches, to_pil
from vidagent.perception.hf.loading import LazyBackend, LoadedModel, LoadOptions, inference
from vidagent.perception.hf.spec import format_spec

DEFAULT_SEGMENTER = "facebook/sam-vit-base"


class HFSegmenter(LazyBackend):
    """Box-prompted masks from a Segment Anything model; loads on first use."""

    def __init__(self, model: str = DEFAULT_SEGMENTER, *, batch_size: int = 16,
                 options: LoadOptions | None = None) -> None:
        super().__init__(model, batch_size=batch_size, options=options, name=format_spec(model),
                         model_classes=("AutoModelForMaskGeneration",), role="segmenter")

    def segment(self, image: np.ndarray, boxes: Sequence[Sequence[float]], labels: Sequence[str]) -> list[np.ndarray]:
        if not len(boxes):
            return []
        loaded = self._loaded.get()
        pil = to_pil(image)
        height, width = image.shape[:2]
        prompts = [[float(np.clip(x1, 0, width)), float(np.clip(y1, 0, height)), float(np.clip(x2, 0, width)),
                    float(np.clip(y2, 0, height))] for x1, y1, x2, y2 in (box[:4] for box in boxes)]
        masks: list[np.ndarray] = []
        for chunk in batches(prompts, self.batch_size):
            inputs = loaded.processor(images=[pil], input_boxes=[list(chunk)], return_tensors="pt")
            with inference():
                outputs = loaded.model(**loaded.to_device(inputs), multimask_output=False)
            scaled = _post_process(loaded, outputs.pred_masks.float().cpu(), inputs)
            masks += [np.asarray(mask, dtype=bool).reshape(height, width) for mask in scaled[0][:, 0].numpy()]
        return masks


def _post_process(loaded: LoadedModel, pred_masks: Any, inputs: Any) -> Any:
    """The masks at the image's size: SAM's processor wants the resized input size too, SAM 2's does not."""
    processor = loaded.processor
    if "reshaped_input_sizes" in inputs:
        return processor.image_processor.post_process_masks(pred_masks, inputs["original_sizes"],
                                                            inputs["reshaped_input_sizes"])
    return processor.post_process_masks(pred_masks, inputs["original_sizes"])
