"""A vision chat model (``vidagent.perception.vision_chat``) in two perception roles:

- ``ChatCaptioner``, a ``FrameDescriber`` that describes each video segment from a few of its frames in one
  request (``describe_groups``; VideoAgent's LaViLa read 4 frames of a 2-second segment), with the instruction
  of ``prompts/captions.toml``; requests run ``concurrency`` at a time, replies are cached and metered.
- ``ChatVisualQA``, a ``VisualQA`` that sends a question's frames to the model, independent of the planner's
  chat model (the ``vqa_vision`` instruction of ``prompts/vqa.toml``).

``build_vision_backend("captioner" | "vqa", spec, access, cache_path)`` makes either from a spec.
"""

from __future__ import annotations

import hashlib
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vidagent.errors import ModelUnavailableError
from vidagent.perception.base import FrameDescription, VQAResult
from vidagent.perception.vision_chat import (DEFAULT_MAX_SIDE, ReplyCache, VisionAccess, VisionChat, VisionReply,
                                             VisionUsage, build_vision_chat, encode_images, float_option, int_option,
                                             parse_vision_spec)
from vidagent.prompts import prompt
from vidagent.video.sampling import take_every
from vidagent.video.video import SampledFrame

log = logging.getLogger(__name__)

FRAMES_PER_REQUEST = 4  # VideoAgent's LaViLa: 4 frames of each 2-second segment for one caption
VQA_MAX_FRAMES = 8
CAPTIONER_OPTIONS = frozenset({"frames", "max_side", "price_in", "price_out"})
VQA_OPTIONS = frozenset({"max_frames", "max_side", "price_in", "price_out"})


class _Asking:
    """A vision chat model asked through the reply cache, with every reply metered."""

    def __init__(self, chat: VisionChat, cache: ReplyCache | None, usage: VisionUsage, max_side: int) -> None:
        self.chat = chat
        self.cache = cache
        self.usage = usage
        self.max_side = max_side

    def ask(self, instruction: str, images: Sequence[np.ndarray], max_tokens: int) -> VisionReply:
        urls = encode_images(images, self.max_side)
        key = ReplyCache.key(self.chat.name, instruction, urls, max_tokens) if self.cache is not None else ""
        reply = self.cache.get(key) if self.cache is not None else None
        if reply is None:
            reply = self.chat.ask(instruction, urls, max_tokens=max_tokens)
            if self.cache is not None and reply.text:
                self.cache.put(key, reply)
        self.usage.add(reply)
        return reply

    def close(self) -> None:
        self.chat.close()
        if self.cache is not None:
            self.cache.close()


class ChatCaptioner:
    """Segment captions written by a vision chat model (see the module docstring).

    ``name`` says the model, the instruction's digest, the frames per request and the image size, so a memory
    records what wrote its descriptions and any change re-describes the frames. An empty reply leaves that
    segment without a caption (logged) rather than stopping the index.
    """

    label = ""
    memory_note = ""

    def __init__(self, chat: VisionChat, *, frames_per_request: int = FRAMES_PER_REQUEST,
                 max_side: int = DEFAULT_MAX_SIDE, cache: ReplyCache | None = None,
                 usage: VisionUsage | None = None) -> None:
        if frames_per_request < 1:
            raise ModelUnavailableError(f"frames per request must be at least 1, not {frames_per_request}")
        self.frames_per_request = frames_per_request
        self.concurrency = chat.concurrency
        self.usage = usage or VisionUsage()
        self._asking = _Asking(chat, cache, self.usage, max_side)
        self._instruction = prompt("vidagent.perception", "segment_caption")
        digest = hashlib.sha256(self._instruction.text.encode("utf-8")).hexdigest()[:8]
        self.name = f"vlm:{chat.name}?frames={frames_per_request}&max_side={max_side}&prompt={digest}"

    def describe(self, images: Sequence[np.ndarray]) -> list[FrameDescription]:
        """Each image captioned alone (one request each)."""
        return [group[0] for group in self.describe_groups([[image] for image in images])]

    def describe_groups(self, groups: Sequence[Sequence[np.ndarray]]) -> list[list[FrameDescription]]:
        """One request per group of frames (a segment's, in time order); every frame of a group gets its caption."""
        groups = [list(group) for group in groups if len(group)]
        if not groups:
            return []
        workers = min(self.concurrency, len(groups))
        if workers == 1:
            captions = [self._caption(group) for group in groups]
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="captioner") as pool:
                captions = list(pool.map(self._caption, groups))
        return [[FrameDescription(caption=caption, size=_size(image)) for image in group]
                for caption, group in zip(captions, groups)]

    def _caption(self, frames: list[np.ndarray]) -> str:
        instruction = self._instruction.render(count=str(len(frames)))
        reply = self._asking.ask(instruction, frames, self._instruction.budget)
        caption = " ".join(reply.text.split())
        if not caption:
            log.warning("%s returned an empty caption for %d frames", self._asking.chat.name, len(frames))
        return caption

    def close(self) -> None:
        self._asking.close()


class ChatVisualQA:
    """Answers questions about frames with a vision chat model that is not the planner's chat model."""

    sees_frames = True

    def __init__(self, chat: VisionChat, *, max_frames: int = VQA_MAX_FRAMES, max_side: int = DEFAULT_MAX_SIDE,
                 cache: ReplyCache | None = None, usage: VisionUsage | None = None) -> None:
        self.max_frames = max_frames
        self.usage = usage or VisionUsage()
        self._asking = _Asking(chat, cache, self.usage, max_side)
        self.name = f"vlm:{chat.name}"

    def answer(self, question: str, frames: Sequence[SampledFrame]) -> VQAResult:
        chosen = take_every(frames, self.max_frames)
        looking = prompt("vidagent.perception", "vqa_vision")
        times = ", ".join(f"{frame.time_s:.1f} s" for frame in chosen)
        request = looking.render(times=times, question=question.strip())
        reply = self._asking.ask(request, [frame.image for frame in chosen], looking.budget)
        return VQAResult.from_reply(reply.text)

    def close(self) -> None:
        self._asking.close()


def build_vision_backend(role: str, spec: str, access: VisionAccess, cache_path: Path | None) -> Any:
    """A ``ChatCaptioner`` (role ``captioner``) or ``ChatVisualQA`` (role ``vqa``) for an ``openai:``/``gguf:``
    spec. ``cache_path``: the reply cache's file (None: no cache). Bad specs raise ``ModelUnavailableError``."""
    parsed, scheme = parse_vision_spec(spec)
    options = parsed.options
    if role not in ("captioner", "vqa"):
        raise ModelUnavailableError(f"a vision chat model ({spec!r}) can describe frames or answer about them "
                                    f"(captioner, vqa), not be the {role}")
    role_options = CAPTIONER_OPTIONS if role == "captioner" else VQA_OPTIONS
    chat = build_vision_chat(parsed, scheme, access, role_options)
    usage = VisionUsage(price_in=float_option(options, "price_in", 0.0, 0.0, 1e6),
                        price_out=float_option(options, "price_out", 0.0, 0.0, 1e6))
    max_side = int_option(options, "max_side", DEFAULT_MAX_SIDE, 64, 4096)
    cache = ReplyCache(cache_path) if cache_path is not None else None
    if role == "captioner":
        return ChatCaptioner(chat, frames_per_request=int_option(options, "frames", FRAMES_PER_REQUEST, 1, 16),
                             max_side=max_side, cache=cache, usage=usage)
    return ChatVisualQA(chat, max_frames=int_option(options, "max_frames", VQA_MAX_FRAMES, 1, 64),
                        max_side=max_side, cache=cache, usage=usage)


def _size(image: np.ndarray) -> tuple[int, int]:
    return int(image.shape[1]), int(image.shape[0])
