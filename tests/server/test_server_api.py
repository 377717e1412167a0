"""``vidagent serve``'s HTTP API against a real server on loopback, over the scripted perception and a
private copy of the scripted home's library (tests/fakes), with a scripted chat model so every answer is known: registering
and uploading videos, index jobs with progress, asks with streamed steps, SQL, thumbnails and clips,
every bad input as a JSON error with the server still up, and concurrent asks that never mix."""

from __future__ import annotations

import io
import json
import os
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image as PILImage

from vidagent.server.config import ServeConfig
from vidagent.server.errors import ServeSetupError
from vidagent.video.video import Video

from conftest import write_test_video
from fakes import FakeClip, Scene, scripted_perception, write_clip
from serve_helpers import copy_home, read_sse, running_server, tagged_llm

MAX_UPLOAD = 400_000


@pytest.fixture(scope="module")
def served(scripted, tmp_path_factory):
    """A server whose folders are the scripted clips' folder (with a soundtrack beside them) and a
    private folder; uploads up to 400 kB."""
    home = copy_home(scripted.home, tmp_path_factory.mktemp("serve-home"))
    local = tmp_path_factory.mktemp("local-videos")
    (scripted.toy.parent / "toy.mp3").write_bytes(b"ID3 not a video")
    llm = tagged_llm()
    with running_server(home, home / "models", [scripted.toy.parent, local], llm, perception=scripted_perception(),
                        max_upload_bytes=MAX_UPLOAD) as (server, service):
        with httpx.Client(base_url=server.url, timeout=120) as client:
            yield client, service, local, llm


def register(client: httpx.Client, path: Path) -> dict:
    response = client.post("/api/videos", json={"path": str(path)})
    assert response.status_code == 201, response.text
    return response.json()


def error_of(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["status"] == status and body["message"] and body["error"]
    return body


def still_up(client: httpx.Client) -> None:
    assert client.get("/api/health").json()["status"] == "ok"


def stream_events(client: httpx.Client, method: str, url: str, **kwargs) -> list[tuple[str, dict]]:
    with client.stream(method, url, **kwargs) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        return [(name, json.loads(data)) for name, data in read_sse(response.iter_lines())]


def test_register_list_and_read_the_memory(scripted, served):
    client, service, _, _ = served
    toy = register(client, scripted.toy)
    assert toy["video_id"] == Video(scripted.toy).content_hash
    assert toy["stages"] == ["frames", "speech", "segments"] and toy["duration_s"] == pytest.approx(5.0, abs=0.1)
    by_name = client.post("/api/videos", json={"path": scripted.text.name})  # relative to a served folder
    assert by_name.status_code == 201 and by_name.json()["name"] == "text.mp4"
    listed = {v["video_id"]: v for v in client.get("/api/videos").json()["videos"]}
    assert {toy["video_id"], by_name.json()["video_id"]} <= set(listed)
    memory = client.get(f"/api/videos/{toy['video_id']}/memory").json()
    assert [(s["start_s"], s["end_s"]) for s in memory["segments"]] == [(0.0, 2.0), (2.0, 4.0), (4.0, 5.0)]
    assert all(s["description"] for s in memory["segments"]) and memory["objects"] == []
    assert client.get(f"/api/videos/{toy['video_id']}").json()["path"] == str(scripted.toy)
    served_file = client.get(f"/api/videos/{toy['video_id']}/file", headers={"Range": "bytes=0-99"})
    assert served_file.status_code == 206 and len(served_file.content) == 100  # players seek with ranges
    spec = client.get("/openapi.json").json()
    assert {"/api/videos", "/api/ask/stream", "/api/videos/{video_id}/sql"} <= set(spec["paths"])


def test_paths_outside_the_folders_are_refused(scripted, served, tmp_path):
    client, _, local, _ = served
    folder = scripted.toy.parent
    outside = write_clip(FakeClip("example1", [Scene("a street at night")]), folder.parent / "outside")
    error_of(client.post("/api/videos", json={"path": "/etc/passwd"}), 403)
    dotdot = str(folder / ".." / "outside" / "example1.mp4")
    assert "outside the folders" in error_of(client.post("/api/videos", json={"path": dotdot}), 403)["message"]
    error_of(client.post("/api/videos", json={"path": "../outside/example1.mp4"}), 403)
    link = local / "innocent.mp4"
    link.symlink_to(outside)  # a symlink inside a served folder that leads out of it
    error_of(client.post("/api/videos", json={"path": str(link)}), 403)
    error_of(client.post("/api/videos", json={"path": str(local / "missing.mp4")}), 404)
    (local / "notes.mp4").write_text("not a video")
    assert "notes.mp4" in error_of(client.post("/api/videos", json={"path": str(local / "notes.mp4")}), 422)["message"]
    listed = client.get("/api/videos").json()["videos"]
    assert Video(outside).content_hash not in {v["video_id"] for v in listed}
    files = {Path(f["path"]).name: f for f in client.get("/api/files").json()["files"]}
    assert {"text.mp4", "toy.mp4", "notes.mp4"} <= set(files) and "innocent.mp4" not in files  # the link out is hidden
    assert "toy.mp3" not in files and files["toy.mp4"]["registered"] is True
    still_up(client)


def test_malformed_requests_and_unknown_ids_are_json_errors(scripted, served):
    client, _, _, _ = served
    toy = register(client, scripted.toy)["video_id"]
    error_of(client.post("/api/videos", content=b"{not json", headers={"content-type": "application/json"}), 400)
    error_of(client.post("/api/videos", json={"where": "x"}), 422)
    error_of(client.post("/api/ask", json={"videos": [toy], "question": ""}), 422)
    error_of(client.post("/api/ask", json={"videos": [toy], "question": "Q?", "choices": ["x"] * 27}), 422)
    error_of(client.post(f"/api/videos/{toy}/sql", json={"query": "SELECT 1", "max_rows": 0}), 422)
    for url in ("/api/videos/0123456789abcdef0123456789abcdef", "/api/videos/not-an-id/memory", "/api/jobs/job-999"):
        error_of(client.get(url), 404)
    error_of(client.post("/api/videos/0123456789abcdef/sql", json={"query": "SELECT 1"}), 404)
    error_of(client.post("/api/ask", json={"videos": ["0123456789abcdef"], "question": "What?"}), 404)
    error_of(client.get("/api/nothing-here"), 404)
    still_up(client)


def test_uploads_are_streamed_checked_and_kept_by_content(scripted, served, tmp_path):
    client, service, _, _ = served
    guitar = write_clip(FakeClip("playing_guitar", [Scene("a man plays a guitar")] * 2), tmp_path)
    data = guitar.read_bytes()
    response = client.post("/api/videos/upload", params={"filename": "my guitar/drawing.mp4"}, content=data)
    assert response.status_code == 201, response.text
    uploaded = response.json()
    assert uploaded["video_id"] == Video(guitar).content_hash
    assert uploaded["name"] == "drawing.mp4" and uploaded["stages"] == []  # the user's name, no folders
    folder = service.config.uploads
    assert (folder / uploaded["video_id"] / "drawing.mp4").read_bytes() == data
    again = client.post("/api/videos/upload", params={"filename": "again.mp4"}, content=data).json()
    assert again["path"] == uploaded["path"]  # the same bytes: the same file and memory
    toy = register(client, scripted.toy)  # content the server lists from a folder: that video, left where it is
    same = client.post("/api/videos/upload", params={"filename": "copy.mp4"}, content=scripted.toy.read_bytes())
    assert same.status_code == 201 and same.json()["path"] == toy["path"] == str(scripted.toy)
    assert same.json()["stages"] == ["frames", "speech", "segments"]
    error_of(client.post("/api/videos/upload", params={"filename": "big.mp4"}, content=os.urandom(MAX_UPLOAD + 1)), 413)

    def chunks():  # no Content-Length: the limit is enforced while streaming
        for _ in range(10):
            yield os.urandom(64_000)

    error_of(client.post("/api/videos/upload", params={"filename": "big.mp4"}, content=chunks()), 413)
    assert "not a video" in error_of(client.post("/api/videos/upload", params={"filename": "noise.mp4"},
                                                 content=os.urandom(5000)), 415)["message"]
    error_of(client.post("/api/videos/upload", params={"filename": "notes.txt"}, content=b"hello"), 415)
    error_of(client.post("/api/videos/upload", params={"filename": "empty.mp4"}, content=b""), 400)
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) == \
        [uploaded["video_id"], f"{uploaded['video_id']}/drawing.mp4"]  # nothing half-written, no copy kept
    still_up(client)


def test_an_index_job_streams_its_progress_and_a_second_request_joins_it(served):
    client, service, local, _ = served
    service.session.perception.describer.delay_s = 0.2  # a build that takes a while, as a real one does
    rng = np.random.default_rng(0)
    frames = []
    for i in range(20):
        image = np.full((96, 128, 3), 40, np.uint8)
        image[20:60, 10 + 4 * i: 50 + 4 * i] = rng.integers(0, 255, 3)
        frames.append(image)
    clip = write_test_video(local / "square.mp4", frames, fps=10)
    video_id = client.post("/api/videos", json={"path": str(clip)}).json()["video_id"]
    first = client.post(f"/api/videos/{video_id}/index", json={"stages": ["frames", "speech", "segments"]})
    second = client.post(f"/api/videos/{video_id}/index", json={"stages": ["frames"]})
    assert first.status_code == second.status_code == 202
    assert second.json()["job_id"] == first.json()["job_id"]  # joined, not a second build
    events = stream_events(client, "GET", f"/api/jobs/{first.json()['job_id']}/events")
    names = [name for name, _ in events]
    assert names[0] == "queued" and names[-1] == "done", names
    started = dict(events)["started"]
    assert started["missing"] == ["frames", "speech", "segments"]
    progress = [(d["stage"], d["state"]) for n, d in events if n == "progress" and "frames_done" not in d]
    assert progress == [(s, state) for s in started["missing"] for state in ("running", "done")]
    frames = [(d["frames_done"], d["frames_total"]) for n, d in events if n == "progress" and "frames_done" in d]
    assert frames and frames[-1][0] == frames[-1][1] >= 1  # the frames stage's bar moves by frames
    assert all(a[0] <= b[0] for a, b in zip(frames, frames[1:]))
    assert client.get(f"/api/jobs/{first.json()['job_id']}").json()["state"] == "done"
    assert client.get(f"/api/videos/{video_id}").json()["stages"] == ["frames", "speech", "segments"]
    late = stream_events(client, "GET", f"/api/jobs/{first.json()['job_id']}/events")  # a late reader replays it
    assert [n for n, _ in late] == names
    error_of(client.post(f"/api/videos/{video_id}/index", json={"stages": ["everything"]}), 422)
    service.session.perception.describer.delay_s = 0.0


def test_an_ask_streams_each_step_then_the_answer(scripted, served):
    client, _, _, _ = served
    toy = register(client, scripted.toy)["video_id"]
    body = {"videos": [toy], "question": "[q1] What is being drawn?", "choices": ["answer to q1", "a car", "a house"]}
    events = stream_events(client, "POST", "/api/ask/stream", json=body)
    names = [name for name, _ in events]
    assert names[:2] == ["queued", "started"] and names[-1] == "answer", names
    steps = [data for name, data in events if name == "step"]
    assert [s["id"] for s in steps] == list(range(len(steps))) and steps[0]["type"] == "task"
    assert steps[-1]["type"] == "final_answer" and all(s["summary"] for s in steps)
    answer = events[-1][1]
    assert answer["choice_index"] == 0 and answer["answer"] == "answer to q1" and answer["video_id"] == toy
    assert [s["id"] for s in answer["trace"]] == [s["id"] for s in steps]
    assert answer["evidence"] and all(e["source"] == toy for e in answer["evidence"])
    plain = client.post("/api/ask", json={**body, "question": "[q2] And now?", "choices": None, "planner": "react",
                                          "options": {"max_steps": 3}})
    assert plain.status_code == 200 and plain.json()["answer"] == "answer to q2"


def test_planners_are_checked_before_anything_streams(scripted, served):
    client, _, _, _ = served
    toy = register(client, scripted.toy)["video_id"]
    ask = {"videos": [toy], "question": "What?"}
    unknown = error_of(client.post("/api/ask/stream", json={**ask, "planner": "tot"}), 400)
    assert "unknown planner 'tot'" in unknown["message"]
    error_of(client.post("/api/ask", json={**ask, "planner": "subprocess:run", "options": {"args": "true"}}), 400)
    no_option = error_of(client.post("/api/ask", json={**ask, "options": {"depth": 3}}), 400)
    assert "no option 'depth'" in no_option["message"]
    error_of(client.post("/api/ask", json={**ask, "planner": "mcts", "options": {"n": "many"}}), 400)
    error_of(client.post("/api/ask", json={**ask, "choices": ["a", " "]}), 400)
    assert client.get("/api/planners").json()["planners"] == sorted(client.get("/api/planners").json()["planners"])
    still_up(client)


def test_read_only_sql(scripted, served):
    client, _, _, _ = served
    toy = register(client, scripted.toy)["video_id"]
    result = client.post(f"/api/videos/{toy}/sql", json={"query": "SELECT COUNT(*) AS n FROM segments"}).json()
    assert result["columns"] == ["n"] and result["rows"] == [[3]] and result["truncated"] is False
    few = client.post(f"/api/videos/{toy}/sql", json={"query": "SELECT segment_id FROM segments", "max_rows": 2}).json()
    assert few["rows"] == [[0], [1]] and few["truncated"] is True
    register(client, scripted.text)
    escape = "WITH x AS (SELECT video_id, path FROM main.videos) SELECT * FROM x"  # issue 55: every video's path
    assert [row[0] for row in client.post(f"/api/videos/{toy}/sql", json={"query": escape}).json()["rows"]] == [toy]
    assert "SQL refused" in error_of(client.post(f"/api/videos/{toy}/sql", json={"query": "DELETE FROM segments"}),
                                      403)["message"]
    error_of(client.post(f"/api/videos/{toy}/sql", json={"query": "SELEC nonsense"}), 400)
    count = client.post(f"/api/videos/{toy}/sql", json={"query": "SELECT COUNT(*) FROM segments"})
    assert count.json()["rows"] == [[3]]  # the memory is as it was


def test_thumbnails_and_clips_cut_on_demand(scripted, served, tmp_path):
    client, _, _, _ = served
    toy = register(client, scripted.toy)["video_id"]
    response = client.get(f"/api/videos/{toy}/frame", params={"t": 2.5, "width": 160})
    assert response.status_code == 200 and response.headers["content-type"] == "image/jpeg"
    image = PILImage.open(io.BytesIO(response.content))
    assert max(image.size) == 160
    error_of(client.get(f"/api/videos/{toy}/frame", params={"t": 60}), 400)
    error_of(client.get(f"/api/videos/{toy}/frame", params={"t": 1, "width": 5000}), 400)
    error_of(client.get(f"/api/videos/{toy}/frame", params={"t": -1}), 422)
    clip = client.get(f"/api/videos/{toy}/clip", params={"start": 1, "end": 3})
    assert clip.status_code == 200 and clip.headers["content-type"] == "video/mp4"
    target = tmp_path / "clip.mp4"
    target.write_bytes(clip.content)
    assert Video(target).duration_s == pytest.approx(2.0, abs=0.2)
    error_of(client.get(f"/api/videos/{toy}/clip", params={"start": 3, "end": 1}), 400)


def test_concurrent_asks_on_two_videos_are_answered_each_its_own(scripted, served):
    client, service, _, _ = served
    ids = [register(client, scripted.toy)["video_id"], register(client, scripted.text)["video_id"]]
    results: dict[int, dict] = {}

    def ask(number: int) -> None:
        with httpx.Client(base_url=str(client.base_url), timeout=120) as own:
            body = {"videos": [ids[number % 2]], "question": f"[q{number}] What is shown?"}
            if number % 3 == 0:
                events = stream_events(own, "POST", "/api/ask/stream", json=body)
                results[number] = events[-1][1]
            else:
                results[number] = own.post("/api/ask", json=body).json()

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(10, 18)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(results) == list(range(10, 18))
    for number, answer in results.items():
        assert answer["answer"] == f"answer to q{number}" and answer["video_id"] == ids[number % 2]
        assert answer["question"] == f"[q{number}] What is shown?"
    deadline = time.monotonic() + 10  # a job counts as finished just after its answer is handed over
    while service.lane.pending and time.monotonic() < deadline:
        time.sleep(0.05)
    assert service.lane.pending == 0


def test_a_client_that_leaves_mid_stream_stops_its_question(scripted, served):
    client, service, _, llm = served
    toy = register(client, scripted.toy)["video_id"]
    calls_before = len(llm.requests)
    slow = {"videos": [toy], "question": "[slow] Keep looking"}
    with client.stream("POST", "/api/ask/stream", json=slow) as response:
        for name, _ in read_sse(response.iter_lines()):
            if name == "step":
                break  # the client goes away after the first step
        # meanwhile another client queues a question behind it and leaves before it starts
        with httpx.Client(base_url=str(client.base_url), timeout=30) as other:
            never = {"videos": [toy], "question": "[slow] Never asked"}
            with other.stream("POST", "/api/ask/stream", json=never) as queued:
                assert next(read_sse(queued.iter_lines()))[0] == "queued"
    deadline = time.monotonic() + 20
    while service.lane.pending and time.monotonic() < deadline:
        time.sleep(0.1)
    assert service.lane.pending == 0
    asked = llm.requests[calls_before:]
    assert len(asked) <= 4  # the selection, then at most a few steps: not the 8-step chain
    assert not any("Never asked" in message.content for request in asked for message in request)
    answer = client.post("/api/ask", json={"videos": [toy], "question": "[q3] Still there?"}).json()
    assert answer["answer"] == "answer to q3"


def test_the_page_and_its_files_are_served(served):
    client, _, _, _ = served
    page = client.get("/")
    assert page.status_code == 200 and 'src="/static/app.js"' in page.text
    for name, kind in (("app.js", "javascript"), ("style.css", "text/css")):
        response = client.get(f"/static/{name}")
        assert response.status_code == 200 and kind in response.headers["content-type"]
    error_of(client.get("/api/health", headers={"Host": "evil.example"}), 400)  # DNS rebinding: refused


def test_vidagent_serve_refuses_to_listen_beyond_loopback_without_a_token(capsys, monkeypatch):
    from vidagent.cli import main

    monkeypatch.delenv("VIDAGENT_TOKEN", raising=False)
    assert main(["serve", "--host", "0.0.0.0", "--port", "8999"]) == 2
    assert "refusing to listen on 0.0.0.0 without a token" in capsys.readouterr().err
    assert main(["serve", "--videos", "/no/such/folder"]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_beyond_loopback_needs_a_token(scripted, tmp_path):
    with pytest.raises(ServeSetupError, match="refusing to listen on 0.0.0.0 without a token"):
        ServeConfig(host="0.0.0.0").check_binding()
    with pytest.raises(ServeSetupError, match="too short"):
        ServeConfig(host="0.0.0.0", token="abc").check_binding()
    ServeConfig(host="0.0.0.0", token="s3cret-token").check_binding()
    ServeConfig(host="::1").check_binding()
    home = copy_home(scripted.home, tmp_path / "home")
    with running_server(home, home / "models", [], tagged_llm(), perception=scripted_perception(),
                        token="s3cret-token") as (server, _):
        with httpx.Client(base_url=server.url) as client:
            assert error_of(client.get("/api/videos"), 401)["error"] == "Unauthorized"
            error_of(client.get("/api/videos", headers={"Authorization": "Bearer wrong-token"}), 401)
            assert client.get("/api/videos", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200
            assert client.get("/api/videos", headers={"Cookie": "vidagent_token=s3cret-token"}).status_code == 200
            assert client.get("/").status_code == 200  # the page itself holds no data
            error_of(client.post("/mcp", json={}), 401)


def test_people_read_a_segment_and_its_evidence_as_planners_do_without_the_markup():
    from vidagent.memory.store import SegmentRecord
    from vidagent.server.display import shown_answer_data, shown_segment
    from vidagent.tools.observed import segment_text

    segment = SegmentRecord(0, 0.0, 2.0, "1 dog (white, small, centre).", "sit", "EXIT", np.zeros(4, np.float32))
    assert shown_segment(segment) == "1 dog (white, small, centre). Speech: “sit” On-screen text: “EXIT”"
    shown = shown_answer_data({"answer": "a dog", "choice_index": None, "candidates": [],
                               "evidence": [{"start_s": 0.0, "end_s": 2.0, "text": segment_text(segment)}]})
    assert shown["evidence"][0]["text"] == shown_segment(segment)  # one rendering: the model's, unmarked


def test_library_search_lists_moments_of_the_videos_served(scripted, served):
    client, _, _, _ = served
    register(client, scripted.toy)
    text = register(client, scripted.text)["video_id"]
    found = client.get("/api/search", params={"q": "clideo.com"}).json()
    first = found["moments"][0]
    assert first["video_id"] == text and first["name"] == "text.mp4" and "text" in first["kinds"]
    assert first["lines"][0]["text"] == "clideo.com" and first["spans"]
    assert first["thumbnail"].startswith(f"/api/videos/{text}/frame?t=")
    assert client.get(first["thumbnail"]).headers["content-type"] == "image/jpeg"
    said = client.get("/api/search", params={"q": "look at the cat", "kind": "speech"}).json()["moments"]
    assert said and all(moment["kinds"] == ["speech"] for moment in said)
    assert client.get("/api/search", params={"q": "giraffe zebra"}).json()["moments"] == []
    error_of(client.get("/api/search", params={"q": "cat", "kind": "scenes"}), 400)
    error_of(client.get("/api/search", params={"q": ""}), 422)
    error_of(client.get("/api/search", params={"q": "cat", "video": "0" * 32}), 404)
    still_up(client)
