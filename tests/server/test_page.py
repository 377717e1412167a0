"""The web page in a real headless browser (Debian's chromium driven by Playwright's Python package) against
a real server over the real memory: load, pick a video, seek from the timeline, build the memory with its
progress, ask, see the steps arrive before the answer, click evidence and see the player seek. The
screenshot is kept in the test's folder (and in $VIDAGENT_PAGE_SCREENSHOT when set; the README's docs/serve.png is a
real, uncached answer made by bench/page_screenshot.py)."""

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

                page.evaluate("window.barTexts = []; new MutationObserver(() => window.barTexts.push("
                              "document.querySelector('.progress-text').textContent)).observe("
                              "document.querySelector('.progress-text'), {childList: true, characterData: true,"
                              " subtree: true})")
                page.click("#index-button")  # the objects stage is missing: build it, watching the progress
                page.wait_for_selector("#index-progress:not([hidden])")
                page.wait_for_selector(".stage.built:text-is('objects')", timeout=90_000)
                texts = page.evaluate("window.barTexts")  # the bar moved frame by frame, not only by stage
                assert any(": frame " in text for text in texts), texts
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
                assert page.locator(".evidence-item .verdict").count() == 0  # not checked: nothing marked

                page.check("#check")  # ask again with the check: what the answer rests on is marked, first
                page.click("#ask-button")
                page.wait_for_selector(".evidence-item.supports", timeout=60_000)
                assert "✓ supports the answer" in page.locator(".evidence-item").first.inner_text()
                assert page.locator(".evidence-item.supports").count() == 1
                assert "abstained" not in page.inner_text("#usage")  # supported: no abstention shown
                assert not problems, problems

                shot = tmp_path / "serve.png"
                page.screenshot(path=str(shot))
                assert shot.stat().st_size > 20_000
                if os.environ.get("VIDAGENT_PAGE_SCREENSHOT"):
                    shutil.copyfile(shot, os.environ["VIDAGENT_PAGE_SCREENSHOT"])
            finally:
                browser.close()


def test_first_hour_on_a_phone_and_a_laptop_switching_videos(temporal_library, models_dir, tmp_path):
    """Issue 27 in the browser: a whitespace question is answered with a notice; a running clock while the
    model works; the answer above the fold at 1440x900 and its option by letter in the steps; evidence cards
    without the describer's label; switching videos clears the last one's reasoning and answer; a long
    file name stays inside its panel; a video is removed with its memory from the page; no sideways scroll at
    390 px; /docs works with no network."""
    home = copy_home(temporal_library, tmp_path / "home")
    long_folder = tmp_path / "long"
    long_folder.mkdir()
    long_name = "a_very_long_recording_name_from_a_phone_camera_" * 3 + "take_2.mp4"
    shutil.copyfile(video_path(UNREGISTERED), long_folder / long_name)
    with running_server(home, models_dir, [video_path(TEMPORAL_TOY).parent, long_folder], tagged_llm()) as (server, _):
        with httpx.Client(base_url=server.url) as client:
            toy = client.post("/api/videos", json={"path": str(video_path(TEMPORAL_TOY))}).json()["video_id"]
            other = client.post("/api/videos", json={"path": str(video_path("github_LLaMA-Factory/3.mp4"))}).json()
            long_id = client.post("/api/videos", json={"path": str(long_folder / long_name)}).json()["video_id"]
        with playwright.sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            try:
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                problems: list[str] = []
                page.on("pageerror", lambda error: problems.append(str(error)))
                page.goto(server.url + "/")
                page.wait_for_selector("body[data-ready=true]")
                page.click(f"#video-list li[data-video-id='{toy}']")
                page.wait_for_selector(".lane-track[data-lane=segments] .block")
                assert page.locator(".stage[title]").count() == 4 and page.locator(".legend").is_visible()
                page.locator(".lane-track[data-lane=segments] .block").first.click()
                detail = page.inner_text("#segment-detail")
                assert detail.startswith("Segment 0") and "not a caption]" not in detail, detail

                page.fill("#question", "   ")
                page.click("#ask-button")
                page.wait_for_selector("#notice:not([hidden]):text('Type a question first')")

                page.fill("#question", "What is being drawn on the tablet?")
                for choice in ("a guitar", "a car", "a house"):
                    page.click("#add-choice")
                    page.locator(".choice input").last.fill(choice)
                page.click("#ask-button")
                page.wait_for_selector("#ask-status.busy")
                first = page.inner_text("#ask-status")
                page.wait_for_function(f"document.querySelector('#ask-status').textContent !== {first!r}"
                                       " && document.querySelector('#answer').hidden")  # the clock runs
                assert first.endswith(" s")
                page.wait_for_selector("#answer:not([hidden])", timeout=60_000)
                assert page.locator("#ask-status.busy").count() == 0
                assert page.locator("#answer").bounding_box()["y"] < 900  # above the fold
                final = page.locator(".step[data-type=final_answer] .text").last.inner_text()
                assert final.startswith("A. a guitar"), final
                cards = page.locator(".evidence-item .what").all_inner_texts()
                assert cards and not any(card.startswith("[") for card in cards), cards

                page.click(f"#video-list li[data-video-id='{other['video_id']}']")  # another video: a clean slate
                page.wait_for_selector("#video-title:text('3.mp4')")
                assert page.locator("#trace .step").count() == 0 and page.locator("#answer").is_hidden()
                assert page.locator("#notice").is_hidden() and page.locator(".band").count() == 0

                dialogs: list[str] = []
                page.once("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.accept()))
                page.click("#remove-button")  # removed with its memory; the folder's file is listed again
                page.wait_for_selector(f"#video-list li[data-video-id='{other['video_id']}']", state="detached")
                page.wait_for_selector(f"#file-list li[data-path='{video_path('github_LLaMA-Factory/3.mp4')}']")
                page.wait_for_selector("#notice:text('removed 3.mp4')")
                assert dialogs and "The file stays in its folder" in dialogs[0]
                assert page.locator("#remove-button").is_disabled() and page.locator("#trace .step").count() == 0
                with httpx.Client(base_url=server.url) as client:
                    assert client.get(f"/api/videos/{other['video_id']}").status_code == 404

                page.click(f"#video-list li[data-video-id='{long_id}']")
                page.wait_for_selector("#video-title:text('take_2.mp4')")
                inside = "(() => { const b = document.querySelector('#index-button').getBoundingClientRect();" \
                         " const p = document.querySelector('.timeline-panel').getBoundingClientRect();" \
                         " return b.right <= p.right + 1 && b.left >= p.left - 1; })()"
                assert page.evaluate(inside)

                # a search tree as the server streams it: the root's two branches are labelled apart
                page.evaluate("""() => {
                    const t0 = performance.now();
                    const step = (id, parent_id, type, display) => onAskEvent("step", {id, parent_id, type, display,
                        summary: display, seconds: 0, prompt_tokens: 0, completion_tokens: 0}, t0);
                    step(0, null, "task", "Which is it?"); step(1, 0, "tool_call", "caption_retrieval(0, 2)");
                    step(2, 1, "observation", "Segment 0: a dog"); step(3, 2, "tool_call", "count(dogs)");
                    step(4, 2, "tool_call", "when(the jump)"); step(5, 3, "final_answer", "A. a ball");
                }""")
                labels = page.locator(".branch-label").all_inner_texts()
                assert [label.lower() for label in labels] == ["branch 1 of 2", "branch 2 of 2"], labels

                page.set_viewport_size({"width": 390, "height": 844})
                page.reload()
                page.wait_for_selector("body[data-ready=true]")
                page.click(f"#video-list li[data-video-id='{long_id}']")
                page.wait_for_selector("#video-title:text('take_2.mp4')")
                assert page.evaluate("document.documentElement.scrollWidth") <= 390
                assert page.evaluate(inside)
                page.screenshot(path=str(tmp_path / "phone.png"), full_page=True)
                assert not problems, problems

                offline = browser.new_page()  # /docs from the package alone: every other address is cut off
                offline.route("**/*", lambda route: route.continue_() if route.request.url.startswith(server.url)
                              else route.abort())
                offline.goto(server.url + "/docs")
                offline.wait_for_selector("body[data-ready=true]")
                assert offline.locator(".operation[data-path='/api/ask'][data-method=post]").count() == 1
                assert offline.locator(".operation").count() >= 10
            finally:
                browser.close()
