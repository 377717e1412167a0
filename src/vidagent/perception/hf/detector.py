"""Hugging Face object detectors.

* ``HFDetector`` (``ObjectDetector``): closed-vocabulary detectors ``AutoModelForObjectDetection``
  loads: RT-DETR ``PekingU/rtdetr_r50vd`` (the default; COCO 80), DETR ``facebook/detr-resnet-50``,
  YOLOS ``hustvl/yolos-small``, Conditional/Deformable DETR, ... Boxes come from the image processor's
  own post-processing (each family decodes its outputs differently), scaled to each frame's pixels.
  These are set-prediction models: no NMS is applied.
* ``GroundingDinoDetector`` (``OpenVocabularyDetector``): Grounding DINO
  ``IDEA-Research/grounding-dino-tiny`` finds the objects named by free-text queries. The queries are
  joined into one caption ("a red car. a dog."); each predicted box is scored against each query as the
  highest token probability within that query's words, takes the best query as its label (so labels
  are exactly the queries, never word fragments), and overlapping boxes of one label are suppressed
  (supervision's NMS).

Boxes are ``x1, y1, x2, y2`` pixels clipped to the image, detections sorted by score (best first).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import supervision as sv

from vidagent.errors import ToolInputError
from vidagent.perception.detections import best_first_nms, make_detections, no_detections
from vidagent.perception.hf.images import batches, to_pil
from vidagent.perception.hf.loading import LazyBackend, LoadedModel, LoadOptions, inference
from vidagent.perception.hf.spec import format_spec

DEFAULT_DETECTOR = "PekingU/rtdetr_r50vd"
DEFAULT_GROUNDING_DETECTOR = "IDEA-Research/grounding-dino-tiny"
MIN_BOX_SIDE = 1.0  # pixels: boxes thinner than this after clipping are dropped


class HFDetector(LazyBackend):
    """Closed-vocabulary detection with a Hugging Face model; loads on first use."""

    def __init__(
        self,
        model: str = DEFAULT_DETECTOR,
        *,
        threshold: float = 0.5,
        batch_size: int = 4,
        options: LoadOptions | None = None,
    ) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], not {threshold}")
        super().__init__(model, batch_size=batch_size, options=options,
                         name=format_spec(model, {"threshold": threshold}),
                         model_classes=("AutoModelForObjectDetection",), processor_class="AutoImageProcessor",
                         role="object detector")
        self.threshold = threshold

    @property
    def labels(self) -> dict[int, str]:
        """The model's class names by class id."""
        return {int(k): str(v) for k, v in self._loaded.get().model.config.id2label.items()}

    def detect(self, images: Sequence[np.ndarray]) -> list[sv.Detections]:
        loaded = self._loaded.get()
        id2label = self.labels
        results: list[sv.Detections] = []
        for batch in batches(list(images), self.batch_size):
            pils = [to_pil(image) for image in batch]
            inputs = loaded.encode(images=pils, return_tensors="pt")
            with inference():
                outputs = _on_cpu(loaded.model(**inputs))
            sizes = [(image.height, image.width) for image in pils]
            processed = loaded.processor.post_process_object_detection(
                outputs, threshold=self.threshold, target_sizes=sizes
            )
            for item, (height, width) in zip(processed, sizes):
                class_ids = item["labels"].cpu().numpy().astype(np.int32)
                names = [id2label.get(int(c), str(int(c))) for c in class_ids]
                results.append(_detections(item["boxes"].cpu().numpy(), item["scores"].cpu().numpy(),
                                           class_ids, names, width, height))
        return results


class GroundingDinoDetector(LazyBackend):
    """Open-vocabulary detection with Grounding DINO; labels are the queries. Loads on first use."""

    def __init__(
        self,
        model: str = DEFAULT_GROUNDING_DETECTOR,
        *,
        threshold: float = 0.35,
        nms_iou: float = 0.7,
        batch_size: int = 2,
        options: LoadOptions | None = None,
    ) -> None:
        if not 0.0 <= threshold <= 1.0 or not 0.0 < nms_iou <= 1.0:
            raise ValueError("threshold must be in [0, 1] and nms_iou in (0, 1]")
        super().__init__(model, batch_size=batch_size, options=options,
                         name=format_spec(model, {"threshold": threshold, "nms_iou": nms_iou}),
                         model_classes=("AutoModelForZeroShotObjectDetection",), role="open-vocabulary detector")
        self.threshold = threshold
        self.nms_iou = nms_iou

    def detect(self, images: Sequence[np.ndarray], queries: Sequence[str]) -> list[sv.Detections]:
        names = [" ".join(query.split()) for query in queries]
        if not names or not all(names):
            raise ToolInputError("open-vocabulary detection needs at least one non-empty query")
        loaded = self._loaded.get()
        caption, token_query = self._caption(loaded, names)
        results: list[sv.Detections] = []
        for batch in batches(list(images), self.batch_size):
            pils = [to_pil(image) for image in batch]
            inputs = loaded.encode(images=pils, text=[caption] * len(pils), return_tensors="pt", padding=True)
            with inference():
                outputs = loaded.model(**inputs)
            probs = outputs.logits.float().sigmoid().cpu().numpy()  # (B, boxes, text positions)
            boxes = outputs.pred_boxes.float().cpu().numpy()  # (B, boxes, 4) cx, cy, w, h in [0, 1]
            for image, prob, box in zip(pils, probs, boxes):
                results.append(self._image_detections(prob, box, token_query, names, image.width, image.height))
        return results

    def _caption(self, loaded: LoadedModel, names: Sequence[str]) -> tuple[str, np.ndarray]:
        """The caption for the queries and, for each of its token positions, the query it belongs to (-1: none)."""
        pieces: list[str] = []
        spans: list[tuple[int, int]] = []
        position = 0
        for name in names:
            text = name.lower().rstrip(".").strip() or name.lower()
            spans.append((position, position + len(text)))
            pieces.append(text + ".")
            position += len(text) + 2  # the text, ". "
        caption = " ".join(pieces)
        tokenizer = loaded.processor.tokenizer
        encoded = tokenizer(caption, return_offsets_mapping=True)
        limit = int(getattr(loaded.model.config, "max_text_len", 256))
        if len(encoded["input_ids"]) > limit:
            raise ToolInputError(
                f"the {len(names)} queries are too long for Grounding DINO ({len(encoded['input_ids'])} tokens, "
                f"at most {limit}): ask for fewer objects at a time"
            )
        token_query = np.full(len(encoded["input_ids"]), -1, np.int64)
        for index, (start, end) in enumerate(encoded["offset_mapping"]):
            if end <= start:
                continue  # special tokens
            for query, (span_start, span_end) in enumerate(spans):
                if start >= span_start and end <= span_end:
                    token_query[index] = query
                    break
        return caption, token_query

    def _image_detections(self, prob: np.ndarray, box: np.ndarray, token_query: np.ndarray,
                          names: Sequence[str], width: int, height: int) -> sv.Detections:
        per_query = np.full((prob.shape[0], len(names)), 0.0, np.float32)
        for query in range(len(names)):
            columns = np.flatnonzero(token_query == query)
            columns = columns[columns < prob.shape[1]]
            if len(columns):
                per_query[:, query] = prob[:, columns].max(axis=1)
        class_ids = per_query.argmax(axis=1).astype(np.int32)
        scores = per_query.max(axis=1)
        keep = scores >= self.threshold
        cx, cy, w, h = (box[keep, i] for i in range(4))
        corners = np.stack(
            [(cx - w / 2) * width, (cy - h / 2) * height, (cx + w / 2) * width, (cy + h / 2) * height], axis=1
        )
        detections = _detections(corners, scores[keep], class_ids[keep], [names[c] for c in class_ids[keep]],
                                 width, height)
        return best_first_nms(detections, self.nms_iou)


def _on_cpu(outputs: Any) -> Any:
    """A detector's outputs with the ones post-processing reads (``logits``, ``pred_boxes``) on the CPU
    in float32, whatever the model's device and dtype: the image processors' post-processing then
    never mixes devices and scores and boxes keep full precision."""
    for name in ("logits", "pred_boxes"):
        if getattr(outputs, name, None) is not None:
            setattr(outputs, name, getattr(outputs, name).float().cpu())
    return outputs


def _detections(boxes: Any, scores: Any, class_ids: np.ndarray, labels: Sequence[str],
                width: int, height: int) -> sv.Detections:
    """Clip boxes to the image, drop degenerate ones, sort by score (best first)."""
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4).copy()
    scores = np.asarray(scores, np.float32).reshape(-1)
    boxes[:, 0::2] = np.clip(boxes[:, 0::2], 0, width)
    boxes[:, 1::2] = np.clip(boxes[:, 1::2], 0, height)
    valid = ((boxes[:, 2] - boxes[:, 0]) >= MIN_BOX_SIDE) & ((boxes[:, 3] - boxes[:, 1]) >= MIN_BOX_SIDE)
    order = [int(i) for i in np.argsort(-scores, kind="stable") if valid[i]]
    if not order:
        return no_detections()
    return make_detections(boxes[order], scores[order], np.asarray(class_ids, np.int32)[order],
                           [labels[i] for i in order])
