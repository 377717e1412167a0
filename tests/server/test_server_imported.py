"""Memories imported from released captions in the server's faces, against a real server on loopback with
real slices of LLoVi's and VideoAgent's releases, the real text embedder and a scripted chat model:
``POST /api/import`` as a job with progress and its report, the memories listed with their captioner and
no file, their captions as the memory, a clear 409 for a file, frame, clip or build, questions by id over
HTTP and MCP, and every bad import refused (outside the folders, a bad caption file named) with nothing
written. Then the page in headless Chromium: import, see the memory listed, ask, read caption evidence."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path

import httpx
import pytest
from mcp import Client

from serve_helpers import read_sse, running_server, tagged_llm
from test_caption_import import LAVILA, ego_slice, nextqa_slice  # noqa: F401 - fixtures: small real slices

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LAVILA_NAME = "LaViLa (LLoVi's release)"
MEDIA = re.compile(r"/api/videos/[^/]+/(file|frame|clip)\b")  # what a page must not ask of a memory without a file


@pytest.fixture(scope="module")
def served(models_dir, ego_slice, nextqa_slice, tmp_path_factory):  # noqa: F811
    """A server over an empty library whose folders hold the two slices and a folder of bad caption files."""
    home = tmp_path_factory.mktemp("imported-home")
    bad = tmp_path_factory.mktemp("bad-captions")
    folders = [ego_slice[0].parent, nextqa_slice[0].parent, bad]
    with running_server(home, models_dir, folders, tagged_llm()) as (server, service):
        with httpx.Client(base_url=server.url, timeout=120) as client:
            yield client, server, service, bad


def error_of(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["status"] == status and body["message"] and body["error"] and "\n" not in body["message"]
    return body


def import_and_wait(client: httpx.Client, body: dict) -> tuple[dict, list[tuple[str, dict]]]:
    """POST /api/import, then follow the job's events to its end: (the job when done, the events)."""
    response = client.post("/api/import", json=body)
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["job_id"].startswith("import-") and job["kind"] == "import"
    with client.stream("GET", f"/api/jobs/{job['job_id']}/events") as stream:
        events = [(name, json.loads(data)) for name, data in read_sse(stream.iter_lines())]
    assert events[-1][0] == "done", events[-1]
    return client.get(f"/api/jobs/{job['job_id']}").json(), events


def listed(client: httpx.Client) -> dict[str, dict]:
    return {video["video_id"]: video for video in client.get("/api/videos").json()["videos"]}


@pytest.mark.models
def test_an_import_job_lists_memories_without_video_files(served, ego_slice, nextqa_slice):  # noqa: F811
    client, _, _, _ = served
    path, ids = ego_slice
    done, events = import_and_wait(client, {"path": str(path)})
    names = [name for name, _ in events]
    assert names[:2] == ["queued", "started"], names
    progress = [data for name, data in events if name == "progress"]
    assert progress[-1] == {"done": 2, "total": 2, "video_id": f"egoschema:{ids[1]}", "state": "imported"}
    report = done["report"]
    assert done["state"] == "done" and (done["format"], done["namespace"]) == ("llovi", "egoschema")
    assert report["imported"] == [f"egoschema:{i}" for i in ids] and report["unchanged"] == []
    assert report["captions"] == 360 and report["seconds"] >= 0

    videos = listed(client)
    memory = videos[f"egoschema:{ids[0]}"]
    assert memory["kind"] == "captions" and memory["has_file"] is False and memory["name"] == f"egoschema:{ids[0]}"
    assert memory["origin"] == f"captions by {LAVILA_NAME}" and memory["captioner"] == LAVILA_NAME
    assert memory["duration_s"] == 180.0 and memory["captions"] == 180 and memory["stages"] == ["segments"]
    assert memory["caption_format"] == "llovi" and memory["path"] == str(path)
    one = client.get(f"/api/videos/egoschema:{ids[0]}").json()
    assert one == memory
    segments = client.get(f"/api/videos/egoschema:{ids[0]}/memory").json()["segments"]
    released = json.loads(path.read_text())[ids[0]]
    assert len(segments) == 180 and segments[5]["description"] == " ".join(released[5].split())
    assert (segments[5]["start_s"], segments[5]["end_s"]) == (5.0, 6.0)

    again, _ = import_and_wait(client, {"path": path.name})  # relative to a served folder; nothing rebuilt
    assert again["report"]["imported"] == [] and again["report"]["unchanged"] == [f"egoschema:{i}" for i in ids]

    zipped, videos_in_zip = nextqa_slice
    only = videos_in_zip[1]
    done = client.post("/api/import", json={"path": str(zipped), "only": [only], "wait": True})  # one call, the report
    assert done.status_code == 200, done.text
    done = done.json()
    assert done["state"] == "done" and done["job_id"].startswith("import-")
    assert done["report"]["imported"] == [f"nextqa:{only}"] and done["format"] == "videoagent"
    nextqa = listed(client)[f"nextqa:{only}"]  # a zip's member is visible by its zip, inside the folders
    assert nextqa["origin"] == "captions by CogAgent (VideoAgent's release)" and f"nextqa:{videos_in_zip[0]}" not in listed(client)
    sql = client.post(f"/api/videos/nextqa:{only}/sql", json={"query": "SELECT COUNT(*) FROM segments"}).json()
    assert sql["rows"] == [[nextqa["captions"]]]


@pytest.mark.models
def test_a_memory_without_a_file_has_no_file_frames_clips_or_build(served, ego_slice):  # noqa: F811
    client, _, _, _ = served
    path, ids = ego_slice
    import_and_wait(client, {"path": str(path)})
    memory = f"egoschema:{ids[0]}"
    for response in (client.get(f"/api/videos/{memory}/file"), client.get(f"/api/videos/{memory}/frame?t=2"),
                     client.get(f"/api/videos/{memory}/clip?start=1&end=3"),
                     client.post(f"/api/videos/{memory}/index", json={})):
        body = error_of(response, 409)
        assert body["error"] == "NoVideoFileError" and body["message"].startswith(f"no video file: {memory} is a memory "
                                                                                  "imported from captions")
        assert LAVILA_NAME in body["message"]
    error_of(client.get("/api/videos/egoschema:no-such-video/memory"), 404)
    assert client.get("/api/health").json()["status"] == "ok"


@pytest.mark.models
def test_questions_on_a_memory_by_its_id_over_http_and_mcp(served, ego_slice):  # noqa: F811
    client, server, _, _ = served
    path, ids = ego_slice
    import_and_wait(client, {"path": str(path)})
    memory = f"egoschema:{ids[0]}"
    captions = {" ".join(text.split()) for text in json.loads(path.read_text())[ids[0]]}
    body = {"videos": [memory], "question": "[q3] What is C doing?", "choices": ["answer to q3", "cooking"]}
    answer = client.post("/api/ask", json=body)
    assert answer.status_code == 200, answer.text
    answer = answer.json()
    assert answer["answer"] == "answer to q3" and answer["choice_index"] == 0 and answer["video_id"] == memory
    assert answer["evidence"] and all(e["source"] == memory and e["text"] in captions for e in answer["evidence"])
    with client.stream("POST", "/api/ask/stream", json={**body, "question": "[q4] And then?", "choices": ["cooking", "answer to q4"],
                                                        "planner": "caption_only"}) as stream:
        events = [(name, json.loads(data)) for name, data in read_sse(stream.iter_lines())]
    assert events[-1][0] == "answer" and events[-1][1]["option"] == "B", events[-1]
    assert [name for name, _ in events][:2] == ["queued", "started"]
    error_of(client.post("/api/ask", json={"videos": ["egoschema:no-such-video"], "question": "What?"}), 404)

    async def over_mcp() -> dict:
        async with Client(f"{server.url}/mcp", read_timeout_seconds=120) as mcp:
            listing = (await mcp.call_tool("list_videos", {})).structured_content["videos"]
            assert memory in {video["video_id"] for video in listing}
            result = await mcp.call_tool("ask_video", {"video": memory, "question": "[q5] What is C holding?",
                                                       "choices": ["answer to q5", "a cup"]})
            assert not result.is_error, result.content
            refused = await mcp.call_tool("index_video", {"video": memory})
            assert refused.is_error and "no video file" in refused.content[0].text
            return result.structured_content

    result = asyncio.run(asyncio.wait_for(over_mcp(), timeout=120))
    assert result["answer"] == "answer to q5" and result["option"] == "A" and result["video_id"] == memory


@pytest.mark.clips
@pytest.mark.parametrize("name, content, status, says", [
    ("egoschema_empty_caption.json", {"v1": ["C opens a door", "  "]}, 422, "caption 1"),
    ("egoschema_shape.json", {"v1": "C opens a door"}, 422, "expected a list of captions"),
    ("egoschema_not_json.json", None, 422, "egoschema_not_json.json"),
    ("captions.txt", {"v1": ["C opens a door"]}, 422, "cannot tell its caption format"),
])
def test_a_bad_caption_file_is_a_422_naming_it_and_nothing_is_written(served, name, content, status, says):
    client, _, _, bad = served
    file = bad / name
    file.write_text("{not json" if content is None else json.dumps(content))
    before = set(listed(client))
    body = error_of(client.post("/api/import", json={"path": str(file)}), status)
    assert body["error"] == "CaptionFormatError" and str(file) in body["message"] and says in body["message"]
    assert set(listed(client)) == before


@pytest.mark.clips
def test_imports_outside_the_folders_or_with_bad_options_are_refused(served, ego_slice, tmp_path):  # noqa: F811
    client, _, _, bad = served
    path, _ = ego_slice
    before = set(listed(client))
    assert "outside the folders" in error_of(client.post("/api/import", json={"path": str(LAVILA)}), 403)["message"]
    dotdot = str(bad / ".." / LAVILA.parent.name / LAVILA.name)
    error_of(client.post("/api/import", json={"path": dotdot}), 403)
    link = bad / "released.json"
    shutil.copyfile(path, tmp_path / "elsewhere.json")
    link.symlink_to(tmp_path / "elsewhere.json")  # a link in a served folder that leads out of it
    error_of(client.post("/api/import", json={"path": str(link)}), 403)
    error_of(client.post("/api/import", json={"path": str(bad / "missing.json")}), 404)
    assert "unknown caption format 'srt'" in error_of(client.post("/api/import", json={"path": str(path), "format": "srt"}),
                                                     422)["message"]
    assert "not a valid memory id" in error_of(client.post("/api/import", json={"path": str(path), "namespace": "Ego Schema"}),
                                               422)["message"]
    assert "none of the 1 videos" in error_of(client.post("/api/import", json={"path": str(path), "only": ["nope"]}),
                                              422)["message"]
    error_of(client.post("/api/import", json={"path": str(path), "where": "x"}), 422)
    error_of(client.post("/api/import", content=json.dumps({"path": str(path)}), headers={"content-type": "text/plain"}),
             415)
    assert set(listed(client)) == before


@pytest.mark.models
def test_removing_an_imported_memory_keeps_its_caption_file(served, ego_slice):  # noqa: F811
    client, _, _, _ = served
    path, ids = ego_slice
    import_and_wait(client, {"path": str(path)})
    memory = f"egoschema:{ids[1]}"
    removed = client.delete(f"/api/videos/{memory}").json()
    assert removed == {"video_id": memory, "name": memory, "removed": True, "file_removed": False}
    assert memory not in listed(client) and path.is_file()
    done, _ = import_and_wait(client, {"path": str(path)})  # imported again from the same file
    assert done["report"]["imported"] == [memory]


playwright = pytest.importorskip("playwright.sync_api")


@pytest.mark.models
@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (install.sh does)")
def test_the_page_imports_lists_and_answers_from_captions(models_dir, ego_slice, tmp_path):  # noqa: F811
    path, ids = ego_slice
    folder = tmp_path / "captions"
    folder.mkdir()
    shutil.copyfile(path, folder / path.name)
    memory = f"egoschema:{ids[0]}"
    captions = json.loads(path.read_text())[ids[0]]
    with running_server(tmp_path / "home", models_dir, [folder], tagged_llm()) as (server, _):
        with playwright.sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            try:
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                problems: list[str] = []
                page.on("pageerror", lambda error: problems.append(str(error)))
                failed: list[str] = []
                media: list[str] = []
                page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
                page.on("request", lambda r: media.append(r.url) if MEDIA.search(r.url) else None)
                page.goto(server.url + "/")
                page.wait_for_selector("body[data-ready=true]")
                assert page.locator("#video-list li").count() == 0

                page.fill("#import-path", path.name)  # relative to the served folder, as the form says
                page.click("#import-button")
                page.wait_for_selector(f"#video-list li[data-video-id='{memory}']", timeout=60_000)
                page.wait_for_selector("#import-status:text('2 memories imported')")
                item = page.locator(f"#video-list li[data-video-id='{memory}']")
                assert f"captions by {LAVILA_NAME}" in item.inner_text()
                assert page.locator("#video-list li").count() == 2

                item.click()
                page.wait_for_selector("#video-title:text('egoschema:')")
                page.wait_for_selector(".player-wrap.no-file")
                assert not page.is_visible("#player")  # no broken <video>
                note = page.inner_text("#player-nofile")
                assert "No video file" in note and LAVILA_NAME in note and "180 captions" in note
                assert page.locator(".lane-track[data-lane=segments] .block").count() == 180
                assert page.inner_text("#index-button") == "Captions imported" and page.is_disabled("#index-button")
                assert page.is_visible("#caption-legend") and not page.is_visible(".legend")  # no offline-describer note
                page.locator(".lane-track[data-lane=segments] .block").nth(7).click()  # the timeline still shows a caption
                assert " ".join(captions[7].split()) in page.inner_text("#segment-detail")

                page.fill("#question", "What does C use to cut the food?")
                for choice in ("a guitar", "a knife", "a spoon"):
                    page.click("#add-choice")
                    page.locator(".choice input").last.fill(choice)
                page.click("#ask-button")
                page.wait_for_selector("#answer:not([hidden])", timeout=60_000)
                assert page.inner_text("#answer-text").startswith("A.")
                texts = page.eval_on_selector_all(".evidence-item .what", "nodes => nodes.map(n => n.textContent)")
                flat = {" ".join(text.split()) for text in captions}
                assert texts and all(text in flat for text in texts), texts
                assert page.locator(".evidence-item img").count() == 0  # captions, no thumbnails
                page.locator(".evidence-item").first.click()  # seeks the timeline without a player
                page.wait_for_selector(".band")
                page.screenshot(path=str(tmp_path / "imported.png"))

                page.set_viewport_size({"width": 390, "height": 844})  # a phone: nothing sideways
                page.wait_for_timeout(200)
                assert page.evaluate("document.documentElement.scrollWidth") <= 390
                page.set_viewport_size({"width": 1440, "height": 900})

                dialogs: list[str] = []
                page.once("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.accept()))
                page.click("#remove-button")  # the memory goes; its caption file stays
                page.wait_for_function("document.querySelectorAll('#video-list li').length === 1")
                assert dialogs and "Its caption file stays" in dialogs[0] and (folder / path.name).is_file()
                assert not page.is_visible("#player-nofile") and page.is_visible(".legend")
                assert not media and not failed and not problems, (media, failed, problems)
            finally:
                browser.close()
