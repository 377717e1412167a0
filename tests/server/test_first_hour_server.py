"""Issue 27 against a real server on loopback (the scripted home and perception, a scripted chat model):
a cross-site upload refused, the API named as MCP is, steps and answers shown without markup and with
options by letter, uploads kept under the user's name without taking over a registered video, videos
removed with their memory and files, a truncated video indexed as far as it decodes."""

from __future__ import annotations

import json

import httpx
import pytest

from conftest import video_path
from fakes import scripted_perception
from serve_helpers import copy_home, read_sse, running_server, tagged_llm


@pytest.fixture(scope="module")
def served(scripted, tmp_path_factory):
    home = copy_home(scripted.home, tmp_path_factory.mktemp("first-hour-home"))
    with running_server(home, home / "models", [scripted.toy.parent], tagged_llm(),
                        perception=scripted_perception()) as (server, service):
        with httpx.Client(base_url=server.url, timeout=120) as client:
            yield client, service


def stream(client: httpx.Client, body: dict) -> list[tuple[str, dict]]:
    with client.stream("POST", "/api/ask/stream", json=body) as response:
        assert response.status_code == 200, response.read()
        return [(name, json.loads(data)) for name, data in read_sse(response.iter_lines())]


# -- 7. cross-site requests -------------------------------------------------------------------------------------------
def test_a_page_on_another_site_cannot_upload_or_register(scripted, served):
    """`POST /api/videos/upload` took `Content-Type: text/plain` (no CORS preflight) from any Origin."""
    client, service = served
    data = scripted.toy.read_bytes()
    before = sorted(p.name for p in service.config.uploads.rglob("*"))
    for headers in ({"Origin": "https://evil.example", "Content-Type": "text/plain"},
                    {"Origin": "null", "Content-Type": "text/plain"},
                    {"Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}):
        refused = client.post("/api/videos/upload", params={"filename": "x.mp4"}, content=data, headers=headers)
        assert refused.status_code == 403 and refused.json()["error"] == "CrossSiteRequest", refused.text
    assert sorted(p.name for p in service.config.uploads.rglob("*")) == before  # nothing was written
    refused = client.post("/api/videos", json={"path": str(scripted.text)},
                          headers={"Origin": "http://localhost.evil.example"})
    assert refused.status_code == 403
    own = client.post("/api/videos", json={"path": str(scripted.text)},
                      headers={"Origin": str(client.base_url).rstrip("/")})  # the server's own page
    assert own.status_code == 201, own.text
    assert client.get("/api/videos", headers={"Origin": "https://evil.example"}).status_code == 200  # reads are not


# -- 10. one naming for the API and MCP ---------------------------------------------------------------------------------
def test_the_api_takes_paths_where_mcp_does_and_names_its_errors_one_way(scripted, served):
    client, _ = served
    events = stream(client, {"videos": [scripted.toy.name], "question": "[q3] What is drawn?"})
    assert events[-1][0] == "answer" and events[-1][1]["answer"] == "answer to q3"
    not_json = client.post("/api/ask", content=json.dumps({"videos": ["x"], "question": "q"}),
                           headers={"Content-Type": "text/plain"})
    assert not_json.status_code == 415 and "Content-Type: application/json" in not_json.json()["message"]
    empty = client.post("/api/ask", json={"videos": [scripted.toy.name], "question": "   "})
    assert empty.status_code == 400 and empty.json()["error"] == "InvalidRequest"
    invalid = client.post("/api/ask", json={"videos": [], "question": "q"})
    assert invalid.status_code == 422 and invalid.json()["error"] == "InvalidRequest"


# -- 3 and 6. what people read: options by letter, no markup -----------------------------------------------------------
def test_streamed_steps_name_options_by_letter_and_show_no_markup(scripted, served):
    client, _ = served
    toy = client.post("/api/videos", json={"path": str(scripted.text)}).json()["video_id"]
    events = stream(client, {"videos": [toy], "question": "What is being drawn?",
                             "choices": ["a car", "a house", "a guitar"]})
    steps = [data for name, data in events if name == "step"]
    final = next(step for step in steps if step["type"] == "final_answer")
    assert final["display"].startswith("C. a guitar")
    assert all("<video_text>" not in step["display"] and "<video_text>" not in step["summary"] for step in steps)
    assert any("“" in step["display"] for step in steps if step["type"] == "observation")  # quoted, not tagged
    answer = events[-1][1]
    assert answer["option"] == "C" and answer["choice_index"] == 2
    assert all("<video_text>" not in item["text"] and not item["text"].startswith("[") for item in answer["evidence"])


# -- 4. a truncated video ----------------------------------------------------------------------------------------------
def test_a_truncated_upload_is_refused_with_what_is_missing(served):
    client, service = served
    data = video_path("github_sam2/01_dog.mp4").read_bytes()[:300_000]
    refused = client.post("/api/videos/upload", params={"filename": "dog.mp4"}, content=data)
    assert refused.status_code == 415 and "cut short: its video data ends at 0.97 s" in refused.json()["message"]
    assert not [p for p in service.config.uploads.rglob("*") if p.is_file()]  # nothing kept


# -- 5. uploads and removal ---------------------------------------------------------------------------------------------
def segment_rows(service, video_id: str) -> int:
    import sqlite3

    with sqlite3.connect(service.config.settings.library_path) as conn:
        return conn.execute("SELECT COUNT(*) FROM segments WHERE video_id=?", (video_id,)).fetchone()[0]


def test_a_removed_folder_video_loses_its_memory_but_not_its_file(scripted, served):
    client, service = served
    clip = scripted.text
    entry = client.post("/api/videos", json={"path": str(clip)}).json()
    assert segment_rows(service, entry["video_id"]) > 0
    assert client.delete(f"/api/videos/{entry['video_id']}", headers={"Origin": "https://evil.example"}).status_code \
        == 403
    removed = client.delete(f"/api/videos/{entry['video_id']}")
    assert removed.status_code == 200 and removed.json() == {"video_id": entry["video_id"], "name": "text.mp4",
                                                             "removed": True, "file_removed": False}
    assert segment_rows(service, entry["video_id"]) == 0 and clip.is_file()
    assert client.get(f"/api/videos/{entry['video_id']}").status_code == 404
    assert not next(f for f in client.get("/api/files").json()["files"] if f["path"] == str(clip))["registered"]
    assert client.delete(f"/api/videos/{entry['video_id']}").status_code == 404


def test_an_upload_keeps_its_name_and_goes_with_its_memory(scripted, tmp_path):
    """Uploads were listed by content hash, and nothing could be removed (DELETE was 405)."""
    home = copy_home(scripted.home, tmp_path / "home")
    with running_server(home, home / "models", [], tagged_llm(), perception=scripted_perception()) as (server, service), \
            httpx.Client(base_url=server.url, timeout=120) as client:
        data = scripted.toy.read_bytes()  # the library already holds its memory
        uploaded = client.post("/api/videos/upload", params={"filename": "Tablet drawing (take 2).mp4"},
                               content=data, headers={"Content-Type": "video/mp4"}).json()
        assert uploaded["name"] == "Tablet drawing (take 2).mp4" and uploaded["stages"]
        assert [v["name"] for v in client.get("/api/videos").json()["videos"]] == ["Tablet drawing (take 2).mp4"]
        kept = service.config.uploads / uploaded["video_id"] / "Tablet drawing (take 2).mp4"
        assert kept.read_bytes() == data and segment_rows(service, uploaded["video_id"]) == 3
        removed = client.delete(f"/api/videos/{uploaded['video_id']}").json()
        assert removed["file_removed"] and not kept.exists() and not kept.parent.exists()
        assert segment_rows(service, uploaded["video_id"]) == 0
        assert client.get("/api/videos").json()["videos"] == []
