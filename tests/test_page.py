"""The web page in a real headless browser (Debian's chromium driven by Playwright's Python package) against
a real server over the real memory: load, pick a video, seek from the timeline, build the memory with its
progress, ask, see the steps arrive before the answer, click evidence and see the player seek. The
screenshot is kept in the test's folder (and in $VIDAGENT_PAGE_SCREENSHOT when set: docs/serve.png)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest

from conftest import TEMPORAL_TOY, video_path
from serve_helpers import copy_home, running_server, tagged_llm

CHROMIUM = Path("/usr/bin/chromium")
UNREGISTERED = "github_LLaMA-Factory/1.mp4"  # in the served folder, not in the library yet
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (install.sh does)")


def test_pick_build_ask_watch_the_steps_and_seek_to_evidence(temporal_library, models_dir, tmp_path):
    home = copy_home(temporal_library, tmp_path / "home")
    with running_server(home, models_dir, [video_path(TEMPORAL_TOY).parent], tagged_llm()) as (server, _):
        with httpx.Client(base_url=server.url) as client:
            toy = client.post("/api/videos", json={"path": str(video_path(TEMPORAL_TOY))}).json()["video_id"]
        with playwright.sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            try:
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                problems: list[str] = []
                page.on("pageerror", lambda error: problems.append(str(error)))
                page.goto(server.url + "/")
                page.wait_for_selector("body[data-ready=true]")
                assert page.locator("#video-list li").count() == 2  # the two clips of the library
                page.click(f"#file-list li[data-path='{video_path(UNREGISTERED)}']")  # a file in the folder: added
                page.wait_for_function("document.querySelectorAll('#video-list li').length === 3")
                page.wait_for_selector("#video-title:text('1.mp4')")
                page.wait_for_selector(f"#file-list li[data-path='{video_path(UNREGISTERED)}']", state="detached")

                page.click(f"#video-list li[data-video-id='{toy}']")
                page.wait_for_selector(".lane-track[data-lane=segments] .block")
                assert page.locator(".lane-track[data-lane=segments] .block").count() == 3
                page.wait_for_function("document.querySelector('#player').readyState >= 1")  # the file plays
                page.locator(".lane-track[data-lane=segments] .block").nth(2).click()  # the timeline seeks
                page.wait_for_function("Math.abs(document.querySelector('#player').currentTime - 4.0) < 0.1")
                assert "Segment 2" in page.inner_text("#segment-detail")

                page.click("#index-button")  # the objects stage is missing: build it, watching the progress
                page.wait_for_selector("#index-progress:not([hidden])")
                page.wait_for_selector(".stage.built:text-is('objects')", timeout=90_000)
                page.wait_for_selector(".lane-track[data-lane^=object-] .block")

                page.fill("#question", "What is being drawn on the tablet?")
                for choice in ("a guitar", "a car", "a house"):
                    page.click("#add-choice")
                    page.locator(".choice input").last.fill(choice)
                page.select_option("#planner", "react")
                page.click("#ask-button")
                # steps arrive while the planner is still working: an observation is shown, the answer is not yet
                page.wait_for_function("document.querySelector('.step[data-type=observation]') !== null"
                                       " && document.querySelector('#answer').hidden"
                                       " && document.querySelector('#ask-button').textContent === 'Stop'")
                page.wait_for_selector("#answer:not([hidden])", timeout=60_000)
                answer = page.inner_text("#answer-text")
                assert answer.startswith("A.") and "a guitar" in answer
                kinds = page.eval_on_selector_all(".step", "nodes => nodes.map(n => n.dataset.type)")
                assert kinds[0] == "task" and kinds[-1] == "final_answer" and "tool_call" in kinds
                page.wait_for_function("[...document.querySelectorAll('.evidence-item img')].length > 0 && "
                                       "[...document.querySelectorAll('.evidence-item img')]"
                                       ".every(i => i.complete && i.naturalWidth > 0)")

                evidence = page.locator(".evidence-item").last
                start = float(evidence.get_attribute("data-start"))
                page.evaluate("document.querySelector('#player').currentTime = 0")  # the player elsewhere first
                evidence.click()
                page.wait_for_function(f"Math.abs(document.querySelector('#player').currentTime - {start}) < 0.15")
                assert page.locator(".band").count() > 0  # the evidence is marked on the timeline
                assert not problems, problems

                shot = tmp_path / "serve.png"
                page.screenshot(path=str(shot))
                assert shot.stat().st_size > 20_000
                if os.environ.get("VIDAGENT_PAGE_SCREENSHOT"):
                    shutil.copyfile(shot, os.environ["VIDAGENT_PAGE_SCREENSHOT"])
            finally:
                browser.close()
