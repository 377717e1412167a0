"""refer_object's server faces (issue 25, item 4) over the generated shapes clip (``fakes.shapes``) and the
scripted perception: the HTTP endpoint and the files it links, the MCP tool at the server's /mcp, and the
page in a real browser (Debian's chromium driven by Playwright) drawing the object's mask over the player."""

from __future__ import annotations

import asyncio
import io
import json
import zipfile
from pathlib import Path

import av
import httpx
import numpy as np
import pytest
import supervision as sv

from vidagent.perception.masks import mask_from_json

from fakes import ScriptedLLM, scripted_perception
from fakes.shapes import BLACK_DOG, BLUE_CUP, SCENES, SIZE, WHITE_DOG, build_shapes_home, truth
from serve_helpers import CHROMIUM, chromium_page, running_server



@pytest.fixture(scope="module")
def shapes_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("refer-faces") / "home"
    path, clip = build_shapes_home(home)
    return home, path, clip


def serve(shapes_home, replies=()):
    home, path, clip = shapes_home
    return running_server(home, home / "models", [path.parent], ScriptedLLM(list(replies)),
                          perception=scripted_perception(clip))


def test_the_refer_endpoint_answers_with_masks_and_links_to_its_files(shapes_home):
    home, path, clip = shapes_home
    with serve(shapes_home) as (server, _), httpx.Client(base_url=server.url, timeout=60) as client:
        video_id = client.post("/api/videos", json={"path": str(path)}).json()["video_id"]
        found = client.get(f"/api/videos/{video_id}/refer", params={"expression": "the second cup from the left"})
        assert found.status_code == 200, found.text
        body = found.json()
        assert (body["object_id"], body["category"], body["how"]) == (BLUE_CUP, "cup", "parser")
        assert len(body["frames"]) == SCENES and body["evidence"][0]["source"] == video_id
        for frame in body["frames"]:  # the page's counts and the manifest's COCO object are one mask
            width, height = SIZE
            counts = np.asarray(sv.rle_to_mask(frame["counts"], (width, height)), bool)
            assert np.array_equal(counts, mask_from_json(frame["rle"]))
            assert (counts & truth(clip, BLUE_CUP, frame["time_s"])).sum() > 0.9 * counts.sum()

        archive = zipfile.ZipFile(io.BytesIO(client.get(body["links"]["masks"]).content))
        name = body["links"]["masks"].rsplit("/", 1)[-1]
        assert {n for n in archive.namelist() if not n.endswith(".png")} == {f"{name}/masks.json", f"{name}/overlay.mp4"}
        assert sum(n.endswith(".png") for n in archive.namelist()) == SCENES
        overlay = client.get(body["links"]["overlay"])
        assert overlay.headers["content-type"] == "video/mp4"
        with av.open(io.BytesIO(overlay.content)) as container:
            assert sum(1 for _ in container.decode(video=0)) == 40
        assert client.get(body["links"]["manifest"]).json()["object_id"] == BLUE_CUP

        missing = client.get(f"/api/videos/{video_id}/refer", params={"expression": "the giraffe"})
        assert missing.status_code == 422 and missing.json()["message"].startswith("no giraffe in this video's")
        assert client.get(f"/api/videos/{video_id}/refer", params={"expression": ""}).status_code == 422
        assert client.get(f"/api/artifacts/{name}/secret.txt").status_code == 404
        assert client.get(f"/api/artifacts/{name}/..%2F..%2Flibrary.db").status_code == 404


def test_the_mcp_tool_segments_an_object(shapes_home):
    from mcp import Client

    home, path, clip = shapes_home

    async def session(url: str) -> dict:
        async with Client(f"{url}/mcp", read_timeout_seconds=60) as client:
            result = await client.call_tool("segment_object", {"video": str(path), "expression": "the black dog"})
            assert not result.is_error, result.content
            refused = await client.call_tool("segment_object", {"video": str(path), "expression": "the zebra"})
            assert refused.is_error and "no zebra" in refused.content[0].text
            return result.structured_content

    with serve(shapes_home) as (server, _):
        found = asyncio.run(asyncio.wait_for(session(server.url), timeout=120))
    assert found["object_id"] == BLACK_DOG and found["how"] == "parser" and len(found["frames"]) == SCENES
    assert all(Path(frame["file"]).is_file() and "rle" not in frame for frame in found["frames"])
    assert Path(found["overlay"]).is_file() and json.loads(Path(found["manifest"]).read_text())["object_id"] == BLACK_DOG


def page_model(messages) -> str:
    """The chat model of the page test: it names no object when refer_object asks it, and a question is
    answered by calling refer_object."""
    text = "\n".join(message.content for message in messages)
    if "Which one object does" in text:
        return "none"
    if "Action: refer_object" not in text:
        return "Thought: find the dog\nAction: refer_object\nAction Input: the black dog"
    return "Thought: found\nFinal Answer: the black dog is object 3"


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (install.sh does)")
def test_the_page_draws_the_referred_objects_mask_over_the_player(shapes_home, tmp_path):
    pytest.importorskip("playwright.sync_api")
    home, path, clip = shapes_home
    with serve(shapes_home, [page_model] * 8) as (server, _):
        with httpx.Client(base_url=server.url) as client:
            video_id = client.post("/api/videos", json={"path": str(path)}).json()["video_id"]
        with chromium_page(server.url + "/") as (page, problems):
            page.click(f"#video-list li[data-video-id='{video_id}']")
            page.wait_for_function("document.querySelector('#player').readyState >= 1")
            assert page.is_hidden("#mask-overlay")

            page.fill("#refer-expression", "the dog on the right")
            page.click("#refer-button")
            page.wait_for_selector("#mask-overlay:not([hidden])")
            assert f"object {WHITE_DOG} (dog)" in page.inner_text("#refer-result")
            assert "found by the parser" in page.inner_text("#refer-result")
            # the canvas lies on the picture: the player is wider than the 4:3 video, so it is centred
            canvas = page.locator("#mask-overlay").bounding_box()
            player = page.locator("#player").bounding_box()
            assert abs(canvas["height"] / canvas["width"] - SIZE[1] / SIZE[0]) < 0.02
            assert abs((canvas["x"] + canvas["width"] / 2) - (player["x"] + player["width"] / 2)) < 2
            assert canvas["y"] >= player["y"] - 1 and canvas["y"] + canvas["height"] <= player["y"] + player["height"] + 1

            def alpha_at(fx: float, fy: float) -> int:
                return page.evaluate(f"""() => {{ const c = document.querySelector('#mask-overlay');
                    return c.getContext('2d').getImageData(Math.floor({fx} * c.width), Math.floor({fy} * c.height),
                    1, 1).data[3]; }}""")

            assert alpha_at(0.62, 0.7) > 0  # on the white dog
            assert alpha_at(0.15, 0.2) == 0 and alpha_at(0.1, 0.72) == 0  # not on the red cup, nor the black dog

            page.fill("#refer-expression", "the black dog")  # a dog that runs: its mask follows it
            page.click("#refer-button")
            page.wait_for_function(f"document.querySelector('#refer-result').textContent.includes('object {BLACK_DOG}')")
            page.evaluate("document.querySelector('#player').currentTime = 3.2")
            page.wait_for_function("document.querySelector('#mask-overlay').dataset.frame === '30'")
            late = truth(clip, BLACK_DOG, 3.2)
            ys, xs = np.nonzero(late)
            assert alpha_at(xs.mean() / SIZE[0], ys.mean() / SIZE[1]) > 0
            assert alpha_at(0.1, 0.72) == 0  # where the dog was at the start, it is no longer
            page.screenshot(path=str(tmp_path / "refer.png"))  # kept in the test's folder

            page.fill("#refer-expression", "the flying saucer")  # no class the parser knows: the model says none
            page.click("#refer-button")
            page.wait_for_selector("#notice:not([hidden])")
            assert "no object of this video's object memory fits" in page.inner_text("#notice")
            assert page.is_hidden("#mask-overlay")

            page.fill("#question", "Cut out the black dog for me")  # a planner that names the tool: the file is linked
            page.fill("#planner-options", "tools=refer_object overview_segments=0")
            page.click("#ask-button")
            page.wait_for_selector("#files:not([hidden]) a.file-link", timeout=60_000)
            link = page.locator("#files a.file-link").first
            assert link.get_attribute("download").startswith("segment-") and link.get_attribute("download").endswith(".zip")
            assert f"object {BLACK_DOG}'s masks in {SCENES} frames" in page.inner_text("#files")
            assert not problems, problems
