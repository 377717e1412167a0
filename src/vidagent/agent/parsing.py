"""Lenient parsing of ReAct model output and of multiple-choice answers.

Small models format badly: labels in bold or lower case, the tool name in backticks or written
as a call, the final answer as a letter, a number or the option's text. Nothing here raises:
what cannot be parsed is reported so the agent can tell the model what went wrong.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Sequence

from vidagent.prompts import load_prompt, prompt
from vidagent.text import normalise_answer

PROMPTS = "vidagent.agent"

_LABEL = r"[\*_#\s]*{name}[\*_\s]*:[\*_]*"
_THOUGHT = re.compile(_LABEL.format(name="thought"), re.IGNORECASE)
_ACTION = re.compile(_LABEL.format(name="action"), re.IGNORECASE)
_ACTION_INPUT = re.compile(_LABEL.format(name=r"action[\s_]*input"), re.IGNORECASE)
_FINAL = re.compile(_LABEL.format(name=r"final[\s_]*answer"), re.IGNORECASE)
_OBSERVATION = re.compile(_LABEL.format(name="observation"), re.IGNORECASE)


@dataclass(frozen=True)
class ParsedStep:
    """One model turn: either an action (with input) or a final answer, or an error message."""

    thought: str = ""
    action: str | None = None
    action_input: str = ""
    final_answer: str | None = None
    error: str | None = None


def parse_react(text: str, tool_names: Sequence[str]) -> ParsedStep:
    """Parse ``Thought: ... Action: ... Action Input: ...`` or ``... Final Answer: ...``."""
    text = _OBSERVATION.split(text, maxsplit=1)[0]  # anything after an invented observation is ignored
    final = _FINAL.search(text)
    action = _ACTION.search(text)
    # An action that comes before a final answer wins: the model must see the observation first.
    if final and not (action and action.start() < final.start()):
        thought = _thought(text[: final.start()])
        answer = text[final.end():].strip()
        if not answer:
            return ParsedStep(thought=thought, error=load_prompt(PROMPTS, "empty_final_answer"))
        return ParsedStep(thought=thought, final_answer=answer)
    if action is None:
        call = _find_call(text, tool_names)
        if call:
            return ParsedStep(thought=_thought(text), action=call[0], action_input=call[1])
        return ParsedStep(thought=_thought(text), error=load_prompt(PROMPTS, "no_action"))
    thought = _thought(text[: action.start()])
    rest = text[action.end():]
    input_match = _ACTION_INPUT.search(rest)
    action_text = (rest[: input_match.start()] if input_match else rest).strip()
    action_input = rest[input_match.end():].strip() if input_match else ""
    name, inline_input = _tool_name(action_text, tool_names)
    if name is None:
        return ParsedStep(
            thought=thought,
            error=prompt(PROMPTS, "unknown_tool").render(written=repr((action_text.strip().splitlines() or [""])[0][:60]),
                                                         tool_names=", ".join(tool_names)),
        )
    return ParsedStep(thought=thought, action=name, action_input=action_input or inline_input)


def _thought(text: str) -> str:
    match = _THOUGHT.search(text)
    return (text[match.end():] if match else text).strip()


def _tool_name(action_text: str, tool_names: Sequence[str]) -> tuple[str | None, str]:
    """The tool named in an ``Action:`` line, and any input written inline as a call."""
    first_line = action_text.strip().splitlines()[0] if action_text.strip() else ""
    cleaned = first_line.strip().strip("`*'\" ").strip()
    lowered = cleaned.lower()
    for name in sorted(tool_names, key=len, reverse=True):
        if lowered.startswith(name.lower()):
            inline = cleaned[len(name):].strip().strip("`").strip()
            if inline.startswith("(") and inline.endswith(")"):
                inline = inline[1:-1]
            return name, inline.strip()
    for name in tool_names:  # the name somewhere in the line (e.g. "use the caption_retrieval tool")
        if name.lower() in lowered:
            return name, ""
    return None, ""


def _find_call(text: str, tool_names: Sequence[str]) -> tuple[str, str] | None:
    for name in tool_names:
        match = re.search(re.escape(name) + r"\s*\((.*?)\)", text, flags=re.DOTALL)
        if match:
            return name, match.group(1).strip()
    return None


# -- multiple choice ----------------------------------------------------------------------
_LETTERS = string.ascii_uppercase


_BARE_NUMBER = re.compile(r"\s*(?:segments?\s*)?[\s\d.,:;\-–—~()\[\]]*\d[\s\d.,:;\-–—~()\[\]]*"
                          r"(?:s|sec|secs|seconds?)?[\s.]*", re.IGNORECASE)


def is_bare_number(answer: str) -> bool:
    """Whether an answer is only numbers: "24.0", "16 s", "3.0 - 5.5", "segment 4" (a time or a segment
    id a small model copied from what it read, where words were asked for)."""
    return _BARE_NUMBER.fullmatch(answer) is not None


def lone_option_number(answer: str, count: int) -> int | None:
    """The option an answer that is nothing but one option number names ("3", "3.", "(3)"), else None.

    Asked for an option's text, small models often reply with its number instead. The model asked
    afterwards which option such an answer means repeated the number in 13 of 16 dev questions, so
    that call bought nothing; an answer that is only a number in range is taken as that option.
    """
    match = re.fullmatch(r"\s*[\(\[]?\s*(\d)\s*[\)\]]?\s*\.?\s*", answer)
    if match and int(match.group(1)) < count:
        return int(match.group(1))
    return None


# A final answer that says the planner reached none (read after normalise_answer: folded, no punctuation or articles).
_NO_ANSWER = re.compile(
    r"(none( of (them|these|those|above|options|choices))?|n|n a|na|nan|null|nothing|unknown|no answer|"
    r"not (enough|sufficient) information( to answer)?|insufficient information|(it )?cannot be determined|"
    r"(it )?can not be determined|i (do not|don t|cannot|can t|can not) (know|tell|say)|unclear|not sure)")


def reaches_no_answer(answer: str, choices: Sequence[str] | None = None) -> bool:
    """Whether a final answer says no answer was reached ("None", "N/A", "unknown", "cannot be determined",
    an empty reply), unless it is exactly one of the options ("none" can be an option's text)."""
    plain = normalise_answer(answer)
    if not plain:
        return True
    if choices and any(plain == normalise_answer(choice) for choice in choices):
        return False
    return _NO_ANSWER.fullmatch(plain) is not None


def extract_choice(answer: str, choices: Sequence[str], *, bare_numbers: bool = True) -> int | None:
    """The index of the option ``answer`` names (letter, number or the option's text), else None.

    Numbers are read as 0-based indices, as the prompt labels options 0..n-1. With
    ``bare_numbers=False`` an answer that is only numbers ("4", "4.0-9.6 s") names no option:
    asked for an option's text, small models write such answers by echoing a segment id or a
    time they read, not by choosing.
    """
    if not choices:
        return None
    text = answer.strip()
    if not text:
        return None
    if not bare_numbers and re.fullmatch(r"[\s\d.,:;\-–—~()\[\]]*(?:s|sec|secs|seconds?)?[\s.]*", text, re.IGNORECASE) \
            and not any(normalise_answer(text) == normalise_answer(c) for c in choices):
        return None
    normalised = [normalise_answer(c) for c in choices]
    plain = normalise_answer(text)
    # 1. Exactly an option's text (or the text after a label like "2. ...").
    for index, option in enumerate(normalised):
        if option and plain == option:
            return index
    # 1b. A label then an option's text ("1. red", "(B) blue"): the text decides, whatever the label counts from.
    labelled = re.match(r"^\s*[\(\[]?\s*(?:[0-9]+|[A-Za-z])\s*[\)\]\.:]\s*(.+)$", text)
    if labelled:
        rest = normalise_answer(labelled.group(1))
        for index, option in enumerate(normalised):
            if option and rest == option:
                return index
    # 2. A bare label at the start: "2", "(c)", "C.", "option 3", "choice: B", "Answer 1".
    #    A lone letter counts only when marked as a label, so "A dog runs" is not option A.
    label = re.match(
        r"^\s*(?:the\s+)?(?:correct\s+)?(?:(?:answer|option|choice)\s*(?:is|:)?\s*)?"
        r"(?:[\(\[]\s*([0-9]+|[A-Za-z])\s*[\)\]]|([0-9]+)\b|([A-Za-z])(?:[\.:\),]|\s*$))",
        text,
        flags=re.IGNORECASE,
    )
    keyword = re.match(r"^\s*(?:answer|option|choice)\s*(?:is|:)?\s*([A-Za-z])\b", text, flags=re.IGNORECASE)
    token = next((g for g in label.groups() if g), None) if label else (keyword.group(1) if keyword else None)
    if token is not None:
        index = _label_index(token, len(choices))
        if index is not None:
            return index
    # 3. An option's text contained in the answer (longest match wins, so "red car" beats "car").
    contained = [(len(option), index) for index, option in enumerate(normalised) if option and option in plain]
    if contained:
        return max(contained)[1]
    # 4. A label anywhere: "... so the answer is 3" / "option (b)".
    anywhere = re.findall(r"(?:answer|option|choice)\s*(?:is|:)?\s*[\(\[]?([0-9]+|[A-Ea-e])\b", text, re.IGNORECASE)
    for token in reversed(anywhere):
        index = _label_index(token, len(choices))
        if index is not None:
            return index
    # 5. Most of an option's words appear in the answer.
    answer_words = set(plain.split())
    best, best_overlap = None, 0.0
    for index, option in enumerate(normalised):
        words = set(option.split())
        if words:
            overlap = len(words & answer_words) / len(words)
            if overlap > best_overlap:
                best, best_overlap = index, overlap
    if best_overlap >= 0.6:
        return best
    # 6. The answer's words all belong to exactly one option ("leash" -> "a black leash").
    holders = [index for index, option in enumerate(normalised) if answer_words and answer_words <= set(option.split())]
    return holders[0] if len(holders) == 1 else None


def _label_index(token: str, count: int) -> int | None:
    if token.isdigit():
        value = int(token)
        return value if value < count else None
    if len(token) == 1 and token.upper() in _LETTERS[:count]:
        return _LETTERS.index(token.upper())
    return None
