"""Settings: where vidagent keeps its files and which models it uses.

Everything is explicit: a ``Settings`` object is built once (from defaults, environment
variables or arguments) and passed down. Nothing reads the environment after that.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import platformdirs

from vidagent.errors import VidagentError

LOCAL_MODELS = ("qwen2.5-1.5b", "qwen2.5-0.5b", "smollm2-135m")


@dataclass(frozen=True)
class LLMSettings:
    """Which chat model answers.

    ``backend="local"`` runs an embedded GGUF model (``model`` is one of ``LOCAL_MODELS`` or a
    path to a .gguf file); ``backend="openai"`` talks to any OpenAI-compatible endpoint.
    """

    backend: str = "local"
    model: str = "qwen2.5-1.5b"
    base_url: str | None = None
    api_key: str | None = None
    temperature: float = 0.0
    timeout_s: float = 120.0
    context_tokens: int = 4096
    threads: int | None = None
    cache: bool = True


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


@dataclass(frozen=True)
class BackendSettings:
    """Which perception backends replace the offline defaults: ``None`` keeps the default, a spec
    such as ``hf:Salesforce/blip-image-captioning-base`` or ``hf:PekingU/rtdetr_r50vd?threshold=0.4``
    selects a Hugging Face model (see ``vidagent.perception.hf``)."""

    captioner: str | None = None  # frame descriptions (default: detector + OCR describer)
    vqa: str | None = None  # visual_question_answering (default: a vision endpoint, else described frames)
    detector: str | None = None  # objects stage and describer (default: CenterNet COCO)
    appearance: str | None = None  # re-ID features (default: colour histograms); e.g. "hf" = CLIP+DINOv2
    grounding: str | None = None  # PEIL's object_detect/region_ground by query (default: none, COCO labels)
    video_classifier: str | None = None  # actions of people by a Kinetics video classifier (default: none)
    # objects' masks (default: the offline person model + GrabCut); "grabcut" (GrabCut for all), "hf" = SAM, "none"
    segmenter: str | None = None


# Backends added after evaluation runs were kept: named in a run's identity only when set, so the runs made
# before each existed (without it) keep their digest.
LATER_BACKENDS = frozenset({"video_classifier", "segmenter"})


@dataclass(frozen=True)
class ToolShapes:
    """How much each tool reads and shows the model: settings, not constants, because answers depend
    on them (they are part of an evaluation run's identity)."""

    caption_lines: int = 15  # caption_retrieval: descriptions shown at once (a wider range is skimmed evenly)
    localized_segments: int = 5  # segment_localization: the best-matching segments listed
    snippet_words: int = 40  # segment_localization: words of each listed description
    vqa_frames_per_second: float = 1.0  # visual_question_answering: frames looked at per second of its window
    frame_max_side: int = 768  # the frames tools look at, resized to at most this many pixels a side
    frame_tool_fps: float = 2.0  # frame_description, frame_question_answering (and TraveLER's windows)
    frame_tool_max_frames: int = 8  # ... and the most frames one call looks at
    module_lines: int = 15  # AssistGPT's modules: narration, subtitle and on-screen text lines shown at once
    reason_chars: int = 6000  # narration or speech a reasoning module reads (evenly spread beyond it)
    history_chars: int = 3000  # earlier results knowledge_reason reads (the latest kept)
    sql_rows: int = 20  # rows of an SQL result shown to the model
    candidate_objects: int = 5  # object_memory_querying: objects found by description, offered to the SQL writer
    vision_frames: int = 8  # frames sent at once to a vision chat model
    observation_chars: int = 2400  # a tool's output in the conversation is cut to this many characters


@dataclass(frozen=True)
class Settings:
    """Top-level configuration."""

    home: Path = field(default_factory=lambda: Path(platformdirs.user_cache_dir("vidagent")))
    llm: LLMSettings = field(default_factory=LLMSettings)
    backends: BackendSettings = field(default_factory=BackendSettings)
    segment_seconds: float = 2.0
    frames_per_segment: int = 1
    object_fps: float = 2.0  # frames per second the objects stage detects and tracks in
    # Node workers of the offline detector (it runs on one thread each); 0: one per CPU core.
    detector_workers: int = 0
    # Sampled frames that look the same as the last frame a stage ran its models on reuse that
    # frame's results (see vidagent.video.change); False runs the models on every sampled frame.
    reuse_near_duplicates: bool = True
    # Less model work per indexed second (issue 28): OCR reads only the frames a pixel test finds text-like
    # lines in (vidagent.perception.text_screen; False: every described frame). With detector_follows_change
    # the objects stage's detector runs once a second instead of at object_fps where the picture stays still,
    # the frames between reusing its result (vidagent.video.change.SparseRate; only with
    # reuse_near_duplicates). Off by default: it saved 3 % of the detector's frames on the shared clips and
    # lost a briefly seen object on a reserved one (bench/less_work.py).
    screen_text: bool = True
    detector_follows_change: bool = False
    # Extra offline perception feeding the frame and segment descriptions (PERCEPTION_SOURCES):
    # "imagenet" (ImageNet-1k labels of frames and object crops), "pose" (body pose words for people),
    # "motion" (camera motion, scene cuts). Off by default until measured; see README.
    perception: frozenset[str] = frozenset()
    # MEMORY_SELECTIONS: "tools" (no model call: the object memory is built when a tool first reads it; issue 42:
    # the selection call cost 9-22 s a question), "llm" (the model says per question whether it is built ahead,
    # DoraemonGPT's task-related selection), "all" (always built ahead)
    memory_selection: str = "tools"
    tools: ToolShapes = field(default_factory=ToolShapes)  # how much each tool reads and shows
    # Memory across questions (DigimonGPT): which memories are replayed and kept, "none", "semantic",
    # "procedural" or "all"; and whose they are ("" the user's; an evaluation run keeps its own).
    # Off by default: with the offline 1.5B model the validation rejected every answer on dev (nothing
    # to replay, one more model call per question); turn it on with a model that validates reliably.
    experience: str = "none"
    experience_scope: str = ""
    # The check (issue 23): after the planner answers, the model re-reads the evidence the answer cites and
    # says which of it supports the answer; an answer none of it supports abstains (its guess kept).
    # Off by default, as measured (README, "The check"): with the embedded 1.5B model it separates right from
    # wrong answers only a little (kept 44 % right, abstained 36 %, 100 NExT-QA react answers) for two more calls.
    check: bool = False
    # Whose PEIL's example bank (AssistGPT's Learner) is: None, the same as experience_scope; a taught
    # evaluation run ("" here) keeps its examples in the user's bank while its other memories stay its own.
    examples_scope: str | None = None
    models: Path | None = None  # default: <home>/models
    library: Path | None = None  # default: <home>/library.sqlite
    # Knowledge a question may be given (DoraemonGPT's knowledge tools): the largest file read into
    # tables or passages, and the SearxNG-style JSON search endpoint of the web search ("": none).
    knowledge_max_mib: int = 256
    web_search: str = ""
    # A question on a video not indexed yet and at least this long (seconds) is answered from a glance by default
    # (vidagent.memory.glance), its memory completed after; 0: always index it whole first (issue 43, README).
    glance_after_s: float = 120.0
    # The API keys of the vision models named in ``backends`` (role -> key: ``VIDAGENT_CAPTIONER_API_KEY``,
    # ``VIDAGENT_VQA_API_KEY``); a role without one uses the LLM's key. Never part of a run's identity.
    backend_api_keys: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    # Vision models' replies are kept by their frames, model and instruction (``VIDAGENT_VISION_CACHE=0``: not).
    vision_cache: bool = True

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
    def knowledge_dir(self) -> Path:
        """Where knowledge files become tables and passages (cached by content)."""
        return self.home / "knowledge"

    @property
    def llm_cache_path(self) -> Path:
        return self.home / "llm-cache.sqlite"

    @property
    def artifacts_dir(self) -> Path:
        """Where the utility tools, commands and server write the clips, edited videos and frames they
        make (named by content): beside the library, in its folder's ``artifacts``."""
        return self.library_path.parent / "artifacts"

    def answer_settings(self) -> dict[str, object]:
        """The settings that can change an answer, as plain JSON values (an evaluation run's identity):
        the chat model and its sampling and context, how the memory is cut and perceived, and which
        backends perceive it. Not where files live, timeouts, threads, workers or caching, which change
        only speed. A new setting that changes answers belongs here. The check appears only when on, so
        that runs made before it existed (unchecked) keep their digest."""
        return {**({"check": True} if self.check else {}),
            "llm": {"backend": self.llm.backend, "model": self.llm.model, "temperature": self.llm.temperature,
                    "context_tokens": self.llm.context_tokens},
            "backends": {key: value for key, value in sorted(vars(self.backends).items())
                         if value is not None or key not in LATER_BACKENDS},
            "segment_seconds": self.segment_seconds, "frames_per_segment": self.frames_per_segment,
            "object_fps": self.object_fps, "reuse_near_duplicates": self.reuse_near_duplicates,
            **({"screen_text": True} if self.screen_text else {}),
            **({"detector_follows_change": True} if self.detector_follows_change else {}),
            "perception": sorted(self.perception), "memory_selection": self.memory_selection,
            "tools": asdict(self.tools),
        }

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
    def from_env(cls, environ: dict[str, str] | None = None) -> "Settings":
        """Defaults overridden by ``VIDAGENT_*`` variables.

        ``VIDAGENT_HOME``: cache/library folder; ``VIDAGENT_MODELS``, ``VIDAGENT_LIBRARY``: override the
        models folder and the library database file. ``VIDAGENT_LLM_BASE_URL`` (selects the OpenAI-compatible
        backend), ``VIDAGENT_LLM_MODEL``, ``VIDAGENT_LLM_API_KEY`` (falls back to ``OPENAI_API_KEY``),
        ``VIDAGENT_LLM_TIMEOUT``, ``VIDAGENT_LLM_CACHE`` (``0`` disables the response cache),
        ``VIDAGENT_LLM_THREADS`` (CPU threads of the embedded model; default all CPUs).
        ``VIDAGENT_DETECTOR_WORKERS``: Node workers of the offline detector (0: one per core);
        ``VIDAGENT_REUSE_FRAMES=0`` runs the frame models on near-duplicate frames too;
        ``VIDAGENT_SCREEN_TEXT=0`` runs OCR on every described frame; ``VIDAGENT_FOLLOW_CHANGE=1`` runs the
        detector once a second where nothing moves.
        ``VIDAGENT_PERCEPTION``: extra offline perception, comma-separated ``imagenet,pose,motion``
        (``all`` or ``none`` too).
        ``VIDAGENT_EXPERIENCE``: memory across questions (``none``, ``semantic``, ``procedural``, ``all``).
        ``VIDAGENT_CHECK=1``: answers are checked against the evidence they cite (``0``: not).
        ``VIDAGENT_MEMORY_SELECTION``: ``llm`` (the model says per question whether the object memory is
        built ahead) or ``all`` (always, for planners whose tools read it).
        ``VIDAGENT_CAPTIONER``, ``VIDAGENT_VQA``, ``VIDAGENT_DETECTOR``, ``VIDAGENT_APPEARANCE``,
        ``VIDAGENT_GROUNDING`` (an open-vocabulary detector, e.g. ``hf`` = Grounding DINO),
        ``VIDAGENT_VIDEO_CLASSIFIER`` (people's actions, e.g. ``hf`` = VideoMAE on Kinetics),
        ``VIDAGENT_SEGMENTER`` (objects' masks: ``hf`` = SAM, ``grabcut``, or ``none`` for no masks): backend specs.
        ``VIDAGENT_CAPTIONER`` and ``VIDAGENT_VQA`` also take a vision chat model, ``openai:MODEL?base_url=URL`` or
        ``gguf:MODEL.gguf?mmproj=PROJECTOR.gguf``; ``VIDAGENT_CAPTIONER_API_KEY``/``VIDAGENT_VQA_API_KEY`` are their
        keys (else the LLM's); ``VIDAGENT_VISION_CACHE=0`` stops keeping their replies.
        ``VIDAGENT_GLANCE_AFTER``: seconds from which a video not indexed yet is answered from a glance by default
        (0: never). ``VIDAGENT_WEB_SEARCH``: a SearxNG-style JSON search endpoint (``--knowledge web`` searches it);
        ``VIDAGENT_KNOWLEDGE_MAX_MIB``: the largest knowledge file read (default 256).
        """
        env = os.environ if environ is None else environ
        settings = cls()
        if env.get("VIDAGENT_HOME"):
            settings = replace(settings, home=Path(env["VIDAGENT_HOME"]).expanduser())
        if env.get("VIDAGENT_MODELS"):
            settings = replace(settings, models=Path(env["VIDAGENT_MODELS"]).expanduser())
        if env.get("VIDAGENT_LIBRARY"):
            settings = replace(settings, library=Path(env["VIDAGENT_LIBRARY"]).expanduser())
        if env.get("VIDAGENT_EXPERIENCE"):
            settings = replace(settings, experience=env["VIDAGENT_EXPERIENCE"].strip().lower())
        if env.get("VIDAGENT_CHECK") in ("0", "1"):
            settings = replace(settings, check=env["VIDAGENT_CHECK"] == "1")
        if env.get("VIDAGENT_MEMORY_SELECTION"):
            settings = replace(settings, memory_selection=parse_memory_selection(env["VIDAGENT_MEMORY_SELECTION"]))
        if "VIDAGENT_PERCEPTION" in env:
            settings = replace(settings, perception=parse_perception(env["VIDAGENT_PERCEPTION"]))
        if env.get("VIDAGENT_DETECTOR_WORKERS"):
            settings = replace(settings, detector_workers=max(0, int(env["VIDAGENT_DETECTOR_WORKERS"])))
        if env.get("VIDAGENT_REUSE_FRAMES") == "0":
            settings = replace(settings, reuse_near_duplicates=False)
        if env.get("VIDAGENT_SCREEN_TEXT") in ("0", "1"):
            settings = replace(settings, screen_text=env["VIDAGENT_SCREEN_TEXT"] == "1")
        if env.get("VIDAGENT_FOLLOW_CHANGE") in ("0", "1"):
            settings = replace(settings, detector_follows_change=env["VIDAGENT_FOLLOW_CHANGE"] == "1")
        if env.get("VIDAGENT_WEB_SEARCH"):
            settings = replace(settings, web_search=env["VIDAGENT_WEB_SEARCH"].strip())
        if env.get("VIDAGENT_GLANCE_AFTER"):
            settings = replace(settings, glance_after_s=max(0.0, float(env["VIDAGENT_GLANCE_AFTER"])))
        if env.get("VIDAGENT_KNOWLEDGE_MAX_MIB"):
            settings = replace(settings, knowledge_max_mib=max(1, int(env["VIDAGENT_KNOWLEDGE_MAX_MIB"])))
        llm = settings.llm
        base_url = env.get("VIDAGENT_LLM_BASE_URL")
        if base_url:
            llm = replace(llm, backend="openai", base_url=base_url,
                          api_key=env.get("VIDAGENT_LLM_API_KEY") or env.get("OPENAI_API_KEY"))
        if env.get("VIDAGENT_LLM_MODEL"):
            llm = replace(llm, model=env["VIDAGENT_LLM_MODEL"])
        if env.get("VIDAGENT_LLM_TIMEOUT"):
            llm = replace(llm, timeout_s=float(env["VIDAGENT_LLM_TIMEOUT"]))
        if env.get("VIDAGENT_LLM_THREADS"):
            llm = replace(llm, threads=max(1, int(env["VIDAGENT_LLM_THREADS"])))
        if env.get("VIDAGENT_LLM_CACHE") == "0":
            llm = replace(llm, cache=False)
        roles = ("captioner", "vqa", "detector", "appearance", "grounding", "video_classifier", "segmenter")
        backends = BackendSettings(**{role: env.get(f"VIDAGENT_{role.upper()}") or None for role in roles})
        keys = tuple((role, env[f"VIDAGENT_{role.upper()}_API_KEY"]) for role in ("captioner", "vqa")
                     if env.get(f"VIDAGENT_{role.upper()}_API_KEY"))
        if env.get("VIDAGENT_VISION_CACHE") == "0":
            settings = replace(settings, vision_cache=False)
        return replace(settings, llm=llm, backends=backends, backend_api_keys=keys)
