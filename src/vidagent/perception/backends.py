"""One way from a backend spec to a perception model: ``openai:``/``gguf:`` specs name a vision chat model
(``vidagent.perception.chat_vision``, for the captioner and VQA roles), ``hf`` specs a Hugging Face model
(``vidagent.perception.hf``)."""

from __future__ import annotations

from typing import Any

from vidagent.config import Settings
from vidagent.perception.vision_chat import VisionAccess, is_vision_chat_spec


def build_backend(role: str, spec: str, settings: Settings) -> Any:
    """The model ``spec`` names for ``role``; ``ModelUnavailableError`` for a spec it cannot make."""
    if is_vision_chat_spec(spec):
        from vidagent.perception.chat_vision import build_vision_backend

        base_url = settings.llm.base_url if settings.llm.backend == "openai" else None
        access = VisionAccess(api_key=settings.backend_api_key(role), base_url=base_url)
        return build_vision_backend(role, spec, access, settings.vision_cache_path)
    from vidagent.perception.hf import build_backend as build_hf_backend

    return build_hf_backend(role, spec)
