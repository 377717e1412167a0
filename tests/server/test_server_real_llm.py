"""The whole stack behind ``vidagent serve``: a real local LLM (llama.cpp) answering over the real memory,
its steps streamed as they are made, and the same question again answered from the LLM's response cache.
The smallest installed model keeps it quick: what is tested is the server's path, not the answer."""

from __future__ import annotations

import json

import httpx
import pytest

from vidagent.models.install import installed_models

from conftest import TEMPORAL_TOY, video_path
from serve_helpers import copy_home, read_sse, running_server

CHOICES = ["a guitar", "a car", "a house", "a cat", "a tree"]
MODEL = "smollm2-135m"


@pytest.mark.slow
def test_a_streamed_ask_with_the_local_llm_then_the_same_ask_from_the_cache(temporal_library, models_dir, tmp_path):
    if MODEL not in installed_models(models_dir):
        pytest.skip(f"the local model {MODEL} is not installed (run `vidagent models install`)")
    home = copy_home(temporal_library, tmp_path / "home")  # its LLM response cache starts empty
    with running_server(home, models_dir, [video_path(TEMPORAL_TOY).parent], llm=None,
                        local_model=MODEL) as (server, service):
        with httpx.Client(base_url=server.url, timeout=600) as client:
            toy = client.post("/api/videos", json={"path": str(video_path(TEMPORAL_TOY))}).json()["video_id"]
            body = {"videos": [toy], "question": "What is the person drawing on the tablet?", "choices": CHOICES,
                    "planner": "react", "options": {"max_steps": 2}}
            with client.stream("POST", "/api/ask/stream", json=body) as response:
                assert response.status_code == 200
                events = [(name, json.loads(data)) for name, data in read_sse(response.iter_lines())]
            names = [name for name, _ in events]
            assert names[:2] == ["queued", "started"] and names[-1] == "answer", events[-1]
            steps = [data for name, data in events if name == "step"]
            answer = events[-1][1]
            assert [s["id"] for s in answer["trace"]] == [s["id"] for s in steps]
            assert steps[0]["type"] == "task" and steps[-1]["type"] == "final_answer"
            assert any(s["completion_tokens"] for s in steps)  # steps the model wrote, with their cost
            assert answer["answer"] and answer["choice_index"] in (None, *range(len(CHOICES)))
            usage = answer["usage"]  # llm_calls: calls the model answered; cached_calls: answered by the cache
            assert usage["llm_calls"] >= 1 and usage["cached_calls"] == 0 and usage["completion_tokens"] > 0

            again = client.post("/api/ask", json=body).json()
            assert again["answer"] == answer["answer"] and again["choice_index"] == answer["choice_index"]
            assert again["usage"]["llm_calls"] == 0 and again["usage"]["cached_calls"] == usage["llm_calls"]
            assert service.lane.pending == 0
