"""Visual question answering with the chat model: a vision-capable one, or a describer plus a text one.

Every backend is a ``vidagent.perception.base.VisualQA`` (``answer(question, frames)``). The two here
combine a perception model with a chat model (perception/ knows no LLM) and are made for the chat
model of one question (the session's ``vqa(llm)``), so its budget counts their calls:
- ``VisionChatVQA``: a vision-capable chat model (GPT-4o, Qwen2-VL or LLaVA served by vLLM or
  Ollama, ...) sees the frames themselves.
- ``DescribedFramesVQA``: the offline default. No vision-language model ships offline, so the
  frames are described by the frame describer (detector + OCR) and a text LLM answers from those
  descriptions. Its answers say so; they cannot see actions or objects outside COCO.
The third backend, ``vidagent.perception.hf.HFVisualQA`` (a local Hugging Face model), answers by
itself and needs no chat model. ``FrameBudgetVQA`` wraps any of them to hold a question's frame budget.
"""

from __future__ import annotations

import re
from typing import Sequence

from vidagent.errors import ToolInputError
from vidagent.llm.base import ChatModel, Message
from vidagent.llm.budget import BudgetMeter
from vidagent.perception.base import FrameDescriber, VisualQA, VQAResult
from vidagent.prompts import prompt
from vidagent.tools.observed import frame_text
from vidagent.video.sampling import take_every
from vidagent.video.video import SampledFrame


class DescribedFramesVQA:
    """Answers from detector/OCR descriptions of the frames, read by the text LLM."""

    sees_frames = False

    def __init__(self, describer: FrameDescriber, llm: ChatModel) -> None:
        self.describer = describer
        self.llm = llm
        self.name = f"described-frames({describer.name})"

    def answer(self, question: str, frames: Sequence[SampledFrame]) -> VQAResult:
        described = self.describer.describe([frame.image for frame in frames])
        lines = [f"{frame.time_s:.1f} s: {frame_text(d)}" for frame, d in zip(frames, described)]
        description = "\n".join(lines)
        answering = prompt("vidagent.tools", "vqa_from_descriptions")
        request = answering.render(descriptions=description, question=question)
        completion = self.llm.chat([Message("user", request)], max_tokens=answering.budget, stop=answering.stop)
        return VQAResult(description=description, answer=completion.text.strip())


class VisionChatVQA:
    """Sends the frames as images to a vision-capable chat model."""

    name = "vision-chat"
    sees_frames = True

    def __init__(self, llm: ChatModel, max_frames: int = 8) -> None:
        self.llm = llm
        self.max_frames = max_frames  # frames sent at once (ToolShapes.vision_frames)

    def answer(self, question: str, frames: Sequence[SampledFrame]) -> VQAResult:
        chosen = take_every(frames, self.max_frames)
        times = ", ".join(f"{frame.time_s:.1f} s" for frame in chosen)
        # the prompt stays with perception/: the local HF vision models ask it too
        looking = prompt("vidagent.perception", "vqa_vision")
        request = looking.render(times=times, question=question)
        completion = self.llm.chat([Message("user", request, images=tuple(f.image for f in chosen))],
                              max_tokens=looking.budget, stop=looking.stop)
        text = completion.text.strip()
        match = re.search(r"answer\s*:\s*(.*)", text, flags=re.IGNORECASE | re.DOTALL)
        description = re.split(r"answer\s*:", text, flags=re.IGNORECASE)[0]
        description = re.sub(r"^\s*description\s*:\s*", "", description, flags=re.IGNORECASE).strip()
        return VQAResult(description=description, answer=(match.group(1) if match else text).strip())


class FrameBudgetVQA:
    """A question's visual question answerer held to its budget's frames (``frames=F``): a request for
    more frames than are left is thinned evenly to what is left; with none left it is refused, which the
    tool reports as an error observation (the planner goes on with what it has read)."""

    def __init__(self, vqa: VisualQA, meter: BudgetMeter) -> None:
        self.vqa = vqa
        self.meter = meter
        self.name = vqa.name
        self.sees_frames = vqa.sees_frames

    def answer(self, question: str, frames: Sequence[SampledFrame]) -> VQAResult:
        allowed = self.meter.take_frames(len(frames))
        if frames and not allowed:
            raise ToolInputError(f"the question's frame budget is spent ({self.meter.frames} of "
                                 f"{self.meter.budget.frames} frames looked at); answer from what was read")
        return self.vqa.answer(question, take_every(frames, allowed))
