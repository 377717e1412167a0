"""The server under many clients at once, on loopback, with a scripted chat model that answers each
question by its tag (tests/serve_helpers.py): every request is answered with its own answer or
refused clearly as busy, nothing is lost or mixed, and what the server holds stays bounded.

Throughput and memory over time are measured by bench/serve_speed.py, not here."""

from __future__ import annotations

import threading
import time
from collections import Counter

import httpx
import pytest

from fakes import scripted_perception
from serve_helpers import copy_home, running_server, tagged_llm

CLIENTS = 24
ROUNDS = 4
MAX_QUEUED = 6


@pytest.fixture(scope="module")
def crowded(scripted, tmp_path_factory):
    home = copy_home(scripted.home, tmp_path_factory.mktemp("load-home"))
    with running_server(home, home / "models", [scripted.toy.parent], tagged_llm(), perception=scripted_perception(),
                        max_queued=MAX_QUEUED) as (server, service):
        with httpx.Client(base_url=server.url, timeout=60) as client:
            ids = [client.post("/api/videos", json={"path": str(path)}).json()["video_id"]
                   for path in (scripted.toy, scripted.text)]
            yield server, service, ids


def test_every_request_of_a_crowd_is_answered_its_own_or_refused_as_busy(crowded):
    server, service, ids = crowded
    outcomes: dict[tuple[int, int], tuple[int, dict]] = {}
    pending_seen: list[int] = []
    start = threading.Barrier(CLIENTS)

    def client(number: int) -> None:
        with httpx.Client(base_url=server.url, timeout=60) as own:
            start.wait()
            for round_ in range(ROUNDS):
                tag = number * 100 + round_
                body = {"videos": [ids[tag % 2]], "question": f"[q{tag}] What is shown?"}
                response = own.post("/api/ask", json=body)
                outcomes[(number, round_)] = (response.status_code, response.json())
                pending_seen.append(service.lane.pending)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads)

    assert len(outcomes) == CLIENTS * ROUNDS  # nothing lost: every request came back
    statuses = Counter(status for status, _ in outcomes.values())
    assert set(statuses) <= {200, 503} and statuses[200] >= CLIENTS  # most were answered
    for (number, round_), (status, body) in outcomes.items():
        tag = number * 100 + round_
        if status == 200:  # its own answer, about its own video: never another client's
            assert body["answer"] == f"answer to q{tag}" and body["question"] == f"[q{tag}] What is shown?"
            assert body["video_id"] == ids[tag % 2]
        else:
            assert body["error"] == "BusyError" and "the server is busy" in body["message"]
    assert max(pending_seen) <= MAX_QUEUED  # the queue never grew past its bound
    deadline = time.monotonic() + 10  # a run is let go just after its answer is handed over
    while (service.lane.pending or service.asks.live) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert service.lane.pending == 0 and service.asks.live == 0  # nothing kept once answered or refused
    with httpx.Client(base_url=server.url, timeout=10) as own:
        assert own.get("/api/health").json()["status"] == "ok"


def test_past_its_bound_the_queue_refuses_at_once_and_the_queued_questions_are_answered(crowded):
    server, service, ids = crowded
    release = threading.Event()
    service.lane.submit(release.wait)  # a long job holds the lane
    answers: dict[int, dict] = {}

    def ask(tag: int) -> None:
        with httpx.Client(base_url=server.url, timeout=60) as own:
            answers[tag] = own.post("/api/ask", json={"videos": [ids[0]], "question": f"[q{tag}] Shown?"}).json()

    waiting = [threading.Thread(target=ask, args=(tag,)) for tag in range(MAX_QUEUED - 1)]
    for thread in waiting:
        thread.start()
    deadline = time.monotonic() + 30
    while service.lane.pending < MAX_QUEUED and time.monotonic() < deadline:
        time.sleep(0.02)
    with httpx.Client(base_url=server.url, timeout=10) as own:
        refused = own.post("/api/ask", json={"videos": [ids[0]], "question": "[q99] One too many?"})
        assert own.get("/api/health").json()["lane_pending"] == MAX_QUEUED
    busy = f"the server is busy: {MAX_QUEUED} jobs are queued or running (at most {MAX_QUEUED}); try again shortly"
    assert refused.status_code == 503 and refused.json() == {"error": "BusyError", "status": 503, "message": busy}
    release.set()
    for thread in waiting:
        thread.join(timeout=60)
    assert {tag: answer["answer"] for tag, answer in answers.items()} == {
        tag: f"answer to q{tag}" for tag in range(MAX_QUEUED - 1)}
