"""Backend spec strings: ``hf[:MODEL][?key=value&key=value]``.

``MODEL`` is a Hugging Face hub id or a local folder (the role's default model when left out);
options are URL-query style, values percent-encoded where they hold ``&``, ``=`` or ``%``
(``prompt=a%20picture%20of`` or plainly ``prompt=a picture of``). Examples::

    hf
    hf:Salesforce/blip-image-captioning-base
    hf:PekingU/rtdetr_r50vd?threshold=0.4&device=cuda
    hf:/models/my-blip?prompt=a picture of
    hf:openai/clip-vit-base-patch32+facebook/dinov2-small      (appearance: CLIP + DINOv2)

Backends' ``name`` attributes are written in the same form, so a name is also a spec.
"""

from __future__ import annotations

from typing import Mapping
from urllib.parse import quote

from vidagent.perception.backend_spec import BackendSpec, parse_backend_spec, spec_scheme

SCHEME = "hf"

__all__ = ["BackendSpec", "SCHEME", "format_spec", "is_hf_spec", "parse_spec"]


def is_hf_spec(spec: str) -> bool:
    """Whether ``spec`` selects a Hugging Face backend (``hf`` or ``hf:...``/``hf?...``)."""
    return spec_scheme(spec) == SCHEME


def parse_spec(spec: str) -> BackendSpec:
    """Split ``hf[:MODEL][?OPTIONS]``; ``ModelUnavailableError`` for anything else."""
    return parse_backend_spec(spec, SCHEME, "hf, hf:MODEL or hf:MODEL?key=value&...")


def format_spec(model: str, options: Mapping[str, object] | None = None) -> str:
    """The spec string for a model and options (None values left out), inverse of ``parse_spec``."""
    items = [(key, value) for key, value in (options or {}).items() if value is not None]
    query = "&".join(f"{key}={quote(str(value), safe=' /:,.+-_')}" for key, value in items)
    return f"{SCHEME}:{model}" + (f"?{query}" if query else "")
