"""llama.cpp's own OpenAI-compatible HTTP server (``xllamacpp.Server``, the runtime vidagent embeds) serving a GGUF
file on a free loopback port: the server a user who outgrows the embedded model runs, for the tests of the endpoint
path. It lives inside the test process, so it cannot outlive it; ``serving`` stops it on the way out and checks
that the port is closed."""

from __future__ import annotations

import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from vidagent.config import Settings
from vidagent.errors import ModelUnavailableError
from vidagent.llm.local import default_threads
from vidagent.models.install import model_path


def installed(name: str, models_dir: Path | None = None) -> Path:
    """The installed local model ``name``'s file; the test skips where it is not installed."""
    folder = models_dir or Settings.from_env().models_dir
    try:
        return model_path(name, folder)
    except ModelUnavailableError:
        pytest.skip(f"model {name} is not installed in {folder}: run `vidagent models install {name}`")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serving(model: Path, *, context_tokens: int = 2048) -> Iterator[str]:
    """``model`` served on 127.0.0.1 until the block ends; yields the API root (``http://127.0.0.1:PORT/v1``)."""
    import xllamacpp

    port = free_port()
    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.n_ctx = context_tokens
    params.n_parallel = 1  # one slot: consecutive requests share its KV cache, as the embedded model's do
    params.cache_prompt = True
    params.verbosity = -1
    params.hostnames = ["127.0.0.1"]
    params.port = port
    threads = default_threads()
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    server = xllamacpp.Server(params)
    root = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(root)
        yield f"{root}/v1"
    finally:
        del server
        _wait_closed(port)


def _wait_healthy(root: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{root}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"llama.cpp's server at {root} did not become healthy in {timeout_s:g}s")
        time.sleep(0.2)


def _wait_closed(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        with socket.socket() as knock:
            if knock.connect_ex(("127.0.0.1", port)) != 0:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"llama.cpp's server on port {port} still answers after it was stopped")
        time.sleep(0.1)
