"""``HFCaptioner``: a ``FrameDescriber`` over Hugging Face image-to-text models.

Works with captioning models (BLIP ``Salesforce/blip-image-captioning-base``/``-large``, BLIP-2
``Salesforce/blip2-opt-2.7b``, GIT, ...) and with instruction-tuned VLMs (LLaVA, Qwen2-VL, SmolVLM,
...), anything ``AutoModelForImageTextToText`` loads. Captioning models get the image and an optional
text prefix (``prompt``, e.g. BLIP's "a picture of"); chat VLMs get one user turn with the image and
an instruction (``prompt``, default ``hf_caption_chat`` in ``prompts/vqa.toml``). Frames are captioned in batches.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from vidagent.perception.base import FrameDescription
from vidagent.perception.hf.generation import chat_prompt, generate, has_chat_template, use_left_padding
from vidagent.perception.hf.images import batches, to_pil
from vidagent.perception.hf.loading import LazyModel, LoadedModel, LoadOptions, load_model
from vidagent.perception.hf.spec import format_spec
from vidagent.prompts import load_prompt

DEFAULT_CAPTIONER = "Salesforce/blip-image-captioning-base"
CAPTIONER_CLASSES = ("AutoModelForImageTextToText",)


class HFCaptioner:
    """Captions frames with a Hugging Face image-to-text model; loads on first use.

    >>> captioner = HFCaptioner("Salesforce/blip-image-captioning-base")
    >>> captioner.caption([frame])          # ['a dog running in the grass']
    """

    label = ""  # ``FrameDescriber``: captions carry no mark

    def __init__(
        self,
        model: str = DEFAULT_CAPTIONER,
        *,
        prompt: str | None = None,
        max_new_tokens: int = 40,
        num_beams: int = 1,
        batch_size: int = 8,
        options: LoadOptions | None = None,
    ) -> None:
        if max_new_tokens < 1 or num_beams < 1 or batch_size < 1:
            raise ValueError("max_new_tokens, num_beams and batch_size must be at least 1")
        self.model = model
        self.prompt = prompt
        self.max_new_tokens = max_new_tokens
        self.num_beams = num_beams
        self.batch_size = batch_size
        self.options = options or LoadOptions()
        # The identity memory caches key on: the model and every option that changes its output.
        self.name = format_spec(model, {"prompt": prompt, "max_new_tokens": max_new_tokens, "num_beams": num_beams})
        self._loaded: LazyModel[LoadedModel] = LazyModel(self._load)

    @property
    def memory_note(self) -> str:
        """``FrameDescriber``: the descriptions are this model's captions."""
        from vidagent.perception.describer import caption_memory_note

        return caption_memory_note(with_text=False)

    def load(self) -> None:
        """Load the model now instead of on first use (``ModelUnavailableError`` if it cannot be)."""
        self._loaded.get()

    @property
    def chat(self) -> bool:
        """Whether the model is prompted through a chat template (an instruction-tuned VLM)."""
        return has_chat_template(self._loaded.get().processor)

    def caption(self, images: Sequence[np.ndarray]) -> list[str]:
        """One caption per RGB image, in order."""
        loaded = self._loaded.get()
        chat = has_chat_template(loaded.processor)
        captions: list[str] = []
        for batch in batches(list(images), self.batch_size):
            pils = [to_pil(image) for image in batch]
            if chat:
                instruction = self.prompt or load_prompt("vidagent.perception", "hf_caption_chat").strip()
                prompts: list[str] | None = [chat_prompt(loaded.processor, instruction, 1)] * len(pils)
            else:
                prompts = [self.prompt] * len(pils) if self.prompt else None
            captions.extend(generate(loaded, [[image] for image in pils], prompts, max_new_tokens=self.max_new_tokens,
                                     num_beams=self.num_beams))
        return captions

    def describe(self, images: Sequence[np.ndarray]) -> list[FrameDescription]:
        """``FrameDescriber``: the caption of each image (no structured objects or text)."""
        return [FrameDescription(caption=caption) for caption in self.caption(images)]

    def _load(self) -> LoadedModel:
        loaded = load_model(self.model, CAPTIONER_CLASSES, role="captioner", options=self.options)
        if has_chat_template(loaded.processor):
            use_left_padding(loaded)
        return loaded

