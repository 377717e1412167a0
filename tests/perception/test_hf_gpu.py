"""The Hugging Face backends computed for real on a CUDA GPU, in the dtype a GPU gets by default (bfloat16).

``test_hf_device`` checks without a GPU that every input reaches the model's device and dtype and stops at
the model's door; here the same cases (its ``CASES``) run to the end on the GPU, and embeddings computed there
agree with the CPU's float32 ones. Without CUDA the module skips; it is marked ``gpu``, so ``--require-models``
lets it (CI has no GPU). Run it where there is one:
``pytest tests/perception/test_hf_gpu.py tests/perception/test_hf_backends.py`` (the second runs the CPU
tests on the GPU too, since ``device=auto`` picks it).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_hf_device import CASES, IMAGES, Checkpoints  # noqa: E402
from test_hf_backends import one_torch_thread  # noqa: E402,F401  (module fixture: one torch thread)

from vidagent.perception.hf import ClipEmbedder, DinoEmbedder, LoadOptions  # noqa: E402

pytestmark = [
    pytest.mark.models,
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

ON_THE_CPU = LoadOptions(device="cpu", dtype="float32")
TEXTS = ["a dog", "a red ball on the grass", "a person throws a ball to a dog"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> Checkpoints:
    return Checkpoints(tmp_path_factory.mktemp("hf-gpu"))


def arrays(value: Any) -> list[np.ndarray]:
    """Every numpy array inside a backend's result (lists, tuples, dataclass-like objects one level down)."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, (list, tuple)):
        return [array for item in value for array in arrays(item)]
    if hasattr(value, "__dict__"):
        return [array for item in vars(value).values() for array in arrays(item)]
    return []


@pytest.mark.parametrize("checkpoint, build, use", CASES)
def test_every_backend_runs_to_the_end_on_the_gpu(
    checkpoint: str, build: Callable[[str], Any], use: Callable[[Any], Any], checkpoints: Checkpoints,
) -> None:
    backend = build(checkpoints[checkpoint])
    result = use(backend)
    loaded = backend._loaded.get()
    assert loaded.device.type == "cuda" and next(loaded.model.parameters()).device.type == "cuda"
    assert loaded.dtype == torch.bfloat16
    assert result is not None
    if isinstance(result, (list, tuple)):
        assert len(result) > 0
    for array in arrays(result):  # numbers come back to the CPU as numpy, finite (no bfloat16 overflow)
        if array.dtype.kind == "f":
            assert np.all(np.isfinite(array))


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.mark.parametrize("checkpoint, make, embed", [
    pytest.param("clip", ClipEmbedder, lambda e: e.embed_images(IMAGES), id="clip-images"),
    pytest.param("clip", ClipEmbedder, lambda e: e.embed_texts(TEXTS), id="clip-texts"),
    pytest.param("siglip", ClipEmbedder, lambda e: e.embed_texts(TEXTS), id="siglip-texts"),
    pytest.param("dinov2", DinoEmbedder, lambda e: e.embed_images(IMAGES), id="dinov2-images"),
])
def test_gpu_embeddings_agree_with_the_cpus(checkpoint: str, make: Callable[..., Any],
                                            embed: Callable[[Any], np.ndarray], checkpoints: Checkpoints) -> None:
    """Memories indexed on a GPU and searched on a CPU (or the reverse) must meet in one space: bfloat16 on
    the GPU moves each unit row by little against float32 on the CPU."""
    on_gpu = embed(make(checkpoints[checkpoint]))
    on_cpu = embed(make(checkpoints[checkpoint], options=ON_THE_CPU))
    assert on_gpu.dtype == np.float32 and on_gpu.shape == on_cpu.shape
    assert np.min(_cosines(on_gpu, on_cpu)) > 0.98
