"""kill -9 of a real ``vidagent serve`` process during its jobs: after each kill the library holds no
half-written stage, and after a restart the same requests give what an uninterrupted run gives.

Kill points: an index job killed at several moments of its build (after a progress event and a delay,
so kills fall inside a stage and between stages; each restart resumes what the last one left), and a question killed while its model call is under way (the chat model is the
fault-injecting server of tests/fault_llm.py, which answers every question by its tag)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from vidagent.memory.store import Library
from vidagent.video.video import Video

from conftest import TEMPORAL_TEXT, video_path
from fault_llm import Fault, FaultServer
from serve_helpers import TAG

# (progress events seen, then seconds waited) before each kill: inside the frames stage, past it, later on
KILL_POINTS = ((3, 0.6), (3, 1.2), (2, 2.0), (4, 0.1))
TABLES = ("frames", "text_in_frame", "speech", "segments", "clips")


def tagged(messages: list[dict]) -> str:
    text = "\n".join(str(m.get("content")) for m in messages)
    if "Does answering it need" in str(messages[-1].get("content")):
        return "no"
    tag = TAG.search(text)
    return f"Thought: the memory says so\nFinal Answer: answer to {tag.group(1) if tag else 'nothing'}"


@contextmanager
def serving(home: Path, models: Path, folder: Path, llm_url: str) -> Iterator[tuple[subprocess.Popen, str]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "VIDAGENT_HOME": str(home), "VIDAGENT_MODELS": str(models)}
    command = [sys.executable, "-m", "vidagent.cli", "serve", "--port", str(port), "--videos", str(folder),
               "--base-url", llm_url, "--model", "fault", "--no-cache", "-q"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{url}/api/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                time.sleep(0.1)
        yield process, url
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


def register(url: str, path: Path) -> str:
    response = httpx.post(f"{url}/api/videos", json={"path": str(path)}, timeout=30)
    assert response.status_code == 201, response.text
    return response.json()["video_id"]


def assert_nothing_half_written(library_path: Path, video_id: str) -> None:
    with Library(library_path) as library:
        built = {row[0] for row in library.rows("SELECT stage FROM stages WHERE video_id=?", (video_id,))}
        for stage, tables in {"frames": ("frames", "text_in_frame"), "speech": ("speech",),
                              "segments": ("segments", "clips")}.items():
            if stage not in built:
                for table in tables:
                    assert library.count_rows(table, video_id) == 0, (stage, table)


def memory_rows(library_path: Path, video_id: str) -> dict[str, list]:
    with Library(library_path) as library:
        return {table: library.rows(f"SELECT * FROM {table} WHERE video_id=? ORDER BY 2, 3", (video_id,))
                for table in TABLES}


@pytest.fixture()
def llm_server() -> Iterator[FaultServer]:
    with FaultServer(tagged) as server:
        yield server


@pytest.mark.models
def test_index_and_ask_jobs_killed_mid_way_resume_to_an_uninterrupted_result(tmp_path, models_dir, llm_server):
    from vidagent.perception.node_assets import detector_assets_installed

    if not detector_assets_installed(models_dir):
        pytest.skip("offline models are not installed")
    clip = video_path(TEMPORAL_TEXT)
    home, reference = tmp_path / "home", tmp_path / "reference"
    video_id = Video(clip).content_hash
    for stop_after, delay in KILL_POINTS:
        with serving(home, models_dir, clip.parent, llm_server.base_url) as (process, url):
            assert register(url, clip) == video_id
            job = httpx.post(f"{url}/api/videos/{video_id}/index", json={"stages": ["segments"]}, timeout=30).json()
            if job["state"] == "done":
                break
            events = 0
            with httpx.stream("GET", f"{url}/api/jobs/{job['job_id']}/events", timeout=60) as stream:
                for line in stream.iter_lines():
                    events += line.startswith("event:")
                    if events >= stop_after or "event: done" in line:
                        break
            time.sleep(delay)  # where the kill falls is what the test ranges over, not a timed assertion
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
        assert_nothing_half_written(home / "library.sqlite", video_id)

    with serving(home, models_dir, clip.parent, llm_server.base_url) as (process, url):
        register(url, clip)
        job = httpx.post(f"{url}/api/videos/{video_id}/index", json={"stages": ["segments"]}, timeout=30).json()
        while job["state"] not in ("done", "failed"):
            time.sleep(0.2)
            job = httpx.get(f"{url}/api/jobs/{job['job_id']}", timeout=30).json()
        assert job["state"] == "done", job
        # a question killed while the model is thinking (the model server holds the reply)
        llm_server.push(Fault("hang", seconds=60))
        question = {"videos": [video_id], "question": "[q7] What is shown?"}
        with httpx.stream("POST", f"{url}/api/ask/stream", json=question, timeout=60) as stream:
            # the stream is read (a client that leaves stops its question; one that stops reading holds its steps)
            # until the model call is under way: react's first steps (its overview) call no model
            for _ in stream.iter_lines():
                if llm_server.requests:
                    break
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
    assert_nothing_half_written(home / "library.sqlite", video_id)

    with serving(home, models_dir, clip.parent, llm_server.base_url) as (process, url):
        register(url, clip)
        again = httpx.post(f"{url}/api/ask", json=question, timeout=120)
    with serving(reference, models_dir, clip.parent, llm_server.base_url) as (process, url):
        register(url, clip)
        uninterrupted = httpx.post(f"{url}/api/ask", json=question, timeout=120)
    assert again.status_code == uninterrupted.status_code == 200, again.text
    assert again.json()["answer"] == uninterrupted.json()["answer"] == "answer to q7"
    assert memory_rows(home / "library.sqlite", video_id) == memory_rows(reference / "library.sqlite", video_id)
    with Library(home / "library.sqlite") as library:
        assert library.count_rows("stage_checkpoints", video_id) == 0  # no checkpoint left behind
