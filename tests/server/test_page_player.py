"""The page in a real browser (Debian's chromium driven by Playwright) over clips made here with PyAV (issue 42):
an MPEG-4 Part 2 clip, which Chromium does not play, plays through the copy the server makes (its progress shown
over the player meanwhile); a file the browser fails on although it looked playable is copied on the page's
request; a damaged one says why nothing plays; the files in the folders are grouped by folder and filtered; at
390 px the player comes before the list. Scripted perception and chat model: no models, no shared clips."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest

from vidagent.server import proxies
from vidagent.video.proxy import Playability

from fakes import ScriptedLLM, scripted_perception
from serve_helpers import CHROMIUM, chromium_page, running_server
from unplayable_clips import damaged_clip, h264_clip, mpeg4_clip

pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (install.sh does)")
# the player shows a picture: enough data for the current frame, a picture size, no error
SHOWS_A_PICTURE = ("(() => { const p = document.querySelector('#player'); "
                   "return p.readyState >= 2 && p.videoWidth > 0 && p.error === null; })()")


def serve(home: Path, folder: Path):
    return running_server(home, home / "models", [folder], ScriptedLLM([]), perception=scripted_perception())


def add(server_url: str, *paths: Path) -> list[str]:
    with httpx.Client(base_url=server_url, timeout=30) as client:
        return [client.post("/api/videos", json={"path": str(path)}).json()["video_id"] for path in paths]


def test_the_page_plays_clips_chromium_does_not_and_says_why_a_damaged_one_does_not(tmp_path, monkeypatch):
    folder = tmp_path / "clips"
    example = mpeg4_clip(folder / "example1.mp4", seconds=3.0, audio=True)
    looks_fine = mpeg4_clip(folder / "looks_fine.mp4", seconds=3.0, shift=3)
    damaged = damaged_clip(folder / "damaged.mp4")
    gate = threading.Event()
    real_make, real_check = proxies.make_proxy, proxies.playability

    def make(video, target, form, *, progress=None, **options):  # example1's held half way until the page shows it
        if video.path.name == "example1.mp4":
            progress(0.5)
            assert gate.wait(60)
        return real_make(video, target, form, progress=progress, **options)

    def check(path):  # as if the server took this file for one that plays: the browser finds otherwise
        return Playability(True, "looks fine") if Path(path).name == "looks_fine.mp4" else real_check(path)

    monkeypatch.setattr(proxies, "make_proxy", make)
    monkeypatch.setattr(proxies, "playability", check)
    with serve(tmp_path / "home", folder) as (server, _):
        example_id, fine_id, damaged_id = add(server.url, example, looks_fine, damaged)
        with chromium_page(server.url + "/") as (page, problems):
            page.click(f"#video-list li[data-video-id='{example_id}']")
            page.wait_for_selector("#player-status[data-state=making]:has-text('50 %')")
            assert "MPEG-4 Part 2" in page.inner_text("#player-status")
            assert page.locator("#player-status .progress-fill").get_attribute("style") == "width: 50%;"
            gate.set()
            page.wait_for_function(SHOWS_A_PICTURE, timeout=60_000)
            assert page.get_attribute("#player", "src") == f"/api/videos/{example_id}/file"
            assert page.is_hidden("#player-status")
            page.evaluate("async () => { const p = document.querySelector('#player'); p.muted = true; await p.play(); }")
            page.wait_for_function("document.querySelector('#player').currentTime > 0.5")
            assert page.evaluate("document.querySelector('#player').error") is None

            page.click(f"#video-list li[data-video-id='{fine_id}']")  # served as it is, the player fails: a copy
            page.wait_for_function(SHOWS_A_PICTURE, timeout=60_000)
            assert page.get_attribute("#player", "src") == f"/api/videos/{fine_id}/file?proxy=true"

            page.click(f"#video-list li[data-video-id='{damaged_id}']")
            page.wait_for_selector("#player-status[data-state=failed]", timeout=60_000)
            said = page.inner_text("#player-status")
            assert "no playable copy of damaged.mp4 can be made: the video data is damaged" in said, said
            link = page.locator("#player-status a.file-link")
            assert link.get_attribute("href") == f"/api/videos/{damaged_id}/file?original=true"
            assert page.get_attribute("#player", "src") is None
            assert page.is_hidden("#notice") and not problems, problems

            page.click(f"#video-list li[data-video-id='{example_id}']")  # back again: the copy made plays at once
            page.wait_for_function(SHOWS_A_PICTURE, timeout=20_000)
            assert page.is_hidden("#player-status") and not problems, problems


def test_the_folder_list_groups_by_folder_and_filters_and_a_phone_shows_the_player_first(tmp_path):
    root = tmp_path / "served"
    clips = {name: h264_clip(root / name, shift=shift) for shift, name in enumerate(
        ["uploaded/test.mp4", "mmaction2/test.mp4", "LLaMA-Factory/4.mp4", "top.mp4", "picked.mp4"])}
    with serve(tmp_path / "home", root) as (server, _):
        add(server.url, clips["picked.mp4"])
        with chromium_page(server.url + "/") as (page, problems):
            assert page.locator(".library").bounding_box()["x"] < page.locator(".player-wrap").bounding_box()["x"]
            folders = page.locator("#file-list details.folder .folder-name").all_inner_texts()
            assert folders == ["served", "served/LLaMA-Factory", "served/mmaction2", "served/uploaded"]
            for name in ("uploaded/test.mp4", "mmaction2/test.mp4"):  # two test.mp4, each under its own folder
                group = page.locator(f"#file-list details.folder[data-folder='{clips[name].parent}']")
                assert group.locator("li .name").all_inner_texts() == ["test.mp4"]
                assert group.locator(f"li[data-path='{clips[name]}']").is_visible()

            def shown() -> list[str]:
                return [item.get_attribute("data-path") for item in page.locator("#file-list li").all() if item.is_visible()]

            page.fill("#file-filter", "mmaction")
            assert shown() == [str(clips["mmaction2/test.mp4"])]
            page.fill("#file-filter", "TEST.mp4")  # any case; only the folders that hold a match are shown
            assert page.locator("#file-list details.folder").count() == 2 and len(shown()) == 2
            page.fill("#file-filter", "served/top")
            assert shown() == [str(clips["top.mp4"])]
            page.fill("#file-filter", "no such clip")
            assert shown() == [] and page.is_visible("#file-none")
            page.fill("#file-filter", "")
            assert len(shown()) == 4 and page.is_hidden("#file-none")

            uploaded = f"#file-list details.folder[data-folder='{clips['uploaded/test.mp4'].parent}']"
            page.click(f"{uploaded} summary")  # collapsed: its files are hidden, the others stay
            assert len(shown()) == 3 and page.locator(f"{uploaded} li").is_hidden()

            page.click(f"#file-list li[data-path='{clips['mmaction2/test.mp4']}']")  # added from its folder
            page.wait_for_selector("#video-title:text('test.mp4')")
            page.wait_for_selector(f"#file-list details.folder[data-folder='{clips['mmaction2/test.mp4'].parent}']",
                                   state="detached")
            assert page.locator(f"{uploaded} li").is_hidden()  # still collapsed after the list was drawn again
            page.wait_for_function(SHOWS_A_PICTURE, timeout=20_000)

            page.set_viewport_size({"width": 390, "height": 844})
            page.reload()
            page.wait_for_selector("body[data-ready=true]")
            player = page.locator(".player-wrap").bounding_box()
            videos = page.locator(".library").bounding_box()
            asking = page.locator(".think").bounding_box()
            assert player["y"] + player["height"] <= videos["y"] and videos["y"] + videos["height"] <= asking["y"]
            assert player["y"] < 200  # right under the bar: the first thing on the screen
            assert page.evaluate("document.documentElement.scrollWidth") <= 390
            page.screenshot(path=str(tmp_path / "phone.png"), full_page=True)
            assert not problems, problems
