"""Benchmark ``vidagent serve``: a real server process (real models, the local LLM) measured from outside.

    .venv/bin/python bench/serve_speed.py [--video PATH] [--clients 8] [--seconds 5] [--home DIR]

Starts ``vidagent serve`` on a free loopback port over a scratch home (or ``--home``), registers the video
and builds its temporal memory, then reports:
- ``GET /api/videos``: requests per second and latency with ``--clients`` concurrent clients;
- time from sending an ask to its first streamed step (the task), and to the first step the model chose,
  for a question the LLM has not seen (nothing cached) and for the same question again (cached), after a
  warm-up question (the server's first, which loads the LLM);
- a cached ask (``POST /api/ask``, the LLM's response cache warm) under ``--clients`` concurrent clients:
  latency per ask and asks per second (questions queue in the model lane, one at a time).
The client runs in this process, the server in its own, on the same CPUs: on a small machine the
client's share of the CPU is part of what is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

VIDEOS = Path(__file__).resolve().parents[2] / "shared" / "data" / "videos"
DEFAULT_VIDEO = VIDEOS / "github_LLaMA-Factory" / "4.mp4"
QUESTION = "What is the person drawing on the tablet?"
WARM_UP = "What is the person holding?"  # asked first, so loading the LLM is not in the other figures
CHOICES = ["a guitar", "a car", "a house", "a cat", "a tree"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(home: Path, video: Path, port: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "vidagent.cli", "--home", str(home), "serve", "--port", str(port),
               "--videos", str(video.parent)]
    env = {**os.environ, "VIDAGENT_MODELS": os.environ.get("VIDAGENT_MODELS", str(default_models()))}
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError(f"the server did not start: {server.stderr.read().decode()[-2000:] if server.stderr else ''}")


def default_models() -> Path:
    from vidagent.config import Settings

    return Settings.from_env().models_dir


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return (f"p50 {statistics.median(ordered) * 1000:.1f} ms, p95 {pick(0.95) * 1000:.1f} ms, "
            f"max {ordered[-1] * 1000:.1f} ms")


async def hammer_list(base: str, clients: int, seconds: float) -> dict[str, Any]:
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    async def client() -> None:
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            while time.perf_counter() < stop:
                started = time.perf_counter()
                response = await http.get("/api/videos")
                response.raise_for_status()
                latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - started
    return {"requests": len(latencies), "per_second": len(latencies) / elapsed, "latency": percentiles(latencies)}


def first_steps(base: str, video_id: str, question: str, planner: str) -> dict[str, float]:
    """Seconds from sending the ask to its first step, to the first step the model chose, and to the answer."""
    times: dict[str, float] = {}
    body = {"videos": [video_id], "question": question, "choices": CHOICES, "planner": planner}
    started = time.perf_counter()
    with httpx.stream("POST", f"{base}/api/ask/stream", json=body, timeout=600) as response:
        name = ""
        for line in response.iter_lines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data = json.loads(line[5:])
                now = time.perf_counter() - started
                if name == "step":
                    times.setdefault("first_step_s", now)
                    if data["type"] in ("tool_call", "final_answer") and not data.get("automatic"):
                        times.setdefault("first_model_step_s", now)
                elif name == "answer":
                    times["answer_s"] = now
                    times["llm_calls"] = data["usage"]["llm_calls"]
                    times["cached_calls"] = data["usage"]["cached_calls"]
                elif name == "error":
                    raise RuntimeError(data["message"])
    return times


async def cached_asks(base: str, video_id: str, clients: int, per_client: int, planner: str) -> dict[str, Any]:
    latencies: list[float] = []
    body = {"videos": [video_id], "question": QUESTION, "choices": CHOICES, "planner": planner}

    async def client() -> None:
        async with httpx.AsyncClient(base_url=base, timeout=600) as http:
            for _ in range(per_client):
                started = time.perf_counter()
                response = await http.post("/api/ask", json=body)
                response.raise_for_status()
                assert response.json()["usage"]["llm_calls"] == 0  # every model call answered by the cache
                latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - started
    return {"asks": len(latencies), "per_second": len(latencies) / elapsed, "latency": percentiles(latencies)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--video", type=Path, default=DEFAULT_VIDEO)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0, help="how long to request the video list")
    parser.add_argument("--asks-per-client", type=int, default=3)
    parser.add_argument("--planner", default="react", help="planner of the asks (random: no LLM, to check the harness)")
    parser.add_argument("--home", type=Path,
                        help="vidagent home (default: a scratch folder; its LLM cache starts empty)")
    args = parser.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="vidagent-serve-bench-"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(home, args.video.resolve(), port)
    try:
        video_id = httpx.post(f"{base}/api/videos", json={"path": str(args.video.resolve())}).json()["video_id"]
        started = time.perf_counter()
        job = httpx.post(f"{base}/api/videos/{video_id}/index", json={"stages": ["segments"]}).json()
        while httpx.get(f"{base}/api/jobs/{job['job_id']}").json()["state"] not in ("done", "failed"):
            time.sleep(0.2)
        print(f"server on {base}, home {home}; temporal memory of {args.video.name}: "
              f"{time.perf_counter() - started:.1f} s (models loading included)")

        listing = asyncio.run(hammer_list(base, args.clients, args.seconds))
        print(f"GET /api/videos, {args.clients} clients: {listing['per_second']:.0f} requests/s "
              f"({listing['requests']} in {args.seconds:g} s; {listing['latency']})")

        warm = first_steps(base, video_id, WARM_UP, args.planner)
        print(f"first ask of the server (the LLM loads): first step after {warm['first_step_s']:.2f} s, "
              f"answer {warm['answer_s']:.2f} s")
        fresh = first_steps(base, video_id, QUESTION, args.planner)
        print(f"ask, nothing cached: first step after {fresh['first_step_s'] * 1000:.0f} ms, first model step "
              f"{fresh.get('first_model_step_s', float('nan')):.2f} s, answer {fresh['answer_s']:.2f} s "
              f"({fresh['llm_calls']:.0f} LLM calls)")
        again = first_steps(base, video_id, QUESTION, args.planner)
        print(f"ask, cached: first step after {again['first_step_s'] * 1000:.0f} ms, first model step "
              f"{again.get('first_model_step_s', float('nan')) * 1000:.0f} ms, "
              f"answer {again['answer_s'] * 1000:.0f} ms "
              f"({again['cached_calls']:.0f} calls from the cache, {again['llm_calls']:.0f} to the model)")

        asks = asyncio.run(cached_asks(base, video_id, args.clients, args.asks_per_client, args.planner))
        print(f"cached ask, {args.clients} concurrent clients: {asks['per_second']:.1f} asks/s "
              f"({asks['asks']} asks; {asks['latency']})")
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
