"""Calibrated similarities between appearance features, shared by the perception backends and re-ID.

``sigmoid_ensemble_similarity`` is VideoAgent's CLIP + DINOv2 re-ID similarity: the HF appearance
backend (``perception.hf.embedders.ClipDinoAppearance``) scores its features with it, and
``memory.reid`` groups tracks by such scores.
"""

from __future__ import annotations

import numpy as np


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return a @ b.T


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # = 1 / (1 + exp(-x)), without overflow warnings


def sigmoid_ensemble_similarity(clip_a: np.ndarray, clip_b: np.ndarray, dino_a: np.ndarray,
                                dino_b: np.ndarray) -> np.ndarray:
    """VideoAgent's CLIP + DINOv2 re-ID similarity, (len(a), len(b)) in [0, 1].

    ``CLIP(i, j) = 1 / (1 + exp(-20 (cos_clip - 0.925)))``,
    ``DINOv2(i, j) = 1 / (1 + exp(-4.1 (cos_dino - 0.5)))``,
    ``sim = 0.15 CLIP + 0.85 DINOv2``. Rows of ``clip_*``/``dino_*`` are the two models'
    embeddings of the same crops (any scale: they are normalised here).
    """
    clip_a, clip_b = np.atleast_2d(clip_a), np.atleast_2d(clip_b)
    dino_a, dino_b = np.atleast_2d(dino_a), np.atleast_2d(dino_b)
    if len(clip_a) != len(dino_a) or len(clip_b) != len(dino_b):
        raise ValueError("CLIP and DINOv2 features must have one row per crop each")
    clip = _sigmoid(20.0 * (_cosine(clip_a, clip_b) - 0.925))
    dino = _sigmoid(4.1 * (_cosine(dino_a, dino_b) - 0.5))
    return 0.15 * clip + 0.85 * dino
