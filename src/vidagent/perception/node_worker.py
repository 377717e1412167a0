"""Models run by TensorFlow.js in a long-lived Node.js worker (``perception/node/*_worker.mjs``): the
offline vision models as published, the reference their ONNX conversions (``vidagent.perception.tfjs_graph``,
what vidagent runs) are tested and benchmarked against.

``NodeWorker`` is one worker process: started with its command, it answers one JSON line per
request on stdout, read here with a timeout. ``NodeModel`` is what every model run that way shares:
the check that its files are installed, a worker started on first use (and again after one died),
``close()``, the context manager, the finalizer that stops the worker when the model is collected,
and the pipelined request loop. A model (``CenterNetNodeDetector``, ``MoveNetNodePose``, ``SelfieNodeSegmenter``) keeps only what is
its own: the worker script, its model files, how it encodes a request and reads a reply.

Every worker reads the same request framing (``node/tfjs_runtime.mjs``): ASCII magic (4 bytes, one
per worker kind), uint32 LE width, uint32 LE height, float32 LE parameter (its meaning is the
worker's), then width*height*3 bytes of RGB. ``NodeModel._request`` writes it.

The Node packages live in ``models_dir/node`` (``NODE_DIR_NAME``), marked complete by
``NODE_MARKER`` once ``vidagent.perception.node_assets.install_detector_assets`` has installed them.
"""

from __future__ import annotations

import json
import logging
import os
import select
import shutil
import subprocess
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, ClassVar, NoReturn, Self, Sequence, TypeVar

import numpy as np

from vidagent.errors import ModelUnavailableError

log = logging.getLogger(__name__)

NODE_DIR_NAME = "node"
NODE_MARKER = ".vidagent-complete"
NODE_MIN_MAJOR = 18
#: The Node files shipped with vidagent: the worker scripts, package.json and its lock.
PACKAGED_NODE_DIR = Path(__file__).resolve().parent / "node"

T = TypeVar("T")


def find_tool(name: str) -> str:
    """The path of ``name`` (``node``, ``npm``) on PATH, or ``ModelUnavailableError`` saying how to get it."""
    path = shutil.which(name)
    if path is None:
        raise ModelUnavailableError(
            f"the offline object detector and pose model need Node.js {NODE_MIN_MAJOR}+ with npm, but `{name}` "
            "is not on PATH; install Node.js (e.g. `apt-get install nodejs npm`) and retry")
    return path


def rgb_image(image: np.ndarray) -> np.ndarray:
    """``image`` as the RGB ``uint8`` (H, W, 3) array a worker request carries (``ValueError`` otherwise)."""
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3 or image.shape[0] < 1 or image.shape[1] < 1:
        raise ValueError(f"expected an RGB image of shape (H, W, 3), got {image.shape}")
    if image.dtype != np.uint8:
        image = np.clip(image, 0, 255).astype(np.uint8)
    return image


# --------------------------------------------------------------------------- one worker process


class NodeWorker:
    """A Node worker subprocess plus a line reader with a timeout over its stdout.

    ``label`` names the worker in error messages ("detector worker", "pose worker").
    """

    def __init__(self, cmd: list[str], cwd: Path, start_timeout_s: float, *, label: str) -> None:
        self.label = label
        self._stderr: IO[bytes] = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self._stderr)
        except OSError as exc:
            self._stderr.close()
            raise ModelUnavailableError(f"cannot start the {label} ({cmd[0]}): {exc}") from exc
        self._buffer = b""
        self.info = self.read_json(start_timeout_s)
        if not self.info.get("ready"):
            self.fail(f"unexpected first message from the {label}: {self.info}")

    def stderr_tail(self, limit: int = 3000) -> str:
        try:
            self._stderr.seek(0)
            return self._stderr.read().decode("utf-8", "replace").strip()[-limit:]
        except (OSError, ValueError):
            return ""

    def fail(self, message: str) -> NoReturn:
        """Stop the worker and raise ``ModelUnavailableError`` with its stderr."""
        self.close(timeout_s=2.0)
        tail = self.stderr_tail()
        raise ModelUnavailableError(f"{message} (exit code {self.proc.returncode})"
                                    + (f"\nworker stderr:\n{tail}" if tail else ""))

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.fail(f"the {self.label} died")

    def read_json(self, timeout_s: float) -> dict:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.fail(f"the {self.label} did not answer within {timeout_s:.0f} s")
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                self.fail(f"the {self.label} exited")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            self.fail(f"the {self.label} wrote a malformed line: {line[:200]!r}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self, timeout_s: float = 5.0) -> None:
        shutdown(self.proc, timeout_s)


def shutdown(proc: subprocess.Popen, timeout_s: float = 5.0) -> None:
    """Close stdin (the worker exits on EOF), then kill it if it lingers."""
    if proc.poll() is None:
        try:
            if proc.stdin:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for stream in (proc.stdin, proc.stdout):
        try:
            if stream:
                stream.close()
        except OSError:
            pass


# --------------------------------------------------------------------------- a model in a worker


@dataclass
class WorkerTimings:
    """Cumulative time a ``NodeModel`` spent per stage; subclasses count what one request carries."""

    startup_s: float = 0.0  # starting Node + loading the model (+ one warm-up run)
    prepare_s: float = 0.0  # Python: preparing the requests and reading the replies
    model_s: float = 0.0  # Node: tensor creation + model.execute, as timed by the worker
    wall_s: float = 0.0  # calls minus worker startup: preparation, transfer, inference

    def count(self, n: int) -> None:
        """Add ``n`` served requests (frames, persons) to the subclass's counter."""
        raise NotImplementedError

    def _per_item_ms(self, n: int) -> dict[str, float]:
        n = max(n, 1)
        return {"prepare_ms": 1000 * self.prepare_s / n, "model_ms": 1000 * self.model_s / n,
                "wall_ms": 1000 * self.wall_s / n}


class NodeModel:
    """A model run in one long-lived Node worker; subclasses set the class attributes below.

    The worker starts on first use (``worker_info`` or a subclass's call of ``_run``) and serves
    every later request; ``close()``, the context manager or garbage collection stop it, and a
    worker that died is reported once and replaced on the next call. Thread-safe: calls take turns
    on the one worker.
    """

    #: The worker script's file name under ``perception/node``.
    script: ClassVar[str]
    #: The 4-byte request magic that worker checks.
    magic: ClassVar[bytes]
    #: The folder of ``models_dir`` with the model's files, their names, and which is the model.json.
    model_dir_name: ClassVar[str]
    model_files: ClassVar[Sequence[str]]
    model_json: ClassVar[str]
    #: For error messages: what the model is, how to install it, the worker's name, what a request carries.
    what: ClassVar[str]
    install_hint: ClassVar[str]
    label: ClassVar[str]
    item: ClassVar[str]

    timings: WorkerTimings

    def __init__(self, models_dir: Path, *, node: str | None, start_timeout_s: float) -> None:
        self.models_dir = Path(models_dir).expanduser()
        self.start_timeout_s = start_timeout_s
        self._node = node
        self._worker: NodeWorker | None = None
        self._finalizer: weakref.finalize | None = None
        self._lock = threading.Lock()  # one request stream per worker: callers take turns
        model_dir = self.models_dir / self.model_dir_name
        missing = [n for n in self.model_files if not (model_dir / n).is_file()]
        if missing or not (self.models_dir / NODE_DIR_NAME / NODE_MARKER).is_file():
            raise ModelUnavailableError(f"the {self.what} is not installed in {self.models_dir}: run "
                                        f"{self.install_hint}")

    # -- worker lifecycle

    @property
    def worker_info(self) -> dict:
        """The worker's startup message (backend, threads, input size, load time); starts it."""
        with self._lock:
            return self._ensure_worker().info

    def _ensure_worker(self) -> NodeWorker:
        if self._worker is not None:
            if self._worker.alive():
                return self._worker
            dead = self._worker
            self.close()  # the next call starts a fresh worker
            dead.fail(f"the {self.label} exited unexpectedly; the next call will start a new one")
        node = self._node or find_tool("node")
        cmd = [node, str(PACKAGED_NODE_DIR / self.script), str(self.models_dir / NODE_DIR_NAME),
               str(self.models_dir / self.model_dir_name / self.model_json)]
        started = time.perf_counter()
        worker = NodeWorker(cmd, self.models_dir, self.start_timeout_s, label=self.label)
        self.timings.startup_s += time.perf_counter() - started
        log.debug("%s started: %s", self.label, worker.info)
        self._worker = worker
        self._finalizer = weakref.finalize(self, shutdown, worker.proc)
        return worker

    def close(self) -> None:
        """Stop the Node worker (a later call starts a new one)."""
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._worker = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests

    def _request(self, image: np.ndarray, param: float = 0.0) -> bytes:
        """One framed request: the header, then the RGB bytes of ``image`` (H, W, 3) uint8."""
        height, width = image.shape[:2]
        header = self.magic + np.array([width, height], "<u4").tobytes() + np.array([param], "<f4").tobytes()
        return header + np.ascontiguousarray(image).tobytes()

    def _run(self, count: int, encode: Callable[[int, int], bytes], decode: Callable[[int, dict], T],
             timeout_s: float) -> list[T]:
        """Serve ``count`` requests in order: ``encode(i, input_size)`` makes request ``i`` (the
        worker's square input side comes from its startup message) and ``decode(i, reply)`` reads its
        answer. Request ``i + 1`` is sent before answer ``i`` is read, so Python prepares one while
        the worker runs the other. A worker that fails on a request, or a call that stops half-way,
        leaves no worker behind for the next call to reuse. No requests, no worker started."""
        if not count:
            return []
        with self._lock:
            worker = self._ensure_worker()
            size = int(worker.info["input"])
            start = time.perf_counter()
            results: list[T] = []

            def send(i: int) -> None:
                t = time.perf_counter()
                request = encode(i, size)
                self.timings.prepare_s += time.perf_counter() - t
                worker.write(request)

            try:
                send(0)
                for i in range(count):
                    if i + 1 < count:
                        send(i + 1)  # the worker reads it while we wait for answer i
                    reply = worker.read_json(timeout_s)
                    if "error" in reply:
                        worker.fail(f"the {self.label} failed on a {self.item}: {reply['error']}")
                    t = time.perf_counter()
                    results.append(decode(i, reply))
                    self.timings.prepare_s += time.perf_counter() - t
                    self.timings.model_s += float(reply.get("ms", 0.0)) / 1000
            except BaseException:
                self.close()  # requests may be half sent or answers unread: never reuse this worker
                raise
            self.timings.count(count)
            self.timings.wall_s += time.perf_counter() - start
            return results
