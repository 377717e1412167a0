"""How the faces show steps and answers to people: without the ``<video_text>`` markup the planners'
prompts need, and with options named by letter (A for the first) as the page, the CLI and MCP all do.

The markup tells a model which text came from the video; to a person it is noise, so it is taken out of
what is shown (the answer JSON and the trace keep it, as the model saw it). The prompts number options
from 0, so a model's final answer may be "4" or "1. no": shown, it names the option by its letter and
text ("E. nothing"), with what the model wrote beside it when that differs.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from vidagent.agent.parsing import extract_choice
from vidagent.agent.steps import Step
from vidagent.agent.task import option_label
from vidagent.memory.store import SegmentRecord
from vidagent.tools.observed import CLOSE, OPEN, segment_text

_MARKUP = re.compile(f"{re.escape(OPEN)}|{re.escape(CLOSE)}")


def plain(text: str) -> str:
    """``text`` without the ``<video_text>`` tags (their content stays, quoted)."""
    return _MARKUP.sub(lambda match: "“" if match.group(0) == OPEN else "”", text)


def shown_segment(segment: SegmentRecord) -> str:
    """A segment as people read it: as planners do (``segment_text``), without the markup."""
    return plain(segment_text(segment))


def option_text(index: int, choices: Sequence[str]) -> str:
    """An option as people see it: ``"B. puts it in her bag"``."""
    return f"{option_label(index)}. {choices[index]}"


def shown_answer(answer: str, choices: Sequence[str] | None) -> str:
    """A final answer as shown: the option it names, by letter and text, else the answer itself."""
    text = plain(answer).strip()
    if not choices:
        return text
    index = extract_choice(text, choices)
    if index is None:
        return text
    shown = option_text(index, choices)
    return shown if text.lower() in (choices[index].lower(), shown.lower()) else f"{shown} (the model wrote “{text}”)"


def shown_step(step: Step, choices: Sequence[str] | None) -> dict[str, Any]:
    """A step as a face streams it: its fields, its ``summary`` and a one-line ``display`` for people."""
    data = step.to_dict()
    summary = plain(step.summary())
    if data["type"] == "final_answer":
        answer = shown_answer(data["answer"], choices)
        label = "Final Answer" if data.get("how") == "model" else f"Final Answer ({data.get('how')})"
        summary = f"{label}: {answer}" + (f" — {plain(data['thought'])}" if data.get("thought") else "")
        display = answer + (f"  — {plain(data['thought'])}" if data.get("thought") else "")
    elif data["type"] == "tool_call":
        display = f"{data['tool']}({data['raw_arguments']})" + (f"  — {data['thought']}" if data.get("thought") else "")
    elif data["type"] == "observation":
        display = plain(data["text"])
    else:
        display = re.sub(r"^[A-Za-z ()]+: ", "", summary)
    return {**data, "summary": summary, "display": display}


def shown_answer_data(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer's JSON as shown: its text, evidence and candidates without markup, and ``option``, the
    chosen option's letter (or null)."""
    index = answer.get("choice_index")
    return {**answer, "answer": plain(answer.get("answer") or ""),
            "option": option_label(index) if index is not None else None,
            "evidence": [{**item, "text": plain(item.get("text", "")).strip()}
                         for item in answer.get("evidence", [])],
            "candidates": [{**item, "text": plain(item.get("text", ""))} for item in answer.get("candidates", [])]}
