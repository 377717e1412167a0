"""A question over many videos at once ("which of my videos show a dog, and when?"): the library search first,
then one judgement per candidate video, then one answer that lists the videos and their moments with evidence.

1. ``LibrarySearch`` ranks the moments of every memory (or of the videos given) for the question; the videos of
   the best moments, at most ``max_videos``, are the candidates. None: the answer is "none found".
2. Each candidate is judged by the chat model on the lines the search found in it (one call, one token): does it
   belong in the answer? With a model that returns log-probabilities the judgement is P(yes); otherwise the
   generated word. Each video's finding is handed to ``on_video`` as soon as it is made (a face streams it).
3. A video is listed when the judgement says yes, or when the detector saw an object of a category the question
   names (the judge reads the same lines and saw no pixels: it cannot overrule that). Its confidence is the
   judgement's probability (at least an even one for a video listed on a category), never more than its evidence supports
   (``EVIDENCE_CAP``): an object category the question names, seen by the detector and tracker, supports more
   than the question's words in a description, which supports more than a description near in meaning alone.
   The answer's confidence is that of the least sure video it lists (for "none found", one minus the likeliest
   rejected candidate's), so a list is never surer than its weakest entry.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from vidagent.agent.option_scoring import TOP_LOGPROBS, yes_probability
from vidagent.errors import LLMError
from vidagent.llm.base import ChatModel, Message
from vidagent.llm.budget import BudgetSpentError
from vidagent.memory.library_search import LibrarySearch
from vidagent.memory.search_index import SearchFilters
from vidagent.memory.search_moments import Moment
from vidagent.prompts import prompt

log = logging.getLogger(__name__)

PROMPTS = "vidagent.agent"
DEFAULT_MAX_VIDEOS = 8
MOMENTS_SEARCHED = 40  # moments asked of the search; their videos, best first, are the candidates
LINES_PER_VIDEO = 8  # lines of a video's moments the judge reads
EVIDENCE_CAP = {"category": 0.95, "words": 0.85, "meaning": 0.6}
"""The highest confidence each kind of evidence supports (see the module's description)."""


@dataclass(frozen=True)
class VideoFinding:
    """One candidate video: its moments, whether it belongs in the answer and how sure that is."""

    video_id: str
    path: str
    moments: tuple[Moment, ...]
    listed: bool
    confidence: float  # that the video belongs in the answer (listed) or does not (left out)
    judged_by: str  # "likelihood" (P(yes) read) or "text" (the word read)
    seconds: float

    @property
    def name(self) -> str:
        return Path(self.path).name if self.path else self.video_id

    @property
    def evidence(self) -> str:
        """The strongest way its moments were found: "category", "words" or "meaning"."""
        found = {name for moment in self.moments for name in moment.matched_by}
        return next(name for name in ("category", "words", "meaning") if name in found) if found else "meaning"

    def to_dict(self) -> dict[str, object]:
        return {"video_id": self.video_id, "path": self.path, "name": self.name, "listed": self.listed,
                "confidence": round(self.confidence, 3), "evidence": self.evidence, "judged_by": self.judged_by,
                "seconds": round(self.seconds, 2), "moments": [moment.to_dict() for moment in self.moments]}


@dataclass
class LibraryAnswer:
    """The answer to a question over the library: the videos listed (with their moments), those left out, the
    answer's text and confidence."""

    question: str
    findings: list[VideoFinding] = field(default_factory=list)
    text: str = ""
    confidence: float | None = None
    seconds: float = 0.0
    llm_calls: int = 0

    @property
    def listed(self) -> list[VideoFinding]:
        return [finding for finding in self.findings if finding.listed]

    def to_dict(self) -> dict[str, object]:
        return {"question": self.question, "answer": self.text,
                "confidence": None if self.confidence is None else round(self.confidence, 3),
                "videos": [finding.to_dict() for finding in self.listed],
                "left_out": [finding.to_dict() for finding in self.findings if not finding.listed],
                "seconds": round(self.seconds, 2), "llm_calls": self.llm_calls}


VideoDone = Callable[[VideoFinding, int, int], None]
"""Called with each finding, its number (1-based) and the number of candidates."""


def answer_over_library(question: str, search: LibrarySearch, llm: ChatModel, *,
                        filters: SearchFilters = SearchFilters(), max_videos: int = DEFAULT_MAX_VIDEOS,
                        on_video: VideoDone | None = None, progress: bool = False) -> LibraryAnswer:
    """Answer ``question`` over the library ``search`` reaches (``filters``: only some videos); see the module's
    description."""
    started = time.perf_counter()
    answer = LibraryAnswer(question)
    candidates = candidate_videos(search.search(question, filters, limit=MOMENTS_SEARCHED, progress=progress),
                                  max_videos)
    for number, moments in enumerate(candidates, 1):
        finding = judge_video(question, moments, llm)
        answer.llm_calls += 1
        answer.findings.append(finding)
        if on_video is not None:
            on_video(finding, number, len(candidates))
    answer.text = answer_text(answer)
    answer.confidence = answer_confidence(answer)
    answer.seconds = time.perf_counter() - started
    return answer


def candidate_videos(found: Sequence[Moment], max_videos: int) -> list[tuple[Moment, ...]]:
    """The moments of each video, videos in the order of their best moment, at most ``max_videos`` of them."""
    by_video: dict[str, list[Moment]] = {}
    for moment in found:
        if moment.video_id in by_video or len(by_video) < max_videos:
            by_video.setdefault(moment.video_id, []).append(moment)
    return [tuple(moments) for moments in by_video.values()]


def judge_video(question: str, moments: Sequence[Moment], llm: ChatModel) -> VideoFinding:
    """Whether the video of ``moments`` belongs in the answer to ``question``, read from one model call."""
    started = time.perf_counter()
    first = moments[0]
    template = prompt(PROMPTS, "library_judge")
    request = template.render(question=question, name=Path(first.path).name if first.path else first.video_id,
                              lines=_lines_text(moments))
    messages = [Message("system", prompt(PROMPTS, "library_judge_system").text.strip()), Message("user", request)]
    probability, judged_by = None, "text"
    try:
        completion = llm.chat(messages, max_tokens=template.budget, temperature=0.0, top_logprobs=TOP_LOGPROBS)
        probability = yes_probability(completion.first_token_logprobs)
        if probability is not None:
            judged_by = "likelihood"
        else:
            word = completion.text.strip().lower()
            probability = 1.0 if word.startswith("y") else 0.0 if word.startswith("n") else 0.5
    except (LLMError, BudgetSpentError) as error:  # no judgement: the search's evidence alone, at its cap
        log.warning("the judgement of %s failed (%s); listed on its evidence", first.path or first.video_id, error)
        probability, judged_by = 0.5, "none"
    evidence = _strongest(moments)
    cap = EVIDENCE_CAP[evidence]
    # The judge reads the same lines the search found: it cannot overrule a detector that saw the very category
    # the question names (it saw no pixels), so such a video stays listed, at no more than an even confidence.
    listed = probability >= 0.5 or evidence == "category"
    confidence = min(max(probability, 0.5), cap) if listed else min(1.0 - probability, 0.95)
    return VideoFinding(first.video_id, first.path, tuple(moments), listed, confidence, judged_by,
                        time.perf_counter() - started)


def _strongest(moments: Sequence[Moment]) -> str:
    found = {name for moment in moments for name in moment.matched_by}
    return next((name for name in ("category", "words") if name in found), "meaning")


def _lines_text(moments: Sequence[Moment]) -> str:
    lines = []
    for moment in moments:
        for line in moment.lines:
            when = f"{line.start_s:.1f} s" if abs(line.end_s - line.start_s) < 0.05 else \
                f"{line.start_s:.1f}-{line.end_s:.1f} s"
            lines.append(f"- {when} [{line.kind}] {line.text}")
    return "\n".join(lines[:LINES_PER_VIDEO])


def spans_text(finding: VideoFinding) -> str:
    spans = sorted(span for moment in finding.moments for span in moment.spans)
    return ", ".join(f"{a:.1f}" if abs(b - a) < 0.05 else f"{a:.1f}-{b:.1f}" for a, b in spans) + " s"


def answer_text(answer: LibraryAnswer) -> str:
    """The answer in words: the videos listed with their times, or that none was found."""
    listed = answer.listed
    if not listed:
        considered = len(answer.findings)
        return ("None found: no video's memory holds anything for this question." if not considered else
                f"None found: {considered} video{'s' if considered != 1 else ''} came near, but none belongs in "
                f"the answer.")
    parts = [f"{finding.name} ({spans_text(finding)})" for finding in listed]
    return f"{len(listed)} video{'s' if len(listed) != 1 else ''}: " + "; ".join(parts) + "."


def answer_confidence(answer: LibraryAnswer) -> float | None:
    """The least sure listed video's confidence; for "none found", one minus the likeliest rejected candidate's
    P(yes) (None when there was no candidate: nothing to be sure of beyond the search)."""
    if answer.listed:
        return min(finding.confidence for finding in answer.listed)
    if answer.findings:
        return min(finding.confidence for finding in answer.findings)
    return None
