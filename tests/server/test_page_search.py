"""The page's library search in a real headless browser (Debian's chromium through Playwright) against a real
server over the scripted home: a query lists moments as thumbnails, a click opens the video at the moment."""

from __future__ import annotations

import httpx
import pytest

from fakes import scripted_perception
from serve_helpers import CHROMIUM, chromium_page, copy_home, running_server, tagged_llm

pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (install.sh does)")


def test_search_box_lists_moments_and_a_click_seeks_the_player(scripted, tmp_path):
    home = copy_home(scripted.home, tmp_path / "home")
    with running_server(home, home / "models", [scripted.toy.parent], tagged_llm(),
                        perception=scripted_perception()) as (server, _):
        with httpx.Client(base_url=server.url) as client:
            for path in (scripted.toy, scripted.text):
                assert client.post("/api/videos", json={"path": str(path)}).status_code == 201
        with chromium_page(server.url + "/") as (page, problems):
            page.fill("#search-query", "time to sleep")
            page.click("#search-button")
            page.wait_for_selector("#search-results .search-hit")
            first = page.locator("#search-results .search-hit").first
            assert "text.mp4" in first.inner_text() and "speech" in first.inner_text()
            page.wait_for_function("[...document.querySelectorAll('.search-hit img')].length > 0 && "
                                   "[...document.querySelectorAll('.search-hit img')]"
                                   ".every(i => i.complete && i.naturalWidth > 0)")  # real thumbnails
            first.click()
            page.wait_for_selector("#video-title:text('text.mp4')")
            page.wait_for_function("document.querySelector('#player').readyState >= 1")
            page.wait_for_function("Math.abs(document.querySelector('#player').currentTime - 4.0) < 0.2")
            page.fill("#search-query", "giraffe zebra")
            page.click("#search-button")
            page.wait_for_selector("#search-status:text('Nothing found.')")
            assert page.locator("#search-results").is_hidden()
            assert not problems, problems
