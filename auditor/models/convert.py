"""GGUF -> Hugging Face folder (bf16 safetensors) that vLLM loads; the only torch importer here.

vLLM 0.32 has no GGUF loader on CPU, so the packaged GGUFs are dequantized once with
transformers' GGUF utilities. `save_pretrained` of a GGUF-loaded model fails in transformers
5.x, so the state dict is saved directly. Run as a subprocess (`python -m
auditor.models.convert GGUF OUT`) so the ~2-3x model size of peak memory is returned to the
system before an engine starts.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def _parse_once() -> None:
    """One GGUF reader per file for this process. transformers opens a new `GGUFReader` for
    the config, the weights and the tokenizer, and each parses the whole metadata again (a
    Qwen vocabulary of 151k tokens: ~9 s a time on these 2-core machines, 3 of the 0.5B's
    ~50 s). A reader only reads (its tensors are views of a read-only memory map)."""
    import gguf

    opened: dict[tuple[str, str], Any] = {}
    reader_class = gguf.GGUFReader

    def reader(path: Any, mode: Any = "r") -> Any:
        key = (os.path.realpath(path), mode)
        if key not in opened:
            opened[key] = reader_class(path, mode)
        return opened[key]

    gguf.GGUFReader = reader  # type: ignore[assignment,misc]


def convert_gguf(gguf: Path, out: Path) -> dict[str, object]:
    """Write config, tokenizer (with chat template), generation config and weights to `out`."""
    _parse_once()
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    folder, name = str(gguf.parent), gguf.name
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    loaded = load_gguf_checkpoint(
        str(gguf), return_tensors=True, model_to_load=skeleton, torch_dtype=torch.bfloat16
    )
    tensors = {key: value.contiguous() for key, value in loaded["tensors"].items()}
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    tokenizer.save_pretrained(out)
    generation = GenerationConfig.from_model_config(config)
    generation.save_pretrained(out)
    return {
        "architecture": type(skeleton).__name__,
        "tensors": len(tensors),
        "tie_word_embeddings": bool(getattr(config, "tie_word_embeddings", False)),
        "eos_token_id": generation.eos_token_id,
        "has_chat_template": bool(tokenizer.chat_template),
    }


if __name__ == "__main__":
    summary = convert_gguf(Path(sys.argv[1]), Path(sys.argv[2]))
    print(json.dumps(summary))
