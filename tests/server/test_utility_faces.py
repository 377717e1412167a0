"""The utility tools' faces: a planner that names them in its ``tools`` option, the commands
(``vidagent clip | highlight | remove | frames``) run end to end, the server's routes on a real server,
and the page in a real browser showing and downloading what an answer made. The boat clip's object
memory is built once with the real offline perception; a scripted chat model makes every answer known."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
import os
import threading
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import av
import httpx
import pytest

from vidagent.config import Settings
from vidagent.llm.base import Message
from vidagent.memory.builder import MemoryBuilder
from vidagent.memory.store import Library
from vidagent.session import Session
from vidagent.video import editing
from vidagent.video.video import Video

from conftest import TEMPORAL_TOY, video_path
from fakes import ScriptedLLM
from serve_helpers import copy_home, running_server

BOAT = "github_Video-LLaMA/boat.mp4"
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def boat_home(tmp_path_factory, perception, models_dir) -> Path:
    """A vidagent home whose library holds the boat clip's object memory."""
    home = tmp_path_factory.mktemp("boat-home")
    settings = replace(Settings.from_env(), home=home, models=models_dir)
    with Library(settings.library_path) as library:
        MemoryBuilder(library, perception, settings).build(Video(video_path(BOAT)), ["objects"], progress=False)
    return home


def frames_of(path: Path | bytes) -> int:
    with av.open(io.BytesIO(path) if isinstance(path, bytes) else str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def clip_maker(messages: Sequence[Message]) -> str:
    """A model that asks for the clip of 1-3 s, then says where it is."""
    text = "\n".join(message.content for message in messages)
    if "Action: export_clip" not in text:
        time_to_think = 0.3 if "[page]" in text else 0.0
        if time_to_think:
            import time

            time.sleep(time_to_think)
        return "Thought: the user wants the clip\nAction: export_clip\nAction Input: 1, 3"
    return "Thought: it is saved\nFinal Answer: the clip of 1-3 s is saved"


# -- a planner naming the tools ---------------------------------------------------------------------------------------------
def test_react_offers_a_utility_tool_only_when_its_tools_option_names_it(temporal_library, models_dir, tmp_path):
    home = copy_home(temporal_library, tmp_path / "home")
    settings = replace(Settings.from_env(), home=home, models=models_dir)
    llm = ScriptedLLM([clip_maker] * 3)
    with Session(settings, llm=llm) as session:
        answer = session.ask(video_path(TEMPORAL_TOY), "Cut 1-3 s into a clip for me", planner="react",
                             planner_options={"tools": "export_clip,caption_retrieval", "overview_segments": 0})
    assert "- export_clip(start_s: float, end_s: float): cuts the video" in llm.requests[0][0].content
    (made,) = [step for step in answer.trace if step.kind == "observation" and step.tool == "export_clip"]
    path = Path(made.artifacts["file"])
    assert path.parent == settings.artifacts_dir and frames_of(path) == 60 and str(path) in made.text
    assert answer.text == "the clip of 1-3 s is saved"

    default = ScriptedLLM(["no", "Thought: read it\nFinal Answer: a guitar"])
    with Session(settings, llm=default) as session:
        session.ask(video_path(TEMPORAL_TOY), "What is being drawn?", planner="react")
    system = default.requests[1][0].content
    assert "export_clip" not in system and "remove_object" not in system  # no default list offers them


# -- the commands -----------------------------------------------------------------------------------------------------------
def run_cli(*args: str, home: Path, models_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "VIDAGENT_HOME": str(home), "VIDAGENT_MODELS": str(models_dir)}
    return subprocess.run([sys.executable, "-m", "vidagent.cli", *args], env=env, capture_output=True, text=True,
                          timeout=600)


def one_line_error(result: subprocess.CompletedProcess, code: int, fragment: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == code and len(lines) == 1 and fragment in lines[0], result.stderr
    assert lines[0].startswith("vidagent: error:") and "Traceback" not in result.stderr


def test_the_commands_write_clips_edits_and_frames_and_print_where(boat_home, models_dir, tmp_path):
    boat = str(video_path(BOAT))
    video_id = Video(boat).content_hash
    clip = run_cli("clip", boat, "1", "3", "-o", str(tmp_path / "out" / "clip.mp4"), home=boat_home,
                   models_dir=models_dir)
    assert clip.returncode == 0, clip.stderr
    assert clip.stdout.strip() == f"{tmp_path / 'out' / 'clip.mp4'}: clip of 1.00-3.00 s, 60 frames, " \
                                  f"{clip.stdout.split(', ')[-1].strip()}"
    assert frames_of(tmp_path / "out" / "clip.mp4") == 60

    by_id = run_cli("clip", video_id[:10], "0", "2", "-q", home=boat_home, models_dir=models_dir)  # an indexed id
    artifact = Path(by_id.stdout.split(": ")[0])
    assert by_id.returncode == 0 and artifact.parent == boat_home / "artifacts" and frames_of(artifact) == 60
    again = run_cli("clip", video_id[:10], "0", "2", home=boat_home, models_dir=models_dir)
    assert again.stdout.startswith(f"{artifact}:") and again.stdout.strip().endswith("made before")

    highlight = run_cli("highlight", boat, "0", "-o", str(tmp_path / "boat.mp4"), home=boat_home,
                        models_dir=models_dir)
    assert highlight.returncode == 0 and frames_of(tmp_path / "boat.mp4") == 181, highlight.stderr
    remove = run_cli("remove", boat, "0", "-o", str(tmp_path), "-q", home=boat_home, models_dir=models_dir)
    removed = Path(remove.stdout.split(": ")[0])
    assert remove.returncode == 0 and removed.parent == tmp_path and removed.name.startswith("remove-")
    assert frames_of(removed) == 181

    frames = run_cli("frames", boat, "0", "3", "-o", str(tmp_path / "frames"), "--fps", "2", "--format", "png",
                     home=boat_home, models_dir=models_dir)
    assert frames.returncode == 0 and "6 images" in frames.stdout
    assert sorted(p.name for p in (tmp_path / "frames").iterdir())[0] == "frame_00001_0.00s.png"

    one_line_error(run_cli("remove", boat, "4", home=boat_home, models_dir=models_dir), 2,
                   "no object 4 in this video's object memory; its objects are 0 (boat, 0.0-6.0 s)")
    one_line_error(run_cli("clip", boat, "3", "1", home=boat_home, models_dir=models_dir), 2,
                   "the window must end after it starts")
    one_line_error(run_cli("clip", boat, "1", "2", "-o", str(tmp_path / "clip.txt"), home=boat_home,
                           models_dir=models_dir), 2, "name it .mp4")
    one_line_error(run_cli("frames", boat, "0", "1", "-o", str(tmp_path / "frames"), home=boat_home,
                           models_dir=models_dir), 2, "is not an empty folder")
    one_line_error(run_cli("highlight", str(tmp_path / "nope.mp4"), "0", home=boat_home, models_dir=models_dir), 5,
                   "no such video file")
    assert not [p for p in tmp_path.rglob(".*part*")]  # nothing half-written anywhere


# -- the server's routes -----------------------------------------------------------------------------------------------------
def test_the_routes_answer_with_the_files_and_refuse_bad_requests(boat_home, models_dir, tmp_path):
    home = copy_home(boat_home, tmp_path / "home")
    with running_server(home, models_dir, [video_path(BOAT).parent], ScriptedLLM([])) as (server, _):
        with httpx.Client(base_url=server.url, timeout=300) as client:
            video_id = client.post("/api/videos", json={"path": str(video_path(BOAT))}).json()["video_id"]
            base = f"/api/videos/{video_id}/edits"
            clip = client.get(f"{base}/clip", params={"start": 1, "end": 3})
            assert clip.status_code == 200 and clip.headers["content-type"] == "video/mp4"
            name = clip.headers["content-disposition"].split('filename="')[1].rstrip('"')
            assert name.startswith("clip-") and "attachment" in clip.headers["content-disposition"]
            assert frames_of(clip.content) == 60
            assert client.get(f"/api/artifacts/{name}").content == clip.content  # the link an answer's step gives

            frames = client.get(f"{base}/frames", params={"start": 0, "end": 2, "fps": 2})
            assert frames.status_code == 200 and frames.headers["content-type"] == "application/zip"
            names = zipfile.ZipFile(io.BytesIO(frames.content)).namelist()
            assert len(names) == 4 and names[0].endswith("/frame_00001_0.00s.jpg")

            highlight = client.get(f"{base}/highlight", params={"object_id": 0})
            assert highlight.status_code == 200 and frames_of(highlight.content) == 181
            removed = client.get(f"{base}/remove", params={"object_id": 0})
            assert removed.status_code == 200 and frames_of(removed.content) == 181

            for url, params, status, fragment in (
                    (f"{base}/remove", {"object_id": 3}, 422, "no object 3"),
                    (f"{base}/clip", {"start": 9, "end": 12}, 422, "after the video ends"),
                    (f"{base}/clip", {"start": 2}, 422, "end"),
                    (f"{base}/frames", {"start": 0, "end": 1, "fps": 100}, 422, "fps"),
                    ("/api/videos/nope/edits/clip", {"start": 0, "end": 1}, 404, "nope"),
                    ("/api/artifacts/..%2Flibrary.sqlite", {}, 404, ""),
                    ("/api/artifacts/clip-0123456789ab-0123456789abcdef.mp4", {}, 404, "no file named")):
                response = client.get(url, params=params)
                assert response.status_code == status, (url, response.text)
                body = response.json()
                assert body["status"] == status and fragment in body["message"] + str(body), body
            assert client.get("/api/health").json()["status"] == "ok"


def test_an_edit_is_made_beside_the_model_lane_and_one_too_many_is_refused(boat_home, models_dir, tmp_path,
                                                                          monkeypatch):
    """While the boat is drawn (its encode held open here), the model lane is free for a question, and a
    second edit is 429 naming max_edits."""
    home = copy_home(boat_home, tmp_path / "home")
    entered, gate = threading.Event(), threading.Event()
    encode = editing._encode

    def held(*args, **kwargs):
        entered.set()
        assert gate.wait(120)
        return encode(*args, **kwargs)

    monkeypatch.setattr(editing, "_encode", held)
    with running_server(home, models_dir, [video_path(BOAT).parent], ScriptedLLM([]), max_edits=1) as (server, service):
        with httpx.Client(base_url=server.url, timeout=60) as client, ThreadPoolExecutor(1) as pool:
            video_id = client.post("/api/videos", json={"path": str(video_path(BOAT))}).json()["video_id"]
            base = f"/api/videos/{video_id}/edits"
            drawn = pool.submit(client.get, f"{base}/highlight", params={"object_id": 0})
            try:
                assert entered.wait(60)
                assert service.lane.submit(lambda: "asked").result(timeout=10) == "asked"  # not behind the encode
                refused = client.get(f"{base}/clip", params={"start": 1, "end": 3}, timeout=10)
                assert refused.status_code == 429, refused.text
                body = refused.json()
                assert body["error"] == "TooManyEditsError" and "max_edits = 1" in body["message"]
            finally:
                gate.set()
            assert drawn.result().status_code == 200 and frames_of(drawn.result().content) == 181
            assert client.get(f"{base}/clip", params={"start": 1, "end": 3}).status_code == 200  # its turn now


def test_an_edit_longer_than_the_server_allows_is_refused_naming_the_setting(boat_home, models_dir, tmp_path):
    home = copy_home(boat_home, tmp_path / "home")
    with running_server(home, models_dir, [video_path(BOAT).parent], ScriptedLLM([]), max_edit_seconds=2.5) \
            as (server, _):
        with httpx.Client(base_url=server.url, timeout=300) as client:
            video_id = client.post("/api/videos", json={"path": str(video_path(BOAT))}).json()["video_id"]
            base = f"/api/videos/{video_id}/edits"
            for url, params, kind in ((f"{base}/clip", {"start": 0, "end": 3}, "clip"),
                                      (f"{base}/frames", {"start": 0, "end": 4}, "frames"),
                                      (f"{base}/remove", {"object_id": 0}, "remove")):  # the whole 6 s
                response = client.get(url, params=params)
                body = response.json()
                assert response.status_code == 422 and body["error"] == "EditTooLongError", body
                assert f"the {kind} would cover" in body["message"] and "at most 2.5 s (max_edit_seconds, " \
                       "`vidagent serve --max-edit-seconds`)" in body["message"], body
            assert client.get(f"{base}/clip", params={"start": 0.5, "end": 3}).status_code == 200


def test_the_same_frames_asked_for_twice_at_once_are_made_once_and_sent_to_both(boat_home, models_dir, tmp_path):
    home = copy_home(boat_home, tmp_path / "home")
    with running_server(home, models_dir, [video_path(BOAT).parent], ScriptedLLM([])) as (server, _):
        with httpx.Client(base_url=server.url, timeout=300) as client, ThreadPoolExecutor(2) as pool:
            video_id = client.post("/api/videos", json={"path": str(video_path(BOAT))}).json()["video_id"]
            both = [pool.submit(client.get, f"/api/videos/{video_id}/edits/frames",
                                params={"start": 0, "end": 2, "fps": 30}) for _ in range(2)]
            first, second = (future.result() for future in both)
            assert first.status_code == second.status_code == 200, (first.text, second.text)
            assert first.content == second.content and len(zipfile.ZipFile(io.BytesIO(first.content)).namelist()) == 60


def test_an_edit_the_server_cannot_write_is_a_500_naming_no_server_path(boat_home, models_dir, tmp_path, caplog):
    home = copy_home(boat_home, tmp_path / "home")
    with running_server(home, models_dir, [video_path(BOAT).parent], ScriptedLLM([])) as (server, service):
        with httpx.Client(base_url=server.url, timeout=300) as client:
            video_id = client.post("/api/videos", json={"path": str(video_path(BOAT))}).json()["video_id"]
            url, params = f"/api/videos/{video_id}/edits/clip", {"start": 1, "end": 3}
            name = client.get(url, params=params).headers["content-disposition"].split('filename="')[1].rstrip('"')
            made = service.config.settings.artifacts_dir / name
            made.unlink()
            made.mkdir()  # something else where the clip goes: the server cannot write it
            with caplog.at_level(logging.ERROR, logger="vidagent.server.edits"):
                failed = client.get(url, params=params)
            body = failed.json()
            assert failed.status_code == 500 and body["error"] == "StorageError", body
            assert body["message"] == "the server failed to make the clip: cannot write the video (Is a directory); " \
                                      "its log says where", body
            assert str(home) not in failed.text and "artifacts" not in failed.text
            assert any(str(made) in record.getMessage() for record in caplog.records)


# -- the page ------------------------------------------------------------------------------------------------------------------
@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (install.sh does)")
def test_the_page_links_the_files_an_answer_made_and_downloads_them(temporal_library, models_dir, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    home = copy_home(temporal_library, tmp_path / "home")
    llm = ScriptedLLM([clip_maker] * 10)
    with running_server(home, models_dir, [video_path(TEMPORAL_TOY).parent], llm) as (server, _):
        with httpx.Client(base_url=server.url) as client:
            toy = client.post("/api/videos", json={"path": str(video_path(TEMPORAL_TOY))}).json()["video_id"]
        with playwright.sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            try:
                page = browser.new_page(viewport={"width": 1440, "height": 900}, accept_downloads=True)
                problems: list[str] = []
                page.on("pageerror", lambda error: problems.append(str(error)))
                page.goto(server.url + "/")
                page.wait_for_selector("body[data-ready=true]")
                page.click(f"#video-list li[data-video-id='{toy}']")
                page.wait_for_selector(".lane-track[data-lane=segments] .block")
                page.fill("#question", "[page] Cut 1-3 s into a clip for me")
                page.select_option("#planner", "react")
                page.fill("#planner-options", "overview_segments=0, tools=export_clip,caption_retrieval")
                page.click("#ask-button")
                page.wait_for_selector(".step[data-type=observation] a.file-link")  # linked as soon as it is made
                page.wait_for_selector("#answer:not([hidden])", timeout=60_000)
                link = page.locator("#files a.file-link")
                assert link.count() == 1 and page.is_visible("#files")
                name = link.inner_text()
                assert name.startswith("clip-") and name.endswith(".mp4")
                assert "clip, 1.0 s – 3.0 s" in page.inner_text("#files")
                with page.expect_download() as download:
                    link.click()
                saved = tmp_path / "downloaded.mp4"
                download.value.save_as(saved)
                assert download.value.suggested_filename == name and frames_of(saved) == 60
                assert not problems, problems
            finally:
                browser.close()
