"""Visual question answering over a few frames of a video: a vision model, or a describer plus the LLM.

It lives in tools/ because two of its backends combine a perception model with the chat model
(perception/ knows no LLM). Backends behind one protocol, ``VisualQA``:
- ``VisionChatVQA``: a vision-capable chat model (GPT-4o, Qwen2-VL or LLaVA served by vLLM or
  Ollama, ...) sees the frames themselves.
- ``DescribedFramesVQA``: the offline default. No vision-language model ships offline, so the
  frames are described by the frame describer (detector + OCR) and a text LLM answers from those
  descriptions. Its answers say so; they cannot see actions or objects outside COCO.
- ``vidagent.perception.hf.HFVisualQA``: a local Hugging Face model that answers by itself; it
  takes (and ignores) the ``llm`` argument, so it is a ``VisualQA`` as it is.

``VQAResult`` is defined in ``vidagent.perception.base`` (the HF model returns it too).
"""

from __future__ import annotations

import re
from typing import Protocol, Sequence

from vidagent.llm.base import ChatModel, Message
from vidagent.perception.base import FrameDescriber, VQAResult
from vidagent.prompts import prompt
from vidagent.tools.observed import frame_text
from vidagent.video.sampling import take_every
from vidagent.video.video import SampledFrame


class VisualQA(Protocol):
    """``sees_frames``: whether it looks at the pixels (False: it reads the frames' descriptions, the
    same kind of text the memory's segment descriptions are)."""

    name: str
    sees_frames: bool

    def answer(self, question: str, frames: Sequence[SampledFrame], llm: ChatModel) -> VQAResult: ...


class DescribedFramesVQA:
    """Answers from detector/OCR descriptions of the frames, read by the text LLM."""

    sees_frames = False

    def __init__(self, describer: FrameDescriber) -> None:
        self.describer = describer
        self.name = f"described-frames({describer.name})"

    def answer(self, question: str, frames: Sequence[SampledFrame], llm: ChatModel) -> VQAResult:
        described = self.describer.describe([frame.image for frame in frames])
        lines = [f"{frame.time_s:.1f} s: {frame_text(d)}" for frame, d in zip(frames, described)]
        description = "\n".join(lines)
        answering = prompt("vidagent.tools", "vqa_from_descriptions")
        request = answering.render(descriptions=description, question=question)
        completion = llm.chat([Message("user", request)], max_tokens=answering.budget, stop=answering.stop)
        return VQAResult(description=description, answer=completion.text.strip())


class VisionChatVQA:
    """Sends the frames as images to a vision-capable chat model."""

    name = "vision-chat"
    sees_frames = True

    def __init__(self, max_frames: int = 8) -> None:
        self.max_frames = max_frames  # frames sent at once (ToolShapes.vision_frames)

    def answer(self, question: str, frames: Sequence[SampledFrame], llm: ChatModel) -> VQAResult:
        chosen = take_every(frames, self.max_frames)
        times = ", ".join(f"{frame.time_s:.1f} s" for frame in chosen)
        # the prompt stays with perception/: the local HF vision models ask it too
        looking = prompt("vidagent.perception", "vqa_vision")
        request = looking.render(times=times, question=question)
        completion = llm.chat([Message("user", request, images=tuple(f.image for f in chosen))],
                              max_tokens=looking.budget, stop=looking.stop)
        text = completion.text.strip()
        match = re.search(r"answer\s*:\s*(.*)", text, flags=re.IGNORECASE | re.DOTALL)
        description = re.split(r"answer\s*:", text, flags=re.IGNORECASE)[0]
        description = re.sub(r"^\s*description\s*:\s*", "", description, flags=re.IGNORECASE).strip()
        return VQAResult(description=description, answer=(match.group(1) if match else text).strip())
