"""Hugging Face backends for the perception roles (the ``hf`` extra: torch + transformers).

Importing this package is cheap: torch and transformers are imported when a model first loads.
Select a backend with a spec string and ``build_backend(role, spec)``::

    from vidagent.perception.hf import build_backend
    captioner = build_backend("captioner", "hf:Salesforce/blip-image-captioning-base")
    detector = build_backend("detector", "hf:PekingU/rtdetr_r50vd?threshold=0.4")
"""

from vidagent.perception.hf.captioner import HFCaptioner
from vidagent.perception.hf.detector import GroundingDinoDetector, HFDetector
from vidagent.perception.hf.embedders import ClipDinoAppearance, ClipEmbedder, DinoEmbedder
from vidagent.perception.hf.factory import ROLES, build_backend
from vidagent.perception.hf.loading import LoadedModel, LoadOptions, load_model
from vidagent.perception.hf.segmenter import HFSegmenter
from vidagent.perception.hf.spec import BackendSpec, format_spec, is_hf_spec, parse_spec
from vidagent.perception.hf.video_classifier import HFVideoClassifier
from vidagent.perception.hf.vqa import HFVisualQA

__all__ = [
    "BackendSpec",
    "ClipDinoAppearance",
    "ClipEmbedder",
    "DinoEmbedder",
    "GroundingDinoDetector",
    "HFCaptioner",
    "HFDetector",
    "HFSegmenter",
    "HFVideoClassifier",
    "HFVisualQA",
    "LoadOptions",
    "LoadedModel",
    "ROLES",
    "build_backend",
    "format_spec",
    "is_hf_spec",
    "parse_spec",
    "load_model",
]
