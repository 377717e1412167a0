"""Run a `vidagent eval` through llama.cpp's own OpenAI-compatible server serving a GGUF file (the embedded model's
by default), to set the endpoint path beside the embedded one on the same model and questions.

    flock /tmp/vidagent-llm.lock .venv/bin/python bench/endpoint_eval.py [--model qwen2.5-1.5b] -- EVAL ARGS...

Starts ``xllamacpp.Server`` on a free loopback port (the test suite's ``tests/llama_server.py``), prints what
vidagent's probe found there (``vidagent.llm.probe``), runs ``vidagent eval EVAL ARGS --base-url URL`` and stops the
server. Compare the run with the same eval made embedded using ``bench/answer_speed.py`` and each run's report.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from llama_server import serving  # noqa: E402

from vidagent.config import Settings  # noqa: E402
from vidagent.llm.client import resolve_local_model  # noqa: E402
from vidagent.llm.openai_compat import OpenAICompatibleBackend  # noqa: E402
from vidagent.llm.probe import CapabilityCache  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-1.5b", help="a local model name or a .gguf path")
    parser.add_argument("--context", type=int, default=4096, help="the server's context length (tokens)")
    parser.add_argument("eval_args", nargs=argparse.REMAINDER, help="-- then the arguments of `vidagent eval`")
    args = parser.parse_args()
    settings = Settings.from_env()
    path = resolve_local_model(args.model, settings.models_dir)
    rest = [a for a in args.eval_args if a != "--"] if args.eval_args[:1] == ["--"] else args.eval_args
    with serving(path, context_tokens=args.context) as base_url:
        backend = OpenAICompatibleBackend(base_url, args.model, capabilities_cache=CapabilityCache(settings.endpoints_path))
        print(f"probe of llama.cpp's server ({path.name}): {backend.capabilities.summary()}", flush=True)
        backend.close()
        command = [sys.executable, "-m", "vidagent.cli", "eval", *rest, "--base-url", base_url, "--model", args.model]
        evaluation = subprocess.Popen(command)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the server and the eval end together
        try:
            code = evaluation.wait()
        finally:
            if evaluation.poll() is None:
                evaluation.terminate()
                evaluation.wait()
    raise SystemExit(code)


if __name__ == "__main__":
    main()
