"""ReAct planner (VideoAgent): Thought / Action / Action Input / Observation until a Final Answer.

The conversation only grows at its end (assistant step, user observation, ...), so a local
model reuses its KV cache for everything before the newest observation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

from vidagent.agent.answer import Answer, Step
from vidagent.agent.parsing import ParsedStep, extract_choice, parse_react
from vidagent.errors import VidagentError
from vidagent.llm.base import ChatModel, Completion, Message
from vidagent.llm.metered import MeteredChat
from vidagent.prompts import load_prompt, render
from vidagent.tools.base import Evidence, Tool

STOP = ("\nObservation:", "Observation:", "\nObservation")
MAX_OBSERVATION_CHARS = 2400
MAX_FORMAT_ERRORS = 3  # malformed or repeated steps in a row before the answer is forced
REPEATED_CALL = ("You already made this exact call; its result is above. Use another tool or other "
                 "arguments, or give your Final Answer.")
STEP_TOKENS = 200


@dataclass(frozen=True)
class VideoContext:
    """What the planner is told about the video up front."""

    duration_s: float
    segment_count: int
    segment_seconds: float
    memory_note: str = ""


class ReActAgent:
    """Answers one question with a chat model and a set of tools.

    Pass the same ``MeteredChat`` to the agent and to tools that call the model, and the
    answer's usage counts every call made for the question.
    """

    def __init__(self, llm: ChatModel, tools: Sequence[Tool], *, max_steps: int = 8,
                 overview_segments: int = 15) -> None:
        if not tools:
            raise ValueError("a ReAct agent needs at least one tool")
        self.llm = llm if isinstance(llm, MeteredChat) else MeteredChat(llm)
        self.tools = {tool.name: tool for tool in tools}
        self.max_steps = max_steps
        self.overview_segments = overview_segments

    def run(self, question: str, context: VideoContext, choices: Sequence[str] | None = None) -> Answer:
        answer_format = _answer_format(choices)
        system = render(
            load_prompt("vidagent.agent", "react_system"),
            memory_note=context.memory_note,
            tools="\n".join(f"- {t.signature()}: {t.description}" for t in self.tools.values()),
            tool_names=", ".join(self.tools),
        )
        messages = [Message("system", system), Message("user", _question_text(question, choices, context, answer_format))]
        trace: list[Step] = []
        evidence: list[Evidence] = []
        self._overview(messages, context, trace, evidence)
        final: str | None = None
        format_errors = 0
        calls_made = {self._call_key(step.action, step.action_input) for step in trace}
        for index in range(len(trace), len(trace) + self.max_steps):
            started = time.perf_counter()
            completion = self._chat(messages)
            output = completion.text.strip()
            parsed = parse_react(output, list(self.tools))
            if parsed.final_answer is not None:
                trace.append(_step(index, parsed, output, "", completion, started))
                final = parsed.final_answer
                break
            call = self._call_key(parsed.action, parsed.action_input)
            if parsed.error is not None:
                observation, is_error = parsed.error, True
                format_errors += 1
            elif call in calls_made:
                observation, is_error = REPEATED_CALL, True
                format_errors += 1
            else:
                calls_made.add(call)
                result = self.tools[parsed.action](parsed.action_input)  # type: ignore[index]
                observation, is_error = _clip(result.text), result.is_error
                evidence.extend(result.evidence)
                format_errors = 0
            trace.append(_step(index, parsed, output, observation, completion, started, is_error))
            messages += [Message("assistant", output or "(empty reply)"), Message("user", f"Observation: {observation}")]
            if format_errors >= MAX_FORMAT_ERRORS:
                break
        if final is None:
            final = self._force_final(messages, answer_format, trace)
        choice_index = extract_choice(final, choices, bare_numbers=False) if choices else None
        if choices and choice_index is None:
            choice_index = self._ask_for_choice(messages, final, choices, trace)
        return Answer(
            question=question,
            text=choices[choice_index] if choices and choice_index is not None else final,
            choices=list(choices) if choices else None,
            choice_index=choice_index,
            evidence=_dedupe(evidence),
            trace=trace,
            usage=self.llm.usage,
            planner="react",
        )

    # -- helpers -----------------------------------------------------------------------------
    def _call_key(self, action: str | None, action_input: str) -> tuple[str | None, str]:
        """Identifies a tool call by its parsed arguments, so "(0, 2)" and "0, 2" are one call."""
        tool = self.tools.get(action or "")
        try:
            arguments = tool.parse_arguments(action_input) if tool else None
        except VidagentError:
            arguments = None
        key = repr(sorted(arguments.items())) if arguments else " ".join(action_input.lower().split())
        return action, key

    def _overview(self, messages: list[Message], context: VideoContext, trace: list[Step],
                  evidence: list[Evidence]) -> None:
        """Start with the descriptions of the first segments, written as the model's own first step.

        It saves a model call on short videos, where reading every description is the right first
        move anyway, and shows a small model the expected format by example.
        """
        tool = self.tools.get("caption_retrieval")
        if tool is None or self.overview_segments <= 0 or context.segment_count == 0:
            return
        end = min(context.segment_count, self.overview_segments) - 1
        step_text = render(load_prompt("vidagent.agent", "overview_step"), start=0, end=end).strip()
        result = tool(f"0, {end}")
        observation = _clip(result.text)
        evidence.extend(result.evidence)
        parsed = parse_react(step_text, list(self.tools))
        trace.append(Step(index=len(trace), thought=parsed.thought, action=parsed.action,
                          action_input=parsed.action_input, observation=observation, model_output="(automatic overview)",
                          prompt_tokens=0, completion_tokens=0, seconds=0.0, is_error=result.is_error))
        messages += [Message("assistant", step_text), Message("user", f"Observation: {observation}")]

    def _chat(self, messages: list[Message], max_tokens: int = STEP_TOKENS) -> Completion:
        return self.llm.chat(messages, stop=STOP, max_tokens=max_tokens)

    def _force_final(self, messages: list[Message], answer_format: str, trace: list[Step]) -> str:
        started = time.perf_counter()
        prompt = render(load_prompt("vidagent.agent", "force_final"), answer_format=answer_format)
        completion = self._chat(messages + [Message("user", prompt)], max_tokens=80)
        parsed = parse_react(completion.text, list(self.tools))
        answer = parsed.final_answer or completion.text.strip()
        trace.append(_step(len(trace), ParsedStep(thought="(step limit reached)", final_answer=answer),
                           completion.text, "", completion, started))
        return answer

    def _ask_for_choice(
        self, messages: list[Message], final: str, choices: Sequence[str], trace: list[Step]
    ) -> int | None:
        """The final answer named no option: ask once which option it means."""
        started = time.perf_counter()
        options = "\n".join(f"{i}. {c}" for i, c in enumerate(choices))
        prompt = (f"Your answer was: {final}\nWhich option is that? Options:\n{options}\n"
                  f"Reply with the option number only.")
        completion = self._chat(messages + [Message("user", prompt)], max_tokens=8)
        index = extract_choice(completion.text, choices)
        trace.append(_step(len(trace), ParsedStep(thought="(mapping the answer to an option)",
                                                  final_answer=completion.text.strip()),
                           completion.text, "", completion, started))
        return index


def _answer_format(choices: Sequence[str] | None) -> str:
    if choices:
        # Small models asked for an option *number* mostly echo the last number they read; asked to
        # copy the option's text they pick by meaning (extract_choice maps text, letters and numbers).
        return "the text of the correct option, copied exactly"
    return "a short answer (for a 'when' question, the time in seconds)"


def _question_text(question: str, choices: Sequence[str] | None, context: VideoContext, answer_format: str) -> str:
    options = ""
    if choices:
        options = "\nOptions:\n" + "\n".join(f"{i}. {choice}" for i, choice in enumerate(choices))
    return render(
        load_prompt("vidagent.agent", "question"),
        duration=f"{context.duration_s:.1f}",
        segment_count=context.segment_count,
        last_segment=max(0, context.segment_count - 1),
        segment_seconds=f"{context.segment_seconds:g}",
        question=question,
        options=options,
        answer_format=answer_format,
    ).strip()


def _clip(text: str) -> str:
    if len(text) <= MAX_OBSERVATION_CHARS:
        return text
    return text[:MAX_OBSERVATION_CHARS] + f" ... [{len(text) - MAX_OBSERVATION_CHARS} more characters cut]"


def _step(index: int, parsed: ParsedStep, output: str, observation: str, completion: Completion,
          started: float, is_error: bool = False) -> Step:
    return Step(
        index=index,
        thought=parsed.thought,
        action=parsed.action if parsed.final_answer is None else "final_answer",
        action_input=parsed.action_input if parsed.final_answer is None else parsed.final_answer,
        observation=observation,
        model_output=output,
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
        seconds=time.perf_counter() - started,
        is_error=is_error,
    )


def _dedupe(evidence: list[Evidence]) -> list[Evidence]:
    seen: dict[tuple[float, float], Evidence] = {}
    for item in evidence:
        seen.setdefault((item.start_s, item.end_s), item)
    return sorted(seen.values(), key=lambda e: (e.start_s, e.end_s))
