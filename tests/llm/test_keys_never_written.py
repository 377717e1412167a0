"""Issue 55: an API key and the credentials of an endpoint's address are written nowhere. A question is asked
through the real HTTP client against a chat server on loopback (tests/fault_llm.py) with a known key and an
address that carries a user and password; then every artefact is read: the home's files (library, caches),
the log at DEBUG, the answer with its trace, ``vidagent settings`` (text and JSON), the settings a run's
identity is made of, and the error of a question the server refuses."""

from __future__ import annotations

import json
import logging

import pytest

from vidagent.cli import main
from vidagent.errors import LLMError
from vidagent.session import Session

from fakes import scripted_perception
from fault_llm import Fault, FaultServer

KEY = "sk-known-key-9f8e7d6c5b4a"
PASSWORD = "hunter2-pass-word"
BASIC = "Ym9iOmh1bnRlcjItcGFzcy13b3Jk"  # base64 of bob:PASSWORD, as an HTTP client sends it
SECRETS = (KEY, PASSWORD, BASIC)


def _leaks(text: str | bytes) -> list[str]:
    raw = text if isinstance(text, bytes) else text.encode("utf-8", errors="replace")
    return [secret for secret in SECRETS if secret.encode() in raw]


def _with_credentials(base_url: str) -> str:
    return base_url.replace("http://", f"http://bob:{PASSWORD}@")


def test_a_question_through_an_endpoint_writes_the_key_nowhere(scripted, tmp_path, caplog, capsys, monkeypatch):
    choices = ["a guitar", "a car", "a house", "a cat", "a tree"]
    with FaultServer("Final Answer: a guitar", faults=[Fault("echo_key", code=500)]) as server:
        address = _with_credentials(server.base_url)
        settings = scripted.settings().with_overrides(base_url=address, api_key=KEY, model="fault")
        caplog.set_level(logging.DEBUG)
        with Session(settings, perception=scripted_perception()) as session:
            answer = session.ask(scripted.toy, "What is being drawn?", choices, planner="react")
        server.default = Fault("echo_key", code=401)
        with Session(settings, perception=scripted_perception()) as session:
            with pytest.raises(LLMError) as refused:  # another question: not in the reply cache
                session.ask(scripted.toy, "What does the hand hold?", choices, planner="react")
        assert server.requests and answer.choice_index == 0  # the replies came through the real client
    error = str(refused.value)
    assert "invalid key" in error and "***" in error  # the server echoed the key: hidden in what we say
    monkeypatch.setenv("VIDAGENT_LLM_BASE_URL", address)
    monkeypatch.setenv("VIDAGENT_LLM_API_KEY", KEY)
    monkeypatch.setenv("VIDAGENT_CAPTIONER", f"openai:some-vlm?base_url={address}")
    monkeypatch.setenv("VIDAGENT_CAPTIONER_API_KEY", KEY)
    assert main(["--home", str(scripted.home), "settings", "--json"]) == 0
    assert main(["--home", str(scripted.home), "settings"]) == 0
    said = capsys.readouterr()
    assert "***@127.0.0.1" in said.out and "(set)" in said.out  # the address shown, its credentials not
    from vidagent.config import Settings

    identity = json.dumps(Settings.from_env().answer_settings())
    artefacts = {"error": error, "log": caplog.text, "answer": json.dumps(answer.to_dict(), default=str),
                 "settings": said.out + said.err, "identity": identity}
    artefacts.update({str(path): path.read_bytes() for path in scripted.home.rglob("*") if path.is_file()})
    leaked = {name: _leaks(text) for name, text in artefacts.items() if _leaks(text)}
    assert not leaked
    assert len(artefacts) > 5
