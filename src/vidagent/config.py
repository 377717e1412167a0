"""Settings: where vidagent keeps its files and which models it uses.

Everything is explicit: a ``Settings`` object is built once (from defaults, environment
variables or arguments) and passed down. Nothing reads the environment after that.

Each setting is declared once, with ``setting(...)``: its default, the environment variable that sets it and
how that variable's text is read, and whether it can change an answer (then it is part of an evaluation run's
identity, ``Settings.answer_settings``). ``Settings.from_env`` reads every declared variable in one loop;
the identity is derived from the same declarations.
"""

from __future__ import annotations

import os
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

import platformdirs

from vidagent.errors import VidagentError
from vidagent.redaction import redact_url

LOCAL_MODELS = ("qwen2.5-1.5b", "qwen2.5-0.5b", "smollm2-135m")
LLM_BACKENDS = ("local", "openai")

Declared = TypeVar("Declared")
Parse = Callable[[str], Any]  # a variable's text -> the setting's value, or UNSET to keep the default
UNSET: Any = object()
_ALWAYS: Any = object()  # ``before`` of a setting that is named in a run's identity whatever its value


def setting(default: Any = MISSING, env: str | tuple[str, ...] = (), parse: Parse | None = None, *,
            answers: bool = True, before: Any = _ALWAYS, factory: Callable[[], Any] | None = None,
            implies: Mapping[str, Any] | None = None, read_when: tuple[str, Any] | None = None,
            read: Callable[[Mapping[str, str]], Any] | None = None, repr: bool = True) -> Any:
    """A declared setting (a dataclass field).

    ``env``: the environment variable(s) that set it (the first one set is read; ``parse`` turns its text into
    the value, the text as it is by default, an empty text keeping the default); ``read`` reads several at once
    instead. ``implies``: the settings beside it that its variable sets too. ``read_when=(name, value)``: read
    only when the setting ``name`` beside it has ``value``. ``answers``: whether it can change an evaluation's
    answers (then it is in the run's identity). ``before``: the value runs made before the setting existed had:
    the identity names it only when it differs, so those runs keep their digest."""
    names = (env,) if isinstance(env, str) else env
    metadata = {"env": names, "parse": parse or _text, "answers": answers, "before": before,
                "implies": dict(implies or {}), "read_when": read_when, "read": read}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata, repr=repr)
    return field(default=default, metadata=metadata, repr=repr)


def group(kind: Callable[[], Any], *, answers: bool = True) -> Any:
    """A group of settings (a frozen dataclass of its own declared settings)."""
    return field(default_factory=kind, metadata={"group": True, "answers": answers})


def _text(raw: str) -> Any:
    return raw or UNSET


def _stripped(raw: str) -> Any:
    return raw.strip() or UNSET


def _lowered(raw: str) -> Any:
    return raw.strip().lower() or UNSET


def _path(raw: str) -> Any:
    return Path(raw).expanduser() if raw else UNSET


def _switch(raw: str) -> Any:
    """``1`` on, ``0`` off; anything else keeps the default."""
    return {"0": False, "1": True}.get(raw, UNSET)


def _off(raw: str) -> Any:
    """``0`` off; anything else keeps the default."""
    return False if raw == "0" else UNSET


def _number(kind: Callable[[str], float]) -> Parse:
    return lambda raw: kind(raw) if raw else UNSET


def _at_least(kind: Callable[[str], float], low: float) -> Parse:
    """A number, raised to ``low`` when below it."""
    return lambda raw: max(low, kind(raw)) if raw else UNSET


def _positive(kind: Callable[[str], float]) -> Parse:
    """A number above 0."""
    def parse(raw: str) -> Any:
        if not raw.strip():
            return UNSET
        value = kind(raw)
        if value <= 0:
            raise VidagentError(f"must be above 0, not {raw!r}")
        return value
    return parse


def _choice(choices: tuple[str, ...]) -> Parse:
    def parse(raw: str) -> Any:
        value = raw.strip().lower()
        if value and value not in choices:
            raise VidagentError(f"choose from {', '.join(choices)}, not {raw!r}")
        return value or UNSET
    return parse


@dataclass(frozen=True)
class LLMSettings:
    """Which chat model answers.

    ``backend="local"`` runs an embedded GGUF model (``model`` is one of ``LOCAL_MODELS`` or a
    path to a .gguf file); ``backend="openai"`` talks to any OpenAI-compatible endpoint.
    """

    backend: str = setting("local", "VIDAGENT_LLM_BACKEND", _choice(LLM_BACKENDS))
    model: str = setting("qwen2.5-1.5b", "VIDAGENT_LLM_MODEL")
    # An endpoint's address selects the OpenAI-compatible backend; its key is read with it.
    base_url: str | None = setting(None, "VIDAGENT_LLM_BASE_URL", answers=False, implies={"backend": "openai"})
    api_key: str | None = setting(None, ("VIDAGENT_LLM_API_KEY", "OPENAI_API_KEY"), answers=False,
                                  read_when=("backend", "openai"))
    temperature: float = setting(0.0, "VIDAGENT_LLM_TEMPERATURE", _at_least(float, 0.0))
    timeout_s: float = setting(120.0, "VIDAGENT_LLM_TIMEOUT", _number(float), answers=False)
    context_tokens: int = setting(4096, "VIDAGENT_LLM_CONTEXT_TOKENS", _positive(int))
    # CPU threads of the embedded model (None: all CPUs)
    threads: int | None = setting(None, "VIDAGENT_LLM_THREADS", _at_least(int, 1), answers=False)
    cache: bool = setting(True, "VIDAGENT_LLM_CACHE", _off, answers=False)  # ``0``: no response cache
    # ask an endpoint once what it accepts (images, log-probabilities...), kept in ``Settings.endpoints_path``;
    # ``0``: take it as a vision model without log-probabilities, as before the probe (not in a run's identity: what
    # an endpoint accepts is a fact of the endpoint, as its base URL is)
    probe: bool = setting(True, "VIDAGENT_LLM_PROBE", _off, answers=False)


PERCEPTION_SOURCES: tuple[str, ...] = ("imagenet", "pose", "motion")
# Settings.memory_selection: "llm" asks the model per question whether the object memory is needed
# (DoraemonGPT's task-related memory); "all" builds it for every question that may read it.
MEMORY_SELECTIONS: tuple[str, ...] = ("tools", "llm", "all")


def parse_perception(text: str) -> frozenset[str]:
    """The perception sources named in ``text`` (comma-separated; ``all`` or ``none`` too)."""
    names = {part.strip().lower() for part in text.split(",") if part.strip()}
    if names <= {"none", ""}:
        return frozenset()
    if "all" in names:
        return frozenset(PERCEPTION_SOURCES)
    unknown = names - set(PERCEPTION_SOURCES)
    if unknown:
        raise VidagentError(f"unknown perception source(s) {', '.join(sorted(unknown))}; "
                         f"choose from {', '.join(PERCEPTION_SOURCES)}, all or none")
    return frozenset(names)


def parse_memory_selection(text: str) -> str:
    """``tools``, ``llm`` or ``all`` (any case, spaces ignored); anything else is an error naming them."""
    mode = text.strip().lower()
    if mode not in MEMORY_SELECTIONS:
        raise VidagentError(f"memory selection must be one of {', '.join(MEMORY_SELECTIONS)}, not {text!r}")
    return mode


def _memory_selection(raw: str) -> Any:
    return parse_memory_selection(raw) if raw else UNSET


@dataclass(frozen=True)
class BackendSettings:
    """Which perception backends replace the offline defaults: ``None`` keeps the default, a spec
    such as ``hf:Salesforce/blip-image-captioning-base`` or ``hf:PekingU/rtdetr_r50vd?threshold=0.4``
    selects a Hugging Face model (see ``vidagent.perception.hf``). ``VIDAGENT_CAPTIONER`` and ``VIDAGENT_VQA``
    also take a vision chat model, ``openai:MODEL?base_url=URL`` or ``gguf:MODEL.gguf?mmproj=PROJECTOR.gguf``.
    The backends added after evaluation runs were kept are named in a run's identity only when set."""

    # frame descriptions (default: detector + OCR describer)
    captioner: str | None = setting(None, "VIDAGENT_CAPTIONER")
    # visual_question_answering (default: a vision endpoint, else described frames)
    vqa: str | None = setting(None, "VIDAGENT_VQA")
    detector: str | None = setting(None, "VIDAGENT_DETECTOR")  # objects stage and describer (default: CenterNet COCO)
    # re-ID features (default: colour histograms); e.g. "hf" = CLIP+DINOv2
    appearance: str | None = setting(None, "VIDAGENT_APPEARANCE")
    # PEIL's object_detect/region_ground by query (default: none, COCO labels); "hf" = Grounding DINO
    grounding: str | None = setting(None, "VIDAGENT_GROUNDING")
    # actions of people by a Kinetics video classifier (default: none); "hf" = VideoMAE
    video_classifier: str | None = setting(None, "VIDAGENT_VIDEO_CLASSIFIER", before=None)
    # objects' masks (default: the offline person model + GrabCut); "grabcut" (GrabCut for all), "hf" = SAM, "none"
    segmenter: str | None = setting(None, "VIDAGENT_SEGMENTER", before=None)


def _count(default: int, env: str, *, new: bool = False) -> Any:
    """A tool or planner size: a whole number above 0. ``new``: moved here from a module constant after runs
    were kept, so named in a run's identity only when changed."""
    return setting(default, env, _positive(int), before=default if new else _ALWAYS)


def _rate(default: float, env: str) -> Any:
    return setting(default, env, _positive(float))


def _share(default: float, env: str) -> Any:
    """A threshold between 0 and 1, moved here from a module constant (named in a run's identity when changed)."""
    def parse(raw: str) -> Any:
        if not raw.strip():
            return UNSET
        value = float(raw)
        if not 0.0 <= value <= 1.0:
            raise VidagentError(f"{env} must be between 0 and 1, not {raw!r}")
        return value
    return setting(default, env, parse, before=default)


@dataclass(frozen=True)
class ToolShapes:
    """How much each tool, the check and the guards read, keep and show the model: settings, not constants,
    because answers depend on them (they are part of an evaluation run's identity). A planner's own steps are its
    options instead (the fields of its dataclass: ``--planner-option``, listed by ``vidagent settings``)."""

    # caption_retrieval: descriptions shown at once (a wider range is skimmed evenly)
    caption_lines: int = _count(15, "VIDAGENT_CAPTION_LINES")
    localized_segments: int = _count(5, "VIDAGENT_LOCALIZED_SEGMENTS")  # segment_localization: segments listed
    snippet_words: int = _count(40, "VIDAGENT_SNIPPET_WORDS")  # segment_localization: words of each description
    # visual_question_answering: frames looked at per second of its window
    vqa_frames_per_second: float = _rate(1.0, "VIDAGENT_VQA_FPS")
    # the frames tools look at, resized to at most this many pixels a side
    frame_max_side: int = _count(768, "VIDAGENT_FRAME_MAX_SIDE")
    # frame_description, frame_question_answering (and TraveLER's windows)
    frame_tool_fps: float = _rate(2.0, "VIDAGENT_FRAME_TOOL_FPS")
    # ... and the most frames one call looks at
    frame_tool_max_frames: int = _count(8, "VIDAGENT_FRAME_TOOL_MAX_FRAMES")
    # AssistGPT's modules: narration, subtitle and on-screen text lines shown at once
    module_lines: int = _count(15, "VIDAGENT_MODULE_LINES")
    # narration or speech a reasoning module reads (evenly spread beyond it)
    reason_chars: int = _count(6000, "VIDAGENT_REASON_CHARS")
    # earlier results knowledge_reason reads (the latest kept)
    history_chars: int = _count(3000, "VIDAGENT_HISTORY_CHARS")
    sql_rows: int = _count(20, "VIDAGENT_SQL_ROWS")  # rows of an SQL result shown to the model
    # object_memory_querying: objects found by description, offered to the SQL writer
    candidate_objects: int = _count(5, "VIDAGENT_CANDIDATE_OBJECTS")
    vision_frames: int = _count(8, "VIDAGENT_VISION_FRAMES")  # frames sent at once to a vision chat model
    # a tool's output in the conversation is cut to this many characters
    observation_chars: int = _count(2400, "VIDAGENT_OBSERVATION_CHARS")
    # The check (agent.evidence_check): evidence items re-read at most (VideoAgent reads about 8 captions a
    # question; the check reads no more than that again), and the characters of each
    check_spans: int = _count(8, "VIDAGENT_CHECK_SPANS", new=True)
    check_span_chars: int = _count(400, "VIDAGENT_CHECK_SPAN_CHARS", new=True)
    # The guards of the video's text (agent.orders_guard, agent.text_guard): the ordinary text the model is shown
    # when it chooses again
    guard_material_chars: int = _count(3000, "VIDAGENT_GUARD_MATERIAL_CHARS", new=True)
    # AssistGPT's temporal_reason: beginning / middle / end are parts of this many, before / after parts of this many
    absolute_parts: int = _count(5, "VIDAGENT_ABSOLUTE_PARTS", new=True)
    relative_parts: int = _count(8, "VIDAGENT_RELATIVE_PARTS", new=True)
    # AssistGPT's text modules: the least OCR confidence of a piece of text read, and the least similarity of the
    # query to a piece that text_ground takes for a match
    ocr_score: float = _share(0.5, "VIDAGENT_OCR_SCORE")
    text_match: float = _share(0.6, "VIDAGENT_TEXT_MATCH")


def _api_keys(env: Mapping[str, str]) -> Any:
    """The vision models' own API keys: (role, key) for each role whose ``VIDAGENT_<ROLE>_API_KEY`` is set."""
    return tuple((role, env[f"VIDAGENT_{role.upper()}_API_KEY"]) for role in ("captioner", "vqa")
                 if env.get(f"VIDAGENT_{role.upper()}_API_KEY"))


@dataclass(frozen=True)
class Settings:
    """Top-level configuration."""

    home: Path = setting(env="VIDAGENT_HOME", parse=_path, answers=False,  # cache/library folder
                         factory=lambda: Path(platformdirs.user_cache_dir("vidagent")))
    llm: LLMSettings = group(LLMSettings)
    backends: BackendSettings = group(BackendSettings)
    segment_seconds: float = _rate(2.0, "VIDAGENT_SEGMENT_SECONDS")
    frames_per_segment: int = setting(1, "VIDAGENT_FRAMES_PER_SEGMENT", _positive(int))
    object_fps: float = _rate(2.0, "VIDAGENT_OBJECT_FPS")  # frames per second the objects stage detects and tracks in
    # Node workers of the offline detector (it runs on one thread each); 0: one per CPU core.
    detector_workers: int = setting(0, "VIDAGENT_DETECTOR_WORKERS", _at_least(int, 0), answers=False)
    # Sampled frames that look the same as the last frame a stage ran its models on reuse that
    # frame's results (see vidagent.video.change); False (``0``) runs the models on every sampled frame.
    reuse_near_duplicates: bool = setting(True, "VIDAGENT_REUSE_FRAMES", _off)
    # Less model work per indexed second (issue 28): OCR reads only the frames a pixel test finds text-like
    # lines in (vidagent.perception.text_screen; False: every described frame). With detector_follows_change
    # the objects stage's detector runs once a second instead of at object_fps where the picture stays still,
    # the frames between reusing its result (vidagent.video.change.SparseRate; only with
    # reuse_near_duplicates). Off by default: it saved 3 % of the detector's frames on the shared clips and
    # lost a briefly seen object on a reserved one (bench/less_work.py).
    screen_text: bool = setting(True, "VIDAGENT_SCREEN_TEXT", _switch, before=False)
    detector_follows_change: bool = setting(False, "VIDAGENT_FOLLOW_CHANGE", _switch, before=False)
    # Extra offline perception feeding the frame and segment descriptions (PERCEPTION_SOURCES, comma-separated,
    # ``all`` or ``none`` too): "imagenet" (ImageNet-1k labels of frames and object crops), "pose" (body pose words
    # for people), "motion" (camera motion, scene cuts). Off by default until measured; see README.
    perception: frozenset[str] = setting(frozenset(), "VIDAGENT_PERCEPTION", parse_perception)
    # MEMORY_SELECTIONS: "tools" (no model call: the object memory is built when a tool first reads it; issue 42:
    # the selection call cost 9-22 s a question), "llm" (the model says per question whether it is built ahead,
    # DoraemonGPT's task-related selection), "all" (always built ahead)
    memory_selection: str = setting("tools", "VIDAGENT_MEMORY_SELECTION", _memory_selection)
    tools: ToolShapes = group(ToolShapes)  # how much each tool reads and shows
    # Memory across questions (DigimonGPT): which memories are replayed and kept, "none", "semantic",
    # "procedural" or "all"; and whose they are ("" the user's; an evaluation run keeps its own).
    # Off by default: with the offline 1.5B model the validation rejected every answer on dev (nothing
    # to replay, one more model call per question); turn it on with a model that validates reliably.
    # An evaluation run names its experience in its identity itself (eval.runner), not among these.
    experience: str = setting("none", "VIDAGENT_EXPERIENCE", _lowered, answers=False)
    experience_scope: str = setting("", answers=False)
    # The check (issue 23): after the planner answers, the model re-reads the evidence the answer cites and
    # says which of it supports the answer; an answer none of it supports abstains (its guess kept).
    # Off by default, as measured (README, "The check"): with the embedded 1.5B model it separates right from
    # wrong answers only a little (kept 44 % right, abstained 36 %, 100 NExT-QA react answers) for two more calls.
    check: bool = setting(False, "VIDAGENT_CHECK", _switch, before=False)
    # An answer whose confidence is below this abstains, saying so, its best guess kept (issue 51; 0: never).
    min_confidence: float = setting(0.0, "VIDAGENT_MIN_CONFIDENCE", _at_least(float, 0.0), before=0.0)
    # Whose PEIL's example bank (AssistGPT's Learner) is: None, the same as experience_scope; a taught
    # evaluation run ("" here) keeps its examples in the user's bank while its other memories stay its own.
    examples_scope: str | None = setting(None, answers=False)
    models: Path | None = setting(None, "VIDAGENT_MODELS", _path, answers=False)  # default: <home>/models
    library: Path | None = setting(None, "VIDAGENT_LIBRARY", _path, answers=False)  # default: <home>/library.sqlite
    # Knowledge a question may be given (DoraemonGPT's knowledge tools): the largest file read into
    # tables or passages, and the SearxNG-style JSON search endpoint of the web search ("": none).
    # Not in a run's identity: an evaluation attaches no knowledge.
    knowledge_max_mib: int = setting(256, "VIDAGENT_KNOWLEDGE_MAX_MIB", _at_least(int, 1), answers=False)
    web_search: str = setting("", "VIDAGENT_WEB_SEARCH", _stripped, answers=False)
    # A question on a video not indexed yet and at least this long (seconds) is answered from a glance by default
    # (vidagent.memory.glance), its memory completed after; 0: always index it whole first (issue 43, README).
    # Not in a run's identity: an evaluation answers from whole memories.
    glance_after_s: float = setting(120.0, "VIDAGENT_GLANCE_AFTER", _at_least(float, 0.0), answers=False)
    # The API keys of the vision models named in ``backends`` (role -> key: ``VIDAGENT_CAPTIONER_API_KEY``,
    # ``VIDAGENT_VQA_API_KEY``); a role without one uses the LLM's key. Never part of a run's identity.
    backend_api_keys: tuple[tuple[str, str], ...] = setting(
        (), ("VIDAGENT_CAPTIONER_API_KEY", "VIDAGENT_VQA_API_KEY"), read=_api_keys, answers=False, repr=False)
    # Vision models' replies are kept by their frames, model and instruction (``VIDAGENT_VISION_CACHE=0``: not).
    vision_cache: bool = setting(True, "VIDAGENT_VISION_CACHE", _off, answers=False)

    def backend_api_key(self, role: str) -> str | None:
        """The API key of the vision model in ``role``: its own, else the LLM's."""
        return dict(self.backend_api_keys).get(role) or self.llm.api_key

    @property
    def vision_cache_path(self) -> Path | None:
        """Where vision models' replies are kept (None: nowhere)."""
        return self.home / "vision-cache.sqlite" if self.vision_cache else None

    @property
    def models_dir(self) -> Path:
        return self.models or self.home / "models"

    @property
    def library_path(self) -> Path:
        return self.library or self.home / "library.sqlite"

    @property
    def search_index_path(self) -> Path:
        """The library search index: derived from the library, beside it (``library.search.sqlite``)."""
        return self.library_path.with_name(f"{self.library_path.stem}.search.sqlite")

    @property
    def knowledge_dir(self) -> Path:
        """Where knowledge files become tables and passages (cached by content)."""
        return self.home / "knowledge"

    @property
    def llm_cache_path(self) -> Path:
        return self.home / "llm-cache.sqlite"

    @property
    def endpoints_path(self) -> Path:
        """What each OpenAI-compatible endpoint and model was probed to accept (``vidagent.llm.probe``)."""
        return self.home / "endpoints.json"

    @property
    def artifacts_dir(self) -> Path:
        """Where the utility tools, commands and server write the clips, edited videos and frames they
        make (named by content): beside the library, in its folder's ``artifacts``."""
        return self.library_path.parent / "artifacts"

    def answer_settings(self) -> dict[str, object]:
        """The settings that can change an answer, as plain JSON values (an evaluation run's identity): those
        declared ``answers`` (every one not declared otherwise), each group's under its name. Not where files
        live, timeouts, threads, workers or caching, which change only speed. A setting declared with ``before``
        is named only when it differs from that value, so runs made before it existed keep their digest."""
        return _answer_values(self)

    def with_llm(self, **changes: object) -> "Settings":
        return replace(self, llm=replace(self.llm, **changes))

    def with_overrides(self, *, home: str | Path | None = None, base_url: str | None = None,
                       model: str | None = None, api_key: str | None = None,
                       cache: bool | None = None) -> "Settings":
        """These settings with the values a user gave explicitly (e.g. command-line flags).

        ``None`` (or an empty string) keeps the current value. ``home`` moves the vidagent folder
        (``~`` is expanded); ``base_url`` selects the OpenAI-compatible backend at that address;
        ``model`` and ``api_key`` set the chat model and its key; ``cache=False`` stops reusing
        cached LLM responses.
        """
        settings = replace(self, home=Path(home).expanduser()) if home else self
        llm_changes: dict[str, object] = {}
        if base_url:
            llm_changes.update(backend="openai", base_url=base_url)
        if model:
            llm_changes["model"] = model
        if api_key:
            llm_changes["api_key"] = api_key
        if cache is not None:
            llm_changes["cache"] = cache
        return settings.with_llm(**llm_changes) if llm_changes else settings

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        """Defaults overridden by the environment variables the settings declare (``Settings.environment()``
        lists them). ``VIDAGENT_LLM_BASE_URL`` selects the OpenAI-compatible backend, and its key is then read
        from ``VIDAGENT_LLM_API_KEY`` (else ``OPENAI_API_KEY``); switches take ``0`` and ``1``."""
        return _read(cls(), os.environ if environ is None else environ)

    @classmethod
    def environment(cls) -> dict[str, str]:
        """Every environment variable a setting declares -> the setting's dotted name (``llm.model``)."""
        return dict(_declared(cls))

    def described(self) -> list[DeclaredSetting]:
        """Every declared setting with its value here, for a person to read (``vidagent settings``): secrets
        shown as set or not, never their text."""
        return _described(self)


def _read(settings: Declared, env: Mapping[str, str]) -> Declared:
    """``settings`` with each declared setting its environment variable sets (groups' too)."""
    changes: dict[str, Any] = {}
    for declared in fields(settings):  # type: ignore[arg-type]
        meta = declared.metadata
        if meta.get("group"):
            changes[declared.name] = _read(getattr(settings, declared.name), env)
            continue
        when = meta.get("read_when")
        if when and changes.get(when[0], getattr(settings, when[0])) != when[1]:
            continue
        value = _from_env(declared, env)
        if value is not UNSET:
            changes[declared.name] = value
            changes.update(meta["implies"])
    return replace(settings, **changes)  # type: ignore[type-var]


def _from_env(declared: Field[Any], env: Mapping[str, str]) -> Any:
    meta = declared.metadata
    if meta.get("read"):
        return meta["read"](env)
    present = [(name, env[name]) for name in meta.get("env", ()) if name in env]
    if not present:
        return UNSET
    name, raw = next(((name, raw) for name, raw in present if raw), present[0])  # the first one set
    try:
        return meta["parse"](raw)
    except VidagentError as error:
        raise VidagentError(f"{name}: {error}") from None


def _declared(kind: type, prefix: str = "") -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for declared in fields(kind):
        if declared.metadata.get("group"):
            found += _declared(declared.default_factory, f"{prefix}{declared.name}.")  # type: ignore[arg-type]
        else:
            found += [(name, prefix + declared.name) for name in declared.metadata.get("env", ())]
    return found


@dataclass(frozen=True)
class DeclaredSetting:
    """One declared setting as ``vidagent settings`` lists it."""

    name: str  # dotted: ``llm.model``, ``tools.caption_lines``
    variables: tuple[str, ...]  # the environment variables that set it (the first one set is read)
    value: object  # JSON-friendly; a secret is ``"(set)"`` or ``None``
    answers: bool  # whether it can change an answer (then it is in an evaluation run's identity)


_SECRETS = ("api_key", "backend_api_keys")  # shown as set or not


def _described(settings: Any, prefix: str = "", answers: bool = True) -> list[DeclaredSetting]:
    found: list[DeclaredSetting] = []
    for declared in fields(settings):
        meta, value = declared.metadata, getattr(settings, declared.name)
        counts = answers and meta.get("answers", True)
        if meta.get("group"):
            found += _described(value, f"{prefix}{declared.name}.", counts)
            continue
        if declared.name in _SECRETS:
            value = "(set)" if value else None
        found.append(DeclaredSetting(prefix + declared.name, tuple(meta.get("env", ())), _plain(value), counts))
    return found


def _answer_values(settings: Any) -> dict[str, object]:
    values: dict[str, object] = {}
    for declared in fields(settings):
        meta, value = declared.metadata, getattr(settings, declared.name)
        if not meta.get("answers", True):
            continue
        if meta.get("group"):
            values[declared.name] = _answer_values(value)
        elif meta.get("before", _ALWAYS) is _ALWAYS or value != meta["before"]:
            values[declared.name] = _plain(value)
    return values


def _plain(value: object) -> object:
    """A setting's value as a JSON value (a set sorted; an address's credentials hidden, as in
    ``openai:m?base_url=http://***@host/v1``)."""
    if isinstance(value, str):
        return redact_url(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    return value
