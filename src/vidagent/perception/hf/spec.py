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

from dataclasses import dataclass, field
from typing import Mapping
from urllib.parse import quote, unquote

from vidagent.errors import ModelUnavailableError

SCHEME = "hf"


@dataclass(frozen=True)
class BackendSpec:
    """A parsed spec: the model (None: the role's default) and the options as strings."""

    model: str | None
    options: Mapping[str, str] = field(default_factory=dict)


def is_hf_spec(spec: str) -> bool:
    """Whether ``spec`` selects a Hugging Face backend (``hf`` or ``hf:...``/``hf?...``)."""
    spec = spec.strip()
    return spec == SCHEME or spec.startswith((SCHEME + ":", SCHEME + "?"))


def parse_spec(spec: str) -> BackendSpec:
    """Split ``hf[:MODEL][?OPTIONS]``; ``ModelUnavailableError`` for anything else."""
    text = spec.strip()
    if not is_hf_spec(text):
        raise ModelUnavailableError(f"bad model spec {spec!r}: expected hf, hf:MODEL or hf:MODEL?key=value&...")
    rest = text[len(SCHEME):]
    model_part, _, query = rest.partition("?")
    model = model_part[1:].strip() if model_part.startswith(":") else ""
    options: dict[str, str] = {}
    for item in filter(None, query.split("&")):
        key, equals, value = item.partition("=")
        key = key.strip()
        if not key or not equals:
            raise ModelUnavailableError(f"bad model spec {spec!r}: option {item!r} is not key=value")
        if key in options:
            raise ModelUnavailableError(f"bad model spec {spec!r}: option {key!r} is given twice")
        options[key] = unquote(value.strip())
    return BackendSpec(model=model or None, options=options)


def format_spec(model: str, options: Mapping[str, object] | None = None) -> str:
    """The spec string for a model and options (None values left out), inverse of ``parse_spec``."""
    items = [(key, value) for key, value in (options or {}).items() if value is not None]
    query = "&".join(f"{key}={quote(str(value), safe=' /:,.+-_')}" for key, value in items)
    return f"{SCHEME}:{model}" + (f"?{query}" if query else "")
