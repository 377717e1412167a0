"""Support for the server tests: a private copy of the test library, a scripted chat model that answers
each question by the tag in it, and a server over them on a loopback port."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import time
from dataclasses import replace
from pathlib import Path
from typing import Iterator, Sequence

from vidagent.config import Settings
from vidagent.llm.base import Message
from vidagent.perception.suite import Perception
from vidagent.server.app import create_app
from vidagent.server.config import ServeConfig
from vidagent.server.run import BackgroundServer
from vidagent.server.service import VideoService
from vidagent.session import Session

from fakes import ScriptedLLM

TAG = re.compile(r"\[(q\d+|slow|loop)\]")
SELECTION = "Does answering it need the space-dominant memory?"
CHECK_SUPPORT = "Which numbered lines above show that this answer is right?"
CHECK_OPTION = "Reply with the number of the correct option only."


def copy_home(source_home: Path, target_home: Path) -> Path:
    """A new vidagent home holding a copy of ``source_home``'s library (the shared one stays untouched)."""
    target_home.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(source_home / "library.sqlite") as source, \
            sqlite3.connect(target_home / "library.sqlite") as target:
        source.backup(target)
    return target_home


def tagged_reply(messages: Sequence[Message]) -> str:
    """Answers ``[qN]`` questions with "answer to qN" at once; a ``[slow]`` question keeps calling a tool,
    a third of a second per call (for a client that leaves mid-stream), a ``[loop]`` one too, at once (for a
    cap on calls); an untagged question takes one
    tool call, then answers "a guitar", each reply after a pause (so a page sees the steps arrive). The check
    finds the answer's option likeliest and its first re-read line supporting it."""
    text = "\n".join(message.content for message in messages)
    if SELECTION in messages[-1].content:
        return "no"
    if CHECK_SUPPORT in messages[-1].content:  # the check: the first line it re-reads shows the answer
        return "Supports: 1"
    if CHECK_OPTION in messages[-1].content:
        return "0"
    tag = TAG.search(text)
    if tag and tag.group(1) in ("slow", "loop"):
        if tag.group(1) == "slow":
            time.sleep(0.35)
        calls = text.count("Observation")
        return f"Thought: look again\nAction: segment_localization\nAction Input: a guitar drawing, take {calls}"
    if tag is None:
        time.sleep(0.4)
        if "Action: segment_localization" not in text:
            return "Thought: find where the drawing is clearest\nAction: segment_localization\nAction Input: a guitar"
        return "Thought: the tablet shows a guitar being drawn\nFinal Answer: a guitar"
    return f"Thought: the memory says so\nFinal Answer: answer to {tag.group(1)}"


def tagged_llm() -> ScriptedLLM:
    return ScriptedLLM([tagged_reply] * 10_000)


@contextlib.contextmanager
def running_server(home: Path, models: Path, folders: Sequence[Path], llm: ScriptedLLM | None,
                   local_model: str | None = None, perception: Perception | None = None,
                   **config: object) -> Iterator[tuple[BackgroundServer, VideoService]]:
    """A server (API, page and MCP) over ``home`` in a thread; ``llm`` None uses the real local model
    (``local_model``, or the default one); ``perception`` (the scripted one) replaces the real models. ``config``
    sets the ``ServeConfig``'s fields (``host``: a loopback address to listen on)."""
    settings = replace(Settings.from_env(), home=home, models=models)
    if perception is not None:  # the scripted home's stage configs: no extra perception sources
        settings = replace(settings, perception=frozenset())
    if local_model:
        settings = settings.with_llm(model=local_model)
    serve_config = ServeConfig(settings=settings, video_dirs=tuple(folders), **config)  # type: ignore[arg-type]
    session = Session(settings, llm=llm, perception=perception) if llm is not None or perception is not None else None
    service = VideoService(serve_config, session)
    try:  # on the configured loopback address (any of 127.0.0.0/8), stopping its questions first as `serve` does
        with BackgroundServer(create_app(service), serve_config.host,
                              before_shutdown=service.asks.cancel_all) as server:
            yield server, service
    finally:
        service.close()


def read_sse(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
    """(event name, data) pairs from the lines of a server-sent event stream."""
    name, data = "message", []
    for line in lines:
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield name, "\n".join(data)
            name, data = "message", []


CHROMIUM = Path("/usr/bin/chromium")  # Debian's (install.sh installs it)
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@contextlib.contextmanager
def chromium_page(url: str, width: int = 1440, height: int = 900) -> Iterator[tuple[object, list[str]]]:
    """The page at ``url`` in headless Debian chromium driven by Playwright, once it says it is ready, and the
    list the page's script errors are added to."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            problems: list[str] = []
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.goto(url)
            page.wait_for_selector("body[data-ready=true]")
            yield page, problems
        finally:
            browser.close()
