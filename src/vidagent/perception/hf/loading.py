"""The one place that loads a Hugging Face model and its processor.

``load_model(source, model_classes, ...)`` takes a hub id (``Salesforce/blip-vqa-base``) or a local
folder written by ``save_pretrained`` and returns a ``LoadedModel``: the model in eval mode on its
device and dtype, its processor, and a helper that moves processor outputs onto that device.

* **Lazy imports.** torch and transformers are imported on first load, so the rest of vidagent works
  without them (the ``hf`` extra). Missing packages become a ``ModelUnavailableError``.
* **Device and dtype.** ``device="auto"`` is CUDA when torch sees a GPU, else the CPU;
  ``dtype="auto"`` is bfloat16 on GPUs that support it (float16 on older ones) and float32 on the CPU,
  where half precision is slow or unsupported.
* **Offline.** A local folder is always opened with ``local_files_only``; a hub id too when
  ``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE`` is set (then only the local cache is read) or when the
  caller asks. Without either, huggingface_hub downloads into its cache (and, with no network, retries
  for ~25 s before failing: set ``HF_HUB_OFFLINE=1`` on machines without one).
* **One-line errors.** Weights not found, no network, an unsupported architecture or a missing optional
  package all become a ``ModelUnavailableError`` that names the model, its role and how to get it.
* **Model class.** Callers list transformers auto classes in order of preference; the first whose
  mapping knows the checkpoint's ``model_type`` loads it (BLIP: ``AutoModelForVisualQuestionAnswering``
  picks the VQA head, ``AutoModelForImageTextToText`` the captioning head).

Torch threads are left as torch sets them (one per physical core); set ``torch.set_num_threads``
yourself to share a small machine with other work.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generic, Mapping, Sequence, TypeVar

from vidagent.errors import ModelUnavailableError

DEVICES = ("auto", "cpu", "cuda", "mps")
DTYPES = ("auto", "float32", "float16", "bfloat16")
_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
_INSTALL_HINT = "install the Hugging Face backends with: pip install 'vidagent[hf]'"


@dataclass(frozen=True)
class LoadOptions:
    """How to load a model. ``local_files_only=None`` follows ``HF_HUB_OFFLINE`` (and is always true
    for a local folder); ``revision`` pins a hub branch, tag or commit."""

    device: str = "auto"
    dtype: str = "auto"
    local_files_only: bool | None = None
    revision: str | None = None

    def __post_init__(self) -> None:
        if self.device not in DEVICES and not self.device.startswith("cuda:"):
            raise ModelUnavailableError(f"unknown device {self.device!r}: use one of {', '.join(DEVICES)} or cuda:N")
        if self.dtype not in DTYPES:
            raise ModelUnavailableError(f"unknown dtype {self.dtype!r}: use one of {', '.join(DTYPES)}")


@dataclass(frozen=True)
class LoadedModel:
    """A model ready for inference: eval mode, on ``device`` in ``dtype``, with its processor."""

    source: str
    role: str
    model: Any  # transformers.PreTrainedModel
    processor: Any  # a transformers processor, image processor or tokenizer
    device: Any  # torch.device
    dtype: Any  # torch.dtype

    def to_device(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        """Processor outputs ready for the model: every tensor (also inside lists, tuples and dicts) on
        the model's device; floating ones (pixels, box coordinates) in the model's dtype, integer and
        boolean ones (token ids, masks, sizes) in their own. Other values are kept as they are."""
        torch = require_torch()
        return {key: _placed(torch, value, self.device, self.dtype) for key, value in batch.items()}

    def encode(self, **processor_kwargs: Any) -> dict[str, Any]:
        """The processor's outputs for ``processor_kwargs``, on the model's device (``to_device``)."""
        return self.to_device(self.processor(**processor_kwargs))


def require_torch() -> Any:
    """The ``torch`` module, or a ``ModelUnavailableError`` saying how to install it."""
    try:
        import torch
    except ImportError as error:
        raise ModelUnavailableError(f"torch is not installed ({error}); {_INSTALL_HINT}") from error
    return torch


def require_transformers() -> Any:
    """The ``transformers`` module, or a ``ModelUnavailableError`` saying how to install it."""
    require_torch()
    try:
        import transformers
    except ImportError as error:
        raise ModelUnavailableError(f"transformers is not installed ({error}); {_INSTALL_HINT}") from error
    return transformers


def is_local_source(source: str) -> bool:
    """Whether ``source`` names a folder rather than a hub id (an existing path, or one spelled as a path)."""
    return source.startswith(("/", "./", "../", "~", ".\\", "..\\")) or Path(source).expanduser().is_dir()


def offline_mode() -> bool:
    """Whether the environment forbids hub downloads (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE``)."""
    return any(os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on") for name in _OFFLINE_VARIABLES)


def resolve_device(device: str = "auto") -> Any:
    """The ``torch.device`` for a device name; ``auto`` is CUDA when available, else the CPU."""
    torch = require_torch()
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelUnavailableError(f"device {device!r} was asked for but torch sees no CUDA GPU")
    return torch.device(device)


def resolve_dtype(dtype: str, device: Any) -> Any:
    """The ``torch.dtype`` for a dtype name; ``auto``: bfloat16/float16 on a GPU, float32 elsewhere."""
    torch = require_torch()
    if dtype != "auto":
        return getattr(torch, dtype)
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def load_config(source: str, *, role: str = "model", options: LoadOptions | None = None) -> Any:
    """The checkpoint's ``PretrainedConfig`` (small and quick: decides which model class to load)."""
    options = options or LoadOptions()
    transformers = require_transformers()
    path, kwargs = _location(source, role, options)
    return _guarded(source, role, lambda: transformers.AutoConfig.from_pretrained(path, **kwargs))


def load_model(
    source: str,
    model_classes: Sequence[str],
    *,
    processor_class: str = "AutoProcessor",
    role: str = "model",
    options: LoadOptions | None = None,
) -> LoadedModel:
    """Load a model and its processor from a hub id or a ``save_pretrained`` folder.

    ``model_classes`` are names of transformers auto classes (or concrete classes) tried in order: the
    first that supports the checkpoint's config loads it. ``processor_class`` is ``AutoProcessor``,
    ``AutoImageProcessor`` or ``AutoTokenizer``. ``role`` ("captioner", "detector", ...) only shapes
    error messages. Raises ``ModelUnavailableError`` (one line) when anything is missing.
    """
    options = options or LoadOptions()
    transformers = require_transformers()
    config = load_config(source, role=role, options=options)
    model_class = _pick_class(transformers, model_classes, config, source, role)
    device = resolve_device(options.device)
    dtype = resolve_dtype(options.dtype, device)
    path, kwargs = _location(source, role, options)

    def load() -> tuple[Any, Any]:
        model = model_class.from_pretrained(path, config=config, dtype=dtype, **kwargs)
        processor = getattr(transformers, processor_class).from_pretrained(path, **kwargs)
        return model, processor

    model, processor = _guarded(source, role, load)
    model.to(device)
    model.eval()
    model.requires_grad_(False)
    return LoadedModel(source=source, role=role, model=model, processor=processor, device=device, dtype=dtype)


def inference() -> Any:
    """A context manager for running models: ``torch.inference_mode()`` (no autograd bookkeeping)."""
    return require_torch().inference_mode()


T = TypeVar("T")


class LazyModel(Generic[T]):
    """Builds a value (a ``LoadedModel`` or a pair of them) on first use, once, under a lock.

    Backends hold one of these so that constructing them is free and a session that never needs a
    model never loads it; ``get()`` is safe to call from several threads.
    """

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._value: T | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        if self._value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._build()
        return self._value

    @property
    def loaded(self) -> bool:
        return self._value is not None


class LazyBackend:
    """What every Hugging Face backend starts with: the model, load options, a batch size, its name
    (the spec string memory caches key on) and a model loaded on first use."""

    def __init__(self, model: str, *, batch_size: int, options: LoadOptions | None, name: str,
                 model_classes: Sequence[str], role: str, processor_class: str = "AutoProcessor") -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.model = model
        self.batch_size = batch_size
        self.options = options or LoadOptions()
        self.name = name
        self._loaded: LazyModel[LoadedModel] = LazyModel(
            lambda: load_model(model, tuple(model_classes), processor_class=processor_class, role=role,
                               options=self.options)
        )

    def load(self) -> None:
        """Load the model now instead of on first use (``ModelUnavailableError`` if it cannot be)."""
        self._loaded.get()


# -- internals ------------------------------------------------------------------------------------


def _placed(torch: Any, value: Any, device: Any, dtype: Any) -> Any:
    """``value`` with its tensors on ``device``; floating tensors cast to ``dtype``, others keep theirs."""
    if isinstance(value, torch.Tensor):
        return value.to(device, dtype=dtype if value.is_floating_point() else None)
    if isinstance(value, list):
        return [_placed(torch, item, device, dtype) for item in value]
    if isinstance(value, tuple):
        return tuple(_placed(torch, item, device, dtype) for item in value)
    if isinstance(value, Mapping):
        return {key: _placed(torch, item, device, dtype) for key, item in value.items()}
    return value


def _location(source: str, role: str, options: LoadOptions) -> tuple[str, dict[str, Any]]:
    """Where to load from and the ``from_pretrained`` keyword arguments for it."""
    if not source or not source.strip():
        raise ModelUnavailableError(f"no {role} model given: pass a Hugging Face hub id or a local folder")
    kwargs: dict[str, Any] = {}
    if options.revision:
        kwargs["revision"] = options.revision
    if is_local_source(source):
        path = Path(source).expanduser()
        if not path.is_dir():
            raise ModelUnavailableError(
                f"{role} model folder {path} does not exist: pass a folder written by save_pretrained "
                "(or a Hugging Face hub id)"
            )
        kwargs["local_files_only"] = True
        return str(path), kwargs
    local_only = options.local_files_only if options.local_files_only is not None else offline_mode()
    if local_only:
        kwargs["local_files_only"] = True
    return source, kwargs


def _pick_class(transformers: Any, names: Sequence[str], config: Any, source: str, role: str) -> Any:
    for name in names:
        cls = getattr(transformers, name, None)
        if cls is None:
            continue
        mapping = getattr(cls, "_model_mapping", None)
        if mapping is None:  # a concrete model class: it takes configs of its own type
            if isinstance(config, cls.config_class):
                return cls
        elif type(config) in mapping:
            return cls
    model_type = getattr(config, "model_type", "?")
    raise ModelUnavailableError(
        f"{role} model {source!r} is a {model_type!r} model, which vidagent cannot use as a {role} "
        f"(none of {', '.join(names)} supports it): choose another checkpoint"
    )


def _guarded(source: str, role: str, load: Callable[[], T]) -> T:
    """Run a loading step; turn the ways loading fails into a one-line ``ModelUnavailableError``."""
    try:
        return load()
    except ModelUnavailableError:
        raise
    except ImportError as error:
        raise ModelUnavailableError(
            f"{role} model {source!r} needs a package that is not installed: {_first_line(error)}"
        ) from error
    except (OSError, ValueError) as error:  # huggingface_hub's errors are OSError/ValueError subclasses
        raise ModelUnavailableError(f"{role} model {source!r} cannot be loaded: {_explain(error, source)}") from error


def _explain(error: BaseException, source: str) -> str:
    text = str(error)
    lowered = text.lower()
    get_it = (
        f"download it where there is a network (`hf download {source}`) and copy the Hugging Face cache "
        f"(~/.cache/huggingface) here, or pass a local folder written by save_pretrained"
    )
    if "couldn't connect" in lowered or "offline" in lowered or "local cache" in lowered or "cached files" in lowered:
        return f"it is not in the local Hugging Face cache and the hub cannot be reached; {get_it}"
    if "is not a local folder and is not a valid model identifier" in lowered or "repository not found" in lowered:
        return "no such model on the Hugging Face hub (check the id, or log in for a private/gated model)"
    if "gated" in lowered:
        return "the model is gated: accept its licence on huggingface.co and log in (`hf auth login`)"
    if "does not appear to have a file named" in lowered or "no file named" in lowered:
        return f"the model files are incomplete ({_first_line(error)}); {get_it}"
    return _first_line(error)


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    line = text.splitlines()[0].strip()
    return line if len(line) <= 300 else line[:297] + "..."
