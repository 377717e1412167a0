"""Ask while indexing over HTTP: a question with ``glance`` on a video not indexed yet is answered from the
glance, its coverage names the index job that completes the memory behind it, and that job leaves the
full memory (scripted perception and chat model)."""

from __future__ import annotations

import time

import httpx

from vidagent.memory.builder import TEMPORAL_STAGES
from vidagent.video.video import Video

from fakes import scripted_perception, write_clip
from fakes.llm import ScriptedLLM
from serve_helpers import running_server
from test_glance import long_clip


def test_a_glanced_answer_names_the_job_that_completes_its_memory(tmp_path):
    clip = long_clip()
    path = write_clip(clip, tmp_path / "videos")
    llm = ScriptedLLM(["Thought: I now know the final answer\nFinal Answer: a cup"] * 4)
    home = tmp_path / "home"
    with running_server(home, home / "models", [path.parent], llm, perception=scripted_perception(clip)) as (
            server, service), httpx.Client(base_url=server.url, timeout=120) as client:
        video_id = client.post("/api/videos", json={"path": str(path)}).json()["video_id"]
        refused = client.post("/api/ask", json={"videos": [video_id], "question": "What?", "glance": -1})
        assert refused.status_code == 400 and "glance" in refused.json()["message"]
        answer = client.post("/api/ask", json={"videos": [video_id], "question": "What is first?", "glance": 10})
        assert answer.status_code == 200, answer.text
        coverage = answer.json()["artifacts"]["coverage"][video_id]
        assert coverage["text"].startswith("answered from 0:00-1:00 sampled every 10 s")
        job_id = coverage["completion_job"]
        listed = {v["video_id"]: v for v in client.get("/api/videos").json()["videos"]}
        assert "segments" not in listed[video_id]["stages"] or client.get(f"/api/jobs/{job_id}").json()["state"] == "done"
        for _ in range(600):
            job = client.get(f"/api/jobs/{job_id}").json()
            if job["state"] in ("done", "failed"):
                break
            time.sleep(0.05)
        assert job["state"] == "done", job
        assert not service.session.builder().missing_stages(Video(path), TEMPORAL_STAGES)
        again = client.post("/api/ask", json={"videos": [video_id], "question": "What is first?", "glance": 10})
        assert "coverage" not in again.json()["artifacts"]  # the full memory now
