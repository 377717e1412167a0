"""Whether the memory holds the kind of evidence a question needs, and "I cannot see that" where it does not
(issue 51).

The offline memory holds on-screen text (OCR), speech (Whisper), the 80 COCO objects with colours, positions and
tracks, and so counts and times. It holds no description of scenes, materials or actions unless a captioner (a
vision model, or a released caption set) described the frames. A question is matched to the kinds of evidence
that could answer it, from its words:

* what text or speech says (``text_guard.about_text``): needs on-screen text or speech; a memory that read none
  cannot answer it (a glanced memory, ``memory.glance``, has read only the frames it glanced at: the reason says so
  and that indexing the video whole reads the rest);
* a scene or place, a material, an action or what happens: needs captions; the detector's descriptions name
  objects only, and the actions stage without a video classifier gives movement and pose verbs only.

Where every memory the question reads lacks that kind, the answer abstains saying what the memory does not see and
how to let it see, its best guess kept (a multiple-choice benchmark still scores the guess). Anything else (objects,
counts, colours, positions, times) is left to the planner.
"""

from __future__ import annotations

import re
from typing import Iterable, Protocol

from vidagent.agent.text_guard import about_text
from vidagent.memory.coverage import Coverage

GIVE_IT_A_VISION_MODEL = ('give it a vision model: export VIDAGENT_CAPTIONER="openai:gpt-4o-mini?base_url='
                          'https://api.openai.com/v1" (or any OpenAI-compatible endpoint) and ask again')

UNSEEN_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("materials", re.compile(r"\b(made (?:of|from|out of)|materials?|texture)\b", re.IGNORECASE)),
    ("scenes or places", re.compile(
        r"\b(what (?:kind of |type of )?(?:place|room|location|setting|scene|environment|weather|season)|"
        r"where (?:is|are|was|were) (?:this|the video|the scene|it) (?:taking place|filmed|recorded|set)|"
        r"indoors? or outdoors?|weather|season)\b", re.IGNORECASE)),
    ("actions beyond movement and pose (it has moves, walks, sits down; not what someone does with what)", re.compile(
        r"\b(doing|what happens|what happened|what did .{1,40} do|what does .{1,40} do|activity|"
        r"why (?:does|did|is|was|do)|how does .{1,40} (?:move|keep|react)|sequence of moves)\b", re.IGNORECASE)),
)
"""Kinds of evidence the offline detector does not see, each with the words that ask for it (first match wins)."""


class SeenMemory(Protocol):
    """What this module reads of a memory (``memory.video_memory.VideoMemory``)."""

    @property
    def captioned(self) -> bool: ...

    @property
    def speech(self) -> list[tuple[float, float, str]]: ...

    @property
    def on_screen_text(self) -> list[tuple[float, int, str]]: ...

    @property
    def coverage(self) -> Coverage | None: ...


def unseen_reason(question: str, memories: Iterable[SeenMemory]) -> str:
    """Why no memory the question reads can answer it ("" when one can, or the question asks for evidence of a
    kind the offline memory holds)."""
    memories = list(memories)
    if not memories:
        return ""
    if about_text(question):  # a captioner's descriptions may quote the text (NExT-QA's CogAgent captions do)
        if any(memory.on_screen_text or memory.speech or memory.captioned for memory in memories):
            return ""
        partial = [memory.coverage for memory in memories if memory.coverage and not memory.coverage.complete]
        if partial:
            looked = "; ".join(f"one frame every {c.interval_text}" + ("" if c.speech else ", no speech yet")
                               for c in partial)
            return (f"the offline memory read no on-screen text or speech in the frames it has glanced at so far "
                    f"({looked}), so it cannot say what is written or said; index the video whole (vidagent index) "
                    f"to read every frame and the speech, or if the text is there, " + GIVE_IT_A_VISION_MODEL)
        return ("the offline memory read no on-screen text or speech in this video, so it cannot say what is "
                "written or said; if the text is there, " + GIVE_IT_A_VISION_MODEL)
    if any(memory.captioned for memory in memories):
        return ""
    for kind, words in UNSEEN_KINDS:
        if words.search(question):
            return (f"the offline memory does not see {kind} (it holds objects, colours, counts, positions, times, "
                    f"on-screen text and speech); {GIVE_IT_A_VISION_MODEL}")
    return ""
