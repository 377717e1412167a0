"""Prompt templates: placeholders are filled once, other braces are left alone."""

from __future__ import annotations

from vidagent.prompts import load_prompt, render


def test_a_value_holding_a_placeholder_is_not_substituted_again():
    assert render("Q: {question}\n{options}", question="what is {options}?", options="A") == "Q: what is {options}?\nA"
    assert render("{a}{b}", a="{b}", b="{a}") == "{b}{a}"


def test_other_braces_and_unnamed_placeholders_stay():
    template = 'Reply as JSON: {"answer": "..."} for {question}; {unknown} and {{question}} too'
    assert render(template, question="why?") == 'Reply as JSON: {"answer": "..."} for why?; {unknown} and {why?} too'
    assert render("{x} {x}", x=3) == "3 3"
    assert render("no placeholders {x}") == "no placeholders {x}"


def test_a_shipped_prompt_renders():
    text = render(load_prompt("vidagent.tools", "sql_retry"), error="no such table: {rows}")
    assert "no such table: {rows}" in text and "{error}" not in text
