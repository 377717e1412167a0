"""The README's screenshot of the page: a real, uncached answer by the local model, in headless Chromium.

    .venv/bin/python bench/page_screenshot.py [--video PATH] [--out docs/serve.png] [--home DIR]

Starts a server in this process over a scratch home (the real perception models and the local LLM, the
LLM's response cache off), builds the video's memory from the page's button, asks a multiple-choice
question from the page, waits for the answer and saves a screenshot of the whole page at 1440 px wide. It prints how long the
build and the answer took, which is what the README says to expect on this machine.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

from vidagent.config import Settings
from vidagent.server.app import create_app
from vidagent.server.config import ServeConfig
from vidagent.server.run import BackgroundServer
from vidagent.server.service import VideoService

VIDEOS = Path(__file__).resolve().parents[2] / "shared" / "data" / "videos"
DEFAULT_VIDEO = VIDEOS / "github_sam2" / "01_dog.mp4"
QUESTION = "What does the woman throw for the dog?"
CHOICES = ["a stick", "a ball", "a frisbee", "a shoe", "nothing"]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--video", type=Path, default=DEFAULT_VIDEO)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "serve.png")
    parser.add_argument("--home", type=Path, help="vidagent home (default: a scratch folder)")
    args = parser.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="vidagent-shot-"))
    defaults = Settings.from_env()
    settings = replace(defaults, home=home, models=defaults.models_dir).with_overrides(cache=False)
    video = args.video.resolve()
    service = VideoService(ServeConfig(settings=settings, video_dirs=(video.parent,)))
    try:
        with BackgroundServer(create_app(service)) as server, sync_playwright() as driver:
            with httpx.Client(base_url=server.url, timeout=60) as client:
                video_id = client.post("/api/videos", json={"path": str(video)}).json()["video_id"]
            browser = driver.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.goto(server.url + "/")
            page.wait_for_selector("body[data-ready=true]")
            page.click(f"#video-list li[data-video-id='{video_id}']")
            started = time.perf_counter()
            page.click("#index-button")
            page.wait_for_selector("#index-button:text('Memory built')", timeout=900_000)
            built = time.perf_counter() - started
            page.fill("#question", QUESTION)
            for choice in CHOICES:
                page.click("#add-choice")
                page.locator(".choice input").last.fill(choice)
            started = time.perf_counter()
            page.click("#ask-button")
            page.wait_for_selector("#answer:not([hidden])", timeout=900_000)
            answered = time.perf_counter() - started
            page.wait_for_function("[...document.querySelectorAll('.evidence-item img')].every(i => i.complete)")
            page.locator(".evidence-item").first.click()
            page.wait_for_timeout(500)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.out), full_page=True)  # the reasoning below the answer too
            print(f"memory built in {built:.1f} s; answered in {answered:.1f} s: {page.inner_text('#answer-text')!r}; "
                  f"{page.inner_text('#usage')}; screenshot: {args.out}")
            browser.close()
    finally:
        service.close()


if __name__ == "__main__":
    main()
