"""Backend spec strings: ``SCHEME[:MODEL][?key=value&key=value]``, one grammar for every kind of backend.

``hf:PekingU/rtdetr_r50vd?threshold=0.4`` (a Hugging Face model), ``openai:gpt-4o-mini?base_url=...`` (a vision
chat model behind an OpenAI-compatible endpoint), ``gguf:/models/smolvlm.gguf?mmproj=/models/mmproj.gguf`` (a
local GGUF vision model). Options are URL-query style, values percent-encoded where they hold ``&``, ``=`` or
``%`` (``prompt=a%20picture%20of`` or plainly ``prompt=a picture of``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping
from urllib.parse import unquote

from vidagent.errors import ModelUnavailableError


@dataclass(frozen=True)
class BackendSpec:
    """A parsed spec: the model (None: the role's default) and the options as strings."""

    model: str | None
    options: Mapping[str, str] = field(default_factory=dict)


def spec_scheme(spec: str) -> str:
    """The scheme a spec begins with (``hf`` for ``hf:MODEL``; the whole word for a bare ``hf``)."""
    text = spec.strip()
    for index, char in enumerate(text):
        if char in ":?":
            return text[:index]
    return text


def parse_backend_spec(spec: str, scheme: str, form: str) -> BackendSpec:
    """Split ``SCHEME[:MODEL][?OPTIONS]``; ``ModelUnavailableError`` naming ``form`` (the expected shape) for
    anything else (another scheme, an option that is not key=value or is given twice)."""
    text = spec.strip()
    if spec_scheme(text) != scheme:
        raise ModelUnavailableError(f"bad model spec {spec!r}: expected {form}")
    rest = text[len(scheme):]
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
