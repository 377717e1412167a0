"""The documentation: the site builds with warnings as errors, and every shell snippet marked runnable runs.

A snippet is marked by the line ``<!-- runnable -->`` (needs no model: the fast tier) or ``<!-- runnable: models -->``
(runs the real models on the shared clips: the models tier) right before its ```` ```bash ```` fence, in README.md or
any page under docs/. It runs in bash from the repository's root with a fresh vidagent home; it must exit 0, and the
README's first question must answer what the README says it answers.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MARKED = re.compile(r"<!-- runnable(?P<models>: models)? -->\n```bash\n(?P<body>.*?)\n```", re.DOTALL)


def snippets(models: bool) -> list[tuple[str, str]]:
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for match in MARKED.finditer(page.read_text()):
            if bool(match.group("models")) == models:
                found.append((str(page.relative_to(ROOT)), match.group("body")))
    return found


def run_snippet(body: str, home: Path, models_dir: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "VIDAGENT_HOME": str(home), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    if models_dir is not None:
        env["VIDAGENT_MODELS"] = str(models_dir)
    body = body.replace("source .venv/bin/activate", f"source {Path(sys.executable).parent}/activate")
    return subprocess.run(["bash", "-e", "-c", body], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mkdocs is not installed (the dev extra installs it)")
    result = subprocess.run([str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "-d", str(tmp_path / "site")],
                            cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stderr
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "vidagent search" in cli and "--library" in cli  # rendered from the parser
    assert "ask_library" in (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    assert "Search your library" in (tmp_path / "site" / "index.html").read_text()  # the README is the home page


def test_every_runnable_snippet_without_models_runs(tmp_path):
    found = snippets(models=False)
    assert found, "no snippet is marked runnable"
    for page, body in found:
        result = run_snippet(body, tmp_path / "home")
        assert result.returncode == 0, f"{page}:\n{body}\n{result.stderr}"


@pytest.mark.models
@pytest.mark.clips
def test_the_readme_first_question_answers_what_it_says(tmp_path, models_dir):
    found = snippets(models=True)
    assert [page for page, _ in found].count("README.md") == 1
    for page, body in found:
        result = run_snippet(body, tmp_path / "home", models_dir)
        assert result.returncode == 0, f"{page}:\n{body}\n{result.stderr}"
        if page == "README.md":
            answer = next(line for line in result.stdout.splitlines() if line.startswith("Answer:"))
            assert "shutterstock" in answer.lower(), result.stdout


def test_every_face_reads_the_one_description_of_the_default_planner():
    from vidagent.agent.planner import default_description
    from vidagent.cli import build_parser
    from vidagent.prompts import prompt
    from vidagent.server.schemas import AskBody

    described = default_description()
    assert "caption_only" in described and "react with an endpoint" in described
    ask = next(sub for action in build_parser()._actions if hasattr(action, "choices") and action.choices
               and "ask" in action.choices for sub in [action.choices["ask"]])
    help_text = " ".join(ask.format_help().split())
    assert described in help_text and "answered by --planner react" not in help_text
    mcp = prompt("vidagent.server", "mcp_ask_video").render(planners="react", default=described)
    assert described in mcp
    assert described in AskBody.model_fields["planner"].description
