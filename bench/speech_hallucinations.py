"""What Whisper writes over sound without speech, before and after the hallucination filter (issue 42).

    .venv/bin/python bench/speech_hallucinations.py

Runs the offline speech model (``WhisperSpeechToText``, Whisper tiny.en) directly, no LLM, on the
soundtrack of every shared clip that is not reserved (``index_library.RESERVED``: they are kept for
independent evaluation, so nothing here is measured on them) and on ``4.mp3`` (the sound of 4.mp4),
then on constructed non-speech (speech played backwards, noise, a chord, the non-speech clips joined).

"before": the lines the runtime gives (faster-whisper with its VAD at its defaults, as the model ran
before the filter); "after": what ``transcribe`` returns now (``hear`` with VAD_PARAMETERS, then
``said``: ``speech_filter.drop_reason``, repeated lines merged). Each clip is labelled by hand
(``LABELS``: spectrograms looked at, transcripts sampled several times, frames checked), and the check
column says whether a line said in a speech clip was lost or a line survived where nobody speaks. A
second table lists every decoded line with the numbers the filter's thresholds were set on. Lines from
windows whose beam search Whisper rejected are random samples (the backwards probes): they differ from
run to run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from index_library import RESERVED, VIDEOS, shared_clips  # noqa: E402

from vidagent.perception.speech import SAMPLE_RATE, WhisperSpeechToText, said  # noqa: E402
from vidagent.perception.speech_filter import HeardLine, drop_reason, normalise  # noqa: E402
from vidagent.video.video import Video  # noqa: E402

SPEECH, NO_SPEECH = "speech", "no speech"
LABELS: dict[str, tuple[str, str]] = {
    "debian_opencv-doc/box.mp4": (NO_SPEECH, "loud rhythmic noise, no voice harmonics"),
    "debian_opencv-doc/cup.mp4": (NO_SPEECH, "room tone (-39 dBFS)"),
    "github_Video-LLaMA/applausing.mp4": (NO_SPEECH, "applause"),
    "github_Video-LLaMA/boat.mp4": (NO_SPEECH, "wind and water"),
    "github_Video-LLaMA/dog_barking.mp4": (NO_SPEECH, "barking"),
    "github_Video-LLaMA/skateboarding_dog.mp4": (SPEECH, "a narrator over street noise, 0.3-9.1 s"),
    "github_Video-LLaVA/sample_demo_1.mp4": (SPEECH, ("a voice at 1.3-9 s (toddler/adult); words unclear: "
                                                      "sampled transcripts disagree")),
    "github_Video-LLaVA/sample_demo_22.mp4": (NO_SPEECH, "drum kit"),
    "github_VideoAgent/boats.mp4": (NO_SPEECH, "wind and clicks"),
    "github_decord/flipping_a_pancake.mkv": (SPEECH, ("the woman talks at 0-2.7 s before her first toss "
                                                      "(voiced harmonics, mouth moving; 6 of 6 sampled "
                                                      "transcripts: 'Thank you ... my flip')")),
    "github_mmaction2/test.avi": (SPEECH, "make-up tutorial narration"),
    "github_sam2/01_dog.mp4": (NO_SPEECH, "digital silence"),
    "github_sam2/04_coffee.mp4": (NO_SPEECH, "digital silence"),
    "github_LLaMA-Factory/4.mp3": (SPEECH, "'Hello, take a look at what I'm drawing.'"),
}
"""Whether someone speaks in each clip, and how that was told (clips without a soundtrack are listed
as such)."""


def decode(path: Path) -> np.ndarray | None:
    """The soundtrack as 16 kHz mono float32 (``None`` when there is none)."""
    if path.suffix == ".mp3":
        import av

        resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
        chunks: list[np.ndarray] = []
        with av.open(str(path)) as container:
            for frame in container.decode(audio=0):
                chunks += [out.to_ndarray().reshape(-1) for out in resampler.resample(frame)]
        chunks += [out.to_ndarray().reshape(-1) for out in resampler.resample(None)]
        return np.concatenate(chunks)
    return Video(path).audio()


def probes(clips: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Constructed audio in which nobody says anything."""
    rng = np.random.default_rng(0)
    t = np.arange(SAMPLE_RATE * 8) / SAMPLE_RATE
    chord = sum(np.sin(2 * np.pi * f * t) for f in (220, 277, 330, 440)) * 0.05 * (1 + np.sin(np.pi * t))
    out = {
        "white noise -50 dBFS": rng.normal(0, 10 ** (-50 / 20), t.size).astype(np.float32),
        "white noise -30 dBFS": rng.normal(0, 10 ** (-30 / 20), t.size).astype(np.float32),
        "a chord swelling": chord.astype(np.float32),
        "the non-speech clips joined": np.concatenate(
            [a for name, a in clips.items() if LABELS.get(name, ("",))[0] == NO_SPEECH and np.abs(a).max() > 0]),
    }
    for name in ("github_mmaction2/test.avi", "github_LLaMA-Factory/4.mp3", "github_Video-LLaMA/skateboarding_dog.mp4"):
        if name in clips:
            out[f"{Path(name).name} backwards"] = clips[name][::-1].copy()
    return out


def verdicts(stt: WhisperSpeechToText, audio: np.ndarray
             ) -> tuple[list[HeardLine], list[HeardLine], list[str], list[tuple[str, str]]]:
    """(lines before, lines heard with VAD_PARAMETERS, lines after, (line, why it went) for each line
    before that is not after)."""
    before = stt.hear(audio, vad_parameters={})
    heard = stt.hear(audio)
    after = [segment.text for segment in said(heard)]  # what transcribe returns, from the same decode
    kept = {normalise(text) for text in after}
    gone: list[tuple[str, str]] = []
    for line in before:
        if normalise(line.text) in kept:
            continue
        now = next((h for h in heard if normalise(h.text) == normalise(line.text)), None)
        if now is None:
            now = next((h for h in heard if h.start_s < line.end_s and line.start_s < h.end_s), None)
            if now is None:
                gone.append((line.text, "VAD_PARAMETERS: no voice there"))
            else:  # a window decoded by random sampling gives another line on every run
                gone.append((line.text, f"decoded again as “{now.text}”, {drop_reason(now) or 'kept'}"))
        else:
            gone.append((line.text, drop_reason(now) or "merged"))
    return before, heard, after, gone


def check(label: str, after: list[str], gone: list[tuple[str, str]]) -> str:
    """'ok', or what went wrong: a line lost in a speech clip, a line kept where nobody speaks."""
    if label == SPEECH:
        lost = [text for text, why in gone if why != "merged"]
        return "ok" if not lost else "LOST: " + "; ".join(lost)
    if label == NO_SPEECH:
        return "ok" if not after else "KEPT: " + "; ".join(after)
    return ""


def cell(lines: list[str]) -> str:
    return "<br>".join(f"“{text}”" for text in lines) or "—"


def main() -> None:
    stt = WhisperSpeechToText()
    stt.load()
    clips: dict[str, np.ndarray] = {}
    silent: list[str] = []
    for path in shared_clips() + [VIDEOS / "github_LLaMA-Factory" / "4.mp3"]:
        assert path.name not in RESERVED
        audio = decode(path)
        name = str(path.relative_to(VIDEOS))
        if audio is None or audio.size == 0:
            silent.append(name)
        else:
            clips[name] = audio
    details: list[str] = []
    for title, sounds, labels in (
        ("Shared clips (not reserved) with a soundtrack", clips, {k: LABELS.get(k, ("?", "not labelled")) for k in clips}),
        ("Constructed non-speech", probes(clips), None),
    ):
        print(f"## {title}\n")
        print("| clip | speech? | before (runtime) | after (filtered) | dropped: why | check |")
        print("|---|---|---|---|---|---|")
        for name, audio in sounds.items():
            label, how = labels[name] if labels else (NO_SPEECH, "constructed")
            before, heard, after, gone = verdicts(stt, audio)
            dropped = "<br>".join(f"“{text}”: {why}" for text, why in gone) or "—"
            print(f"| {name} | {label} ({how}) | {cell([b.text for b in before])} | {cell(after)} | {dropped} | "
                  f"{check(label, after, gone)} |")
            for line in heard:
                details.append(f"| {name} | {line.start_s:.2f}-{line.end_s:.2f} | “{line.text}” | {line.no_speech_prob:.3f} | "
                               f"{line.avg_logprob:.3f} | {line.compression_ratio:.2f} | {line.temperature:.1f} | {line.peak_dbfs:.1f} | "
                               f"{drop_reason(line) or 'kept'} |")
        print()
    print(f"No soundtrack (nothing to hear): {', '.join(silent)}\n")
    print("## Every line decoded with VAD_PARAMETERS (its window's no-speech p, log-prob, compression, temperature;"
          " the line's peak dBFS)\n")
    print("| audio | s | line | no-speech p | logprob | compression | T | peak dBFS | filter |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(details))


if __name__ == "__main__":
    main()
