"""The ReAct loop with a scripted model and real tools over a small in-memory table."""

from __future__ import annotations

from vidagent.agent.react import ReActAgent, VideoContext
from vidagent.tools.base import Evidence, Observation, Parameter, Tool

from scripted_llm import ScriptedLLM

CAPTIONS = ["a woman holds a ball", "a dog jumps", "a dog runs with a black leash"]
CONTEXT = VideoContext(duration_s=6.0, segment_count=3, segment_seconds=2.0)


def _captions(start_segment: int, end_segment: int) -> Observation:
    chosen = range(max(0, start_segment), min(len(CAPTIONS) - 1, end_segment) + 1)
    return Observation("\n".join(f"Segment {i}: {CAPTIONS[i]}" for i in chosen),
                       evidence=tuple(Evidence(2.0 * i, 2.0 * i + 2, CAPTIONS[i]) for i in chosen))


TOOLS = [Tool("caption_retrieval", "captions", (Parameter("start_segment", int, ""), Parameter("end_segment", int, "")),
              _captions)]
CHOICES = ["a black leash", "a rope toy", "a long scarf", "a garden hose", "nothing is attached"]


def test_action_then_final_answer():
    llm = ScriptedLLM([
        "Thought: read everything\nAction: caption_retrieval\nAction Input: 0, 2\nObservation: (invented)",
        "Thought: I now know the final answer\nFinal Answer: a black leash",
    ])
    answer = ReActAgent(llm, TOOLS, overview_segments=0).run("What is attached to the dog?", CONTEXT, CHOICES)
    assert answer.choice_index == 0 and answer.text == "a black leash"
    assert [s.action for s in answer.trace] == ["caption_retrieval", "final_answer"]
    assert "a dog runs with a black leash" in answer.trace[0].observation
    assert [(e.start_s, e.end_s) for e in answer.evidence] == [(0.0, 2.0), (2.0, 4.0), (4.0, 6.0)]
    assert answer.usage.llm_calls == 2 and answer.usage.prompt_tokens > 0
    # The second request carries the first step and the tool's observation, appended at the end.
    second = llm.requests[1]
    assert second[-2].role == "assistant" and "(invented)" not in second[-2].content
    assert second[-1].content.startswith("Observation: Segment 0: a woman holds a ball")


def test_malformed_steps_are_told_to_the_model_and_the_loop_continues():
    llm = ScriptedLLM([
        "I think it's a leash but let me check.",
        "Thought: x\nAction: watch_video\nAction Input: all",
        "Thought: x\nAction: caption_retrieval\nAction Input: zero to two",
        "Final Answer: a black leash",
    ])
    answer = ReActAgent(llm, TOOLS, overview_segments=0).run("What is attached to the dog?", CONTEXT, CHOICES)
    assert answer.choice_index == 0
    errors = [s for s in answer.trace if s.is_error]
    assert len(errors) == 3
    assert "No 'Action:'" in errors[0].observation
    assert "Unknown tool" in errors[1].observation
    assert "caption_retrieval(start_segment: int, end_segment: int)" in errors[2].observation


def test_step_limit_forces_a_final_answer():
    looping = "Thought: more\nAction: caption_retrieval\nAction Input: 0, 0"
    llm = ScriptedLLM([looping] * 3 + ["Final Answer: a garden hose"])
    answer = ReActAgent(llm, TOOLS, max_steps=3, overview_segments=0).run("Which object?", CONTEXT, CHOICES)
    assert answer.choice_index == 3
    assert len(answer.trace) == 4 and answer.trace[-1].thought == "(step limit reached)"
    assert "used all your steps" in llm.requests[-1][-1].content


def test_repeated_format_errors_stop_early_and_force_an_answer():
    llm = ScriptedLLM(["blah", "blah", "blah", "Final Answer: nothing is attached"])
    answer = ReActAgent(llm, TOOLS, max_steps=8, overview_segments=0).run("Which object?", CONTEXT, CHOICES)
    assert answer.choice_index == 4 and len(llm.requests) == 4


def test_unmappable_final_answer_is_mapped_by_one_more_question():
    llm = ScriptedLLM(["Final Answer: something on its harness", "0"])
    answer = ReActAgent(llm, TOOLS, overview_segments=0).run("What is attached?", CONTEXT, CHOICES)
    assert answer.choice_index == 0
    assert "Which option is that?" in llm.requests[-1][-1].content


def test_open_ended_answer_keeps_the_text():
    llm = ScriptedLLM(["Final Answer: a ball"])
    answer = ReActAgent(llm, TOOLS, overview_segments=0).run("What does she throw?", CONTEXT)
    assert answer.text == "a ball" and answer.choice_index is None and answer.choices is None


def test_overview_step_reads_the_first_segments_before_the_model_speaks():
    llm = ScriptedLLM(["Thought: the last segment shows it\nFinal Answer: a black leash"])
    answer = ReActAgent(llm, TOOLS, overview_segments=2).run("What is attached to the dog?", CONTEXT, CHOICES)
    assert answer.choice_index == 0
    overview = answer.trace[0]
    assert (overview.action, overview.action_input) == ("caption_retrieval", "0, 1")
    assert overview.model_output == "(automatic overview)" and "a dog jumps" in overview.observation
    first_request = llm.requests[0]
    assert [m.role for m in first_request] == ["system", "user", "assistant", "user"]
    assert "Action: caption_retrieval" in first_request[2].content
    assert first_request[3].content.startswith("Observation: Segment 0: a woman holds a ball")
    assert "6.0 seconds long, with 3 segments of 2 seconds (ids 0 to 2)" in first_request[1].content
    assert answer.usage.llm_calls == 1


def test_a_repeated_call_is_not_run_again_and_repetition_forces_the_answer():
    looping = "Thought: more\nAction: caption_retrieval\nAction Input: 0, 2"
    llm = ScriptedLLM([looping] * 4 + ["Final Answer: a black leash"])
    answer = ReActAgent(llm, TOOLS, max_steps=8, overview_segments=0).run("Which object?", CONTEXT, CHOICES)
    assert answer.choice_index == 0
    observations = [step.observation for step in answer.trace[:4]]
    assert "Segment 2: a dog runs" in observations[0]
    assert all(o.startswith("You already made this exact call") for o in observations[1:])
    assert len(llm.requests) == 5 and "used all your steps" in llm.requests[-1][-1].content


def test_repeating_the_overview_call_is_caught_too():
    llm = ScriptedLLM(["Thought: read\nAction: caption_retrieval\nAction Input: (0, 2)", "Final Answer: a black leash"])
    answer = ReActAgent(llm, TOOLS, overview_segments=15).run("Which object?", CONTEXT, CHOICES)
    assert answer.trace[1].observation.startswith("You already made this exact call")


def test_a_bare_number_as_the_final_answer_is_mapped_by_the_which_option_call():
    # Seen on the dev set: asked for the option's text, the 1.5B model answered "4" (a segment id it read).
    llm = ScriptedLLM(["Final Answer: 4", "1"])
    answer = ReActAgent(llm, TOOLS, overview_segments=0).run("What is attached to the dog?", CONTEXT, CHOICES)
    assert answer.choice_index == 1 and len(llm.requests) == 2
    assert answer.trace[-1].thought == "(mapping the answer to an option)"
