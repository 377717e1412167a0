"""``HFVisualQA``: visual question answering with a local Hugging Face model (a ``VisualQA``).

Three kinds of model, told apart by their checkpoint:

* **BLIP VQA** (``Salesforce/blip-vqa-base``, model type ``blip``): asked the question about each of
  up to ``max_frames`` frames, spread over the stretch; the answer is the most frequent per-frame
  answer (the earliest among ties), the description lists the per-frame answers with their times.
* **Chat VLMs** (LLaVA, Qwen2-VL, LLaVA-OneVision, SmolVLM, ...: a processor with a chat template):
  see up to ``max_frames`` frames at once in one user turn built from ``vqa_vision`` (``prompts/vqa.toml``)
  (the same prompt the OpenAI-compatible vision backend uses) and reply "Description: ... Answer: ...".
* **Other image-text-to-text models** (BLIP-2, InstructBLIP): asked per frame with
  ``hf_vqa_frame`` ("Question: ... Answer:"), combined as for BLIP VQA.

The local model answers by itself and needs no chat model: it is a
``vidagent.perception.base.VisualQA`` as it is, asked like the chat-backed ones of ``vidagent.tools.vqa``.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from vidagent.errors import ToolInputError
from vidagent.perception.base import VQAResult
from vidagent.perception.hf.generation import chat_prompt, generate, has_chat_template, use_left_padding
from vidagent.perception.hf.images import to_pil
from vidagent.perception.hf.loading import LazyModel, LoadedModel, LoadOptions, load_config, load_model
from vidagent.perception.hf.spec import format_spec
from vidagent.prompts import prompt
from vidagent.text import fold
from vidagent.video.sampling import take_every
from vidagent.video.video import SampledFrame

DEFAULT_VQA = "Salesforce/blip-vqa-base"
DEFAULT_MAX_FRAMES = 4


class HFVisualQA:
    """Answers questions about a few frames with a local Hugging Face model; loads on first use."""

    sees_frames = True

    def __init__(
        self,
        model: str = DEFAULT_VQA,
        *,
        max_frames: int = DEFAULT_MAX_FRAMES,
        max_new_tokens: int = 96,
        options: LoadOptions | None = None,
    ) -> None:
        if max_frames < 1 or max_new_tokens < 1:
            raise ValueError("max_frames and max_new_tokens must be at least 1")
        self.model = model
        self.max_frames = max_frames
        self.max_new_tokens = max_new_tokens
        self.options = options or LoadOptions()
        self.name = format_spec(model, {"max_frames": max_frames, "max_new_tokens": max_new_tokens})
        self._loaded: LazyModel[LoadedModel] = LazyModel(self._load)

    def load(self) -> None:
        """Load the model now instead of on first use (``ModelUnavailableError`` if it cannot be)."""
        self._loaded.get()

    def answer(self, question: str, frames: Sequence[SampledFrame]) -> VQAResult:
        """Answer ``question`` from ``frames`` (time order)."""
        if not question.strip():
            raise ToolInputError("visual question answering needs a question")
        if not frames:
            raise ToolInputError("visual question answering needs at least one frame")
        loaded = self._loaded.get()
        chosen = take_every(frames, self.max_frames)
        if has_chat_template(loaded.processor):
            return self._answer_chat(loaded, question, chosen)
        return self._answer_per_frame(loaded, question, chosen)

    def _answer_chat(self, loaded: LoadedModel, question: str, frames: Sequence[SampledFrame]) -> VQAResult:
        times = ", ".join(f"{frame.time_s:.1f} s" for frame in frames)
        instruction = prompt("vidagent.perception", "vqa_vision").render(times=times, question=question.strip())
        chat = chat_prompt(loaded.processor, instruction.strip(), len(frames))
        (reply,) = generate(loaded, [[to_pil(frame.image) for frame in frames]], [chat],
                            max_new_tokens=self.max_new_tokens)
        return parse_reply(reply)

    def _answer_per_frame(self, loaded: LoadedModel, question: str, frames: Sequence[SampledFrame]) -> VQAResult:
        if loaded.model.config.model_type == "blip":
            text = question.strip()
        else:
            text = prompt("vidagent.perception", "hf_vqa_frame").render(question=question.strip()).strip()
        answers = generate(loaded, [[to_pil(frame.image)] for frame in frames], [text] * len(frames),
                           max_new_tokens=self.max_new_tokens)
        description = "\n".join(f"{frame.time_s:.1f} s: {answer}" for frame, answer in zip(frames, answers))
        return VQAResult(description=description, answer=most_common(answers))

    def _load(self) -> LoadedModel:
        config = load_config(self.model, role="visual question answering", options=self.options)
        classes = ("BlipForQuestionAnswering",) if config.model_type == "blip" else ("AutoModelForImageTextToText",)
        loaded = load_model(self.model, classes, role="visual question answering", options=self.options)
        if has_chat_template(loaded.processor):
            use_left_padding(loaded)
        return loaded


def most_common(answers: Sequence[str]) -> str:
    """The answer given most often (compared case- and space-insensitively); the earliest among ties."""
    keys = [fold(answer) for answer in answers]
    counts = Counter(keys)
    best = max(counts.values(), default=0)
    for key, answer in zip(keys, answers):
        if counts[key] == best:
            return answer.strip()
    return ""


def parse_reply(text: str) -> VQAResult:
    """Split a "Description: ... Answer: ..." reply (``VQAResult.from_reply``)."""
    return VQAResult.from_reply(text)
