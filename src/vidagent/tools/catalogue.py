"""The catalogue: what every tool and AssistGPT module reads and needs, declared once.

The workspace derives from it what a question's sources can serve (an object tool needs frames to
build an object memory from; the image modules need an image or a video with frames; the speech
modules need speech or a file to transcribe), and which tools read the object memory (so the session
can build it ahead). Each entry says:

- ``form``: ``segments`` (VideoAgent's and DoraemonGPT's tools over one video, called with segment ids,
  times or sub-questions) or ``source`` (AssistGPT's modules, called with ``visual[i]``);
- ``reads``: what it reads: ``descriptions`` (the memory's frame descriptions or captions), ``pixels``
  (frames decoded from the file, or an image), ``speech``, ``text`` (on-screen text), ``objects`` (the
  object memory), ``model`` (it asks a chat or vision model), ``files`` (it writes a file);
- ``needs``: what a source must have for the capability to be offered at all (empty: it answers from
  whatever there is, and says what it lacks);
- ``refines``: it reads a stretch whole, so a partial (glanced) memory is described in full there
  first (``tools.refining``);
- ``offered``: offered by a planner that takes every tool (False: only when the planner's ``tools``
  option names it);
- ``capabilities``: the capabilities (``tools.capabilities.CAPABILITIES``, each written once over a memory
  and a window) it is a form of, the ones it calls itself: the segment-id tool and the ``visual[i]`` module
  of one capability format the same function's result (empty: what it does is written only there).

Every tool the workspace builds must have its entry (``check_declared``, run when the workspace is
built, and a contract test builds them all): a tool added without one fails loudly, not silently
outside the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal

from vidagent.errors import PlannerError
from vidagent.tools.base import Tool
from vidagent.tools.sql_agent import SUBTASK_KINDS

Form = Literal["segments", "source"]


@dataclass(frozen=True)
class Capability:
    name: str
    form: Form
    reads: frozenset[str]
    needs: frozenset[str] = frozenset()
    refines: bool = False
    offered: bool = True
    capabilities: tuple[str, ...] = ()


def _entry(name: str, form: Form, reads: str, *, needs: str = "", refines: bool = False,
           offered: bool = True, of: str = "") -> Capability:
    return Capability(name, form, frozenset(reads.split()), frozenset(needs.split()), refines, offered,
                      tuple(of.split()))




CATALOGUE: dict[str, Capability] = {c.name: c for c in (
    # VideoAgent's temporal tools
    _entry("caption_retrieval", "segments", "descriptions speech text", refines=True, of="read_span"),
    _entry("segment_localization", "segments", "descriptions speech text", of="localise"),
    _entry("visual_question_answering", "segments", "pixels model", refines=True, of="look_and_ask"),
    # VideoAgent's object memory and DoraemonGPT's sub-task tools (SQL over the memory, objects included)
    _entry("object_memory_querying", "segments", "objects model", needs="pixels"),
    *(_entry(kind, "segments", "descriptions speech text objects model") for kind in SUBTASK_KINDS),
    # frames by time
    _entry("frame_description", "segments", "pixels", of="describe"),
    _entry("frame_question_answering", "segments", "pixels model", of="look_and_ask"),
    # DoraemonGPT's utilities and the referring tool: offered only when named
    _entry("export_clip", "segments", "pixels files", offered=False),
    _entry("export_frames", "segments", "pixels files", offered=False),
    _entry("highlight_object", "segments", "pixels objects files", offered=False),
    _entry("remove_object", "segments", "pixels objects files", offered=False),
    _entry("refer_object", "segments", "pixels objects model files", offered=False),
    # AssistGPT's modules
    _entry("caption", "source", "pixels model", needs="pixels", of="describe ask_frames"),
    _entry("video_narration", "source", "descriptions", refines=True, of="read_span"),
    _entry("object_detect", "source", "pixels", needs="pixels"),
    _entry("text_detect", "source", "pixels text", needs="pixels", refines=True),
    _entry("asr", "source", "speech", needs="speech", of="hear"),
    _entry("region_ground", "source", "pixels", needs="pixels"),
    _entry("narration_ground", "source", "descriptions", refines=True, of="localise"),
    _entry("text_ground", "source", "pixels text", needs="pixels"),
    _entry("subtitle_ground", "source", "speech", needs="speech", of="match_speech"),
    _entry("knowledge_reason", "source", "model"),
    _entry("narration_reason", "source", "descriptions model", refines=True, of="read_span"),
    _entry("subtitle_reason", "source", "speech model", needs="speech", of="hear"),
    _entry("temporal_reason", "source", ""),
    _entry("get_frame", "source", "pixels", needs="pixels"),
)}


def names(*, form: Form | None = None, reads: str | None = None, needs: str | None = None,
          offered: bool | None = None) -> tuple[str, ...]:
    """The capabilities matching every filter given, in the catalogue's order."""
    return tuple(c.name for c in CATALOGUE.values()
                 if (form is None or c.form == form) and (reads is None or reads in c.reads)
                 and (needs is None or needs in c.needs) and (offered is None or c.offered == offered))


def unservable(form: Form, *, pixels: bool, speech: bool) -> tuple[str, ...]:
    """The capabilities of ``form`` that sources without frames (``pixels`` false) or without speech
    (``speech`` false) cannot serve, in the catalogue's order."""
    missing = {need for need, present in (("pixels", pixels), ("speech", speech)) if not present}
    return tuple(c.name for c in CATALOGUE.values() if c.form == form and c.needs & missing)


def check_declared(tools: Iterable[Tool], form: Form) -> None:
    """Refuse a tool the catalogue does not declare in ``form`` (a tool added without its entry)."""
    stray = [tool.name for tool in tools if tool.name not in CATALOGUE or CATALOGUE[tool.name].form != form]
    if stray:
        raise PlannerError(f"tools missing from the catalogue (vidagent.tools.catalogue) as {form} tools: "
                           f"{', '.join(stray)}")
