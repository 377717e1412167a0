"""Prompts with a contract: strict rendering, and every shipped prompt renders with the values its code passes."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from vidagent.errors import PromptError, VidagentError
from vidagent.prompts import Prompt, load_prompt, prompt, prompt_packages, prompts, prompts_digest, render

# The values each shipped prompt is rendered with in the code (a fragment read as text takes none).
# A new prompt, or a placeholder added to or dropped from one, must be written here too.
PLACEHOLDERS: dict[tuple[str, str], tuple[str, ...]] = {
    ("agent", "answer_format_choice"): (), ("agent", "answer_format_count"): (), ("agent", "answer_format_text"): (),
    ("agent", "answer_format_time"): (), ("agent", "answer_format_when"): (),
    ("agent", "which_option"): ("answer", "options"), ("agent", "which_option_or_none"): ("answer", "options"),
    ("agent", "option_number"): ("options",),
    ("agent", "library_judge"): ("lines", "name", "question"), ("agent", "library_judge_system"): (),
    ("agent", "check_evidence"): ("evidence", "options", "question"), ("agent", "check_support"): ("answer",),
    ("agent", "answer_rating"): ("answer", "evidence", "question"), ("agent", "answer_rating_system"): (),
    ("agent", "orders_choose_again"): ("excluded", "material", "options", "question"),
    ("agent", "orders_answer_again"): ("excluded", "material", "question"),
    ("agent", "text_withheld_choose"): ("material", "options", "question"),
    ("agent", "text_withheld_answer"): ("material", "question"),
    ("agent", "text_withheld_material"): ("material", "question"),
    ("agent", "orders_material"): ("excluded", "material", "question"),
    ("agent", "caption_only_system"): ("memory_note",), ("agent", "caption_only"): ("captions", "options", "question"),
    ("agent", "caption_only_knowledge"): ("source", "text"), ("agent", "blind_system"): (),
    ("agent", "blind"): ("options", "question"), ("agent", "option_text"): (),
    ("agent", "knowledge_step"): ("question", "source", "tool"),
    ("agent", "answer_line"): ("answer_format",),
    ("agent", "learner_self_check"): ("answer", "answer_format", "options", "question", "steps"),
    ("agent", "learner_reference_check"): ("answer", "question", "reference"),
    ("agent", "mcts_expand"): ("actions",), ("agent", "mcts_tie"): ("answers",),
    ("agent", "mcts_summary"): ("answer_format", "answers", "question"),
    ("agent", "memory_selection"): ("question",),
    ("agent", "peil_system"): ("examples", "memory_note", "modules"), ("agent", "peil_examples"): ("examples",),
    ("agent", "peil_opening_step"): ("module", "source"),
    ("agent", "peil_question"): ("answer_format", "feedback", "options", "question", "sources"),
    ("agent", "peil_retry"): ("answer", "reason"),
    ("agent", "react_step"): (), ("agent", "react_system"): ("memory_note", "rules", "tool_names", "tools"),
    ("agent", "question"): ("answer_format", "duration", "last_segment", "options", "question", "segment_count",
                            "segment_seconds"),
    ("agent", "overview_step"): ("end", "start"), ("agent", "answer_in_words"): ("asks",),
    ("agent", "repeated_call"): ("answer_format",), ("agent", "tried_call"): (), ("agent", "empty_final_answer"): (),
    ("agent", "no_action"): (), ("agent", "unknown_tool"): ("tool_names", "written"),
    ("agent", "no_such_tool"): ("name", "tool_names"), ("agent", "no_such_source"): ("index", "listed"), ("agent", "force_final"): ("answer_format",),
    ("agent", "tool_hints"): (),
    ("agent", "traveler_context"): ("duration", "memory", "memory_note", "question"),
    ("agent", "traveler_explanation"): ("explanation",), ("agent", "traveler_summarize"): ("example", "memory", "question"),
    ("agent", "traveler_plan"): ("choices", "explanation"), ("agent", "traveler_retrieve"): ("current", "gap", "plan"),
    ("agent", "traveler_questions"): ("count", "current"),
    ("agent", "traveler_evaluate"): ("answer_format", "choices", "plan"),
    ("agent", "traveler_force"): ("answer_format", "choices"),
    ("agent", "traveler_undecided"): ("first", "first_p", "second", "second_p"),
    ("eval", "nlq_question"): ("query",), ("eval", "judge_system"): (),
    ("eval", "judge"): ("prediction", "question", "reference"),
    ("experience", "experience_summary"): ("answer", "options", "question"),
    ("experience", "experience_patterns"): ("task_type", "workflows"),
    ("experience", "experience_complexity"): ("question",), ("experience", "experience_replay"): ("parts",),
    ("experience", "experience_replay_semantic"): ("lines",), ("experience", "experience_replay_procedural"): ("lines",),
    ("memory", "memory_note_imported"): ("captioner", "conventions", "covers"),
    ("perception", "memory_note_caption"): ("then",), ("perception", "memory_note_detector"): ("sources",),
    ("perception", "vqa_vision"): ("question", "times"), ("perception", "hf_vqa_frame"): ("question",),
    ("perception", "hf_caption_chat"): (), ("perception", "segment_caption"): ("count",),
    ("server", "mcp_instructions"): (), ("server", "mcp_ask_video"): ("default", "planners"),
    ("tools", "assist_knowledge"): ("history", "query"),
    ("tools", "assist_reason"): ("material", "material_name", "material_note", "query", "what"),
    ("tools", "assist_note_narration"): (), ("tools", "assist_note_speech"): (),
    ("tools", "sql_request"): ("examples", "hints", "question", "schema"), ("tools", "sql_retry"): ("error",),
    ("tools", "sql_answer"): ("question", "rows", "sql"), ("tools", "sql_schema"): (),
    **{("tools", f"sql_examples_{kind}"): () for kind in ("when", "why", "what", "how", "count", "other", "object",
                                                          "knowledge")},
    ("tools", "sql_schema_knowledge"): ("tables",),
    ("tools", "table_tool"): ("about", "tables"), ("tools", "document_tool"): ("about", "parts", "title", "unit"),
    ("tools", "web_tool"): ("about",), ("tools", "document_answer"): ("passages", "question", "title"),
    ("tools", "web_answer"): ("question", "results"),
    ("tools", "subtask_descriptions"): (), ("tools", "object_query_stopwords"): (),
    ("tools", "vqa_from_descriptions"): ("descriptions", "question"), ("tools", "vqa_from_captions"): ("captions", "question"),
    ("tools", "utility_descriptions"): (),
    ("tools", "refer_object_choice"): ("expression", "objects"), ("tools", "refer_descriptions"): (),
}


def _shipped() -> list[tuple[str, str]]:
    return [(package.removeprefix("vidagent."), name) for package in prompt_packages() for name in prompts(package)]


def test_every_shipped_prompt_is_listed_with_the_values_its_code_passes():
    assert sorted(_shipped()) == sorted(PLACEHOLDERS)


@pytest.mark.parametrize("package, name", sorted(PLACEHOLDERS))
def test_every_shipped_prompt_renders_with_its_values(package, name):
    shipped = prompt(f"vidagent.{package}", name)
    values = {key: f"<{key} value>" for key in PLACEHOLDERS[(package, name)]}
    text = shipped.render(**values)
    assert all(value in text for value in values.values())
    assert not re.search(r"\{[A-Za-z_][A-Za-z0-9_]*\}", text)  # no placeholder left, none mistyped
    if shipped.max_tokens is not None:
        assert shipped.text.strip() or name == "react_step"  # a reply's contract; react_step has no text of its own
        assert shipped.budget >= 1 and all(shipped.stop)


def test_rendering_is_strict_about_missing_and_unused_values():
    with pytest.raises(PromptError, match="no value for options"):
        render("Q: {question}\n{options}", question="why?")
    with pytest.raises(PromptError, match="answer not in the template"):
        render("Q: {question}", question="why?", answer="because")
    with pytest.raises(PromptError, match="prompt force_final: no value for answer_format"):
        prompt("vidagent.agent", "force_final").render()
    assert issubclass(PromptError, VidagentError)


def test_a_value_holding_a_placeholder_is_not_substituted_again():
    assert render("Q: {question}\n{options}", question="what is {options}?", options="A") == "Q: what is {options}?\nA"
    assert render("{a}{b}", a="{b}", b="{a}") == "{b}{a}"
    assert render("{x} {x}", x=3) == "3 3"


def test_other_braces_stay_and_double_braces_escape_a_placeholder():
    template = 'Reply as JSON: {"answer": "..."} for {question}; {why?} {} and {{question}} stay'
    assert Prompt("t", template).placeholders == {"question"}
    assert render(template, question="why?") == 'Reply as JSON: {"answer": "..."} for why?; {why?} {} and {question} stay'
    assert render("no placeholders {{x}}") == "no placeholders {x}"


def test_a_fragment_has_no_budget():
    with pytest.raises(PromptError, match="fragment"):
        _ = prompt("vidagent.agent", "answer_format_text").budget
    with pytest.raises(PromptError, match="has no prompt nothing_here"):
        prompt("vidagent.agent", "nothing_here")


def test_a_shipped_prompt_renders_a_value_with_braces_as_it_is():
    text = prompt("vidagent.tools", "sql_retry").render(error="no such table: {rows}")
    assert "no such table: {rows}" in text and "{error}" not in text
    assert load_prompt("vidagent.tools", "sql_retry") == prompt("vidagent.tools", "sql_retry").text


def test_contracts_sit_beside_their_templates():
    step = prompt("vidagent.agent", "react_step")
    assert step.max_tokens == 200 and "Observation:" in step.stop
    assert prompt("vidagent.tools", "sql_request").stop == ("\n\n\n", "Question:")


def _package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, files: dict[str, str]) -> str:
    folder = tmp_path / name / "prompts"
    folder.mkdir(parents=True)
    (tmp_path / name / "__init__.py").write_text("", encoding="utf-8")
    for file, text in files.items():
        (folder / file).write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_a_prompt_file_is_read_with_its_contract(tmp_path, monkeypatch):
    package = _package(tmp_path, monkeypatch, "prompt_pack_ok", {"family.toml": (
        "[ask]\nmax_tokens = 12\nstop = [\"\\n\\n\"]\ntext = '''\nAsk {question}\n'''\n\n"
        "[note]\ntext = 'a fragment'\n")})
    loaded = prompts(package)
    assert loaded["ask"] == Prompt("ask", "Ask {question}\n", 12, ("\n\n",))
    assert loaded["note"].max_tokens is None and loaded["note"].stop == ()


@pytest.mark.parametrize("files, message", [
    ({"a.toml": "[x]\ntext = 'a'\n", "b.toml": "[x]\ntext = 'b'\n"}, "defined twice"),
    ({"a.toml": "[x]\nmax_tokens = 3\n"}, "needs text"),
    ({"a.toml": "[x]\ntext = 'a'\nbudget = 3\n"}, "not budget"),
    ({"a.toml": "[x]\ntext = 'a'\nmax_tokens = 0\n"}, "positive integer"),
    ({"a.toml": "[x]\ntext = 'a'\nstop = 'no'\n"}, "list of non-empty strings"),
    ({"a.toml": "[x\ntext = 'a'\n"}, "not valid TOML"),
])
def test_a_malformed_prompt_file_is_refused(tmp_path, monkeypatch, files, message):
    package = _package(tmp_path, monkeypatch, f"prompt_pack_bad_{abs(hash(message))}", files)
    with pytest.raises(PromptError, match=message):
        prompts(package)
    sys.modules.pop(package, None)


def test_the_prompts_digest_is_stable():
    digest = prompts_digest()
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    prompts_digest.cache_clear()
    assert prompts_digest() == digest
