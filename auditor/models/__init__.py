"""Packaged models: registry, one-time preparation into a cache, and identity for runs."""

from auditor.models.prepare import (
    PreparedModel,
    list_models,
    models_dir,
    prepare_model,
    resolve_model,
    weights_sha256,
)
from auditor.models.registry import PACKAGED_MODELS, PackagedModel, get_packaged_model

__all__ = [
    "PACKAGED_MODELS",
    "PackagedModel",
    "PreparedModel",
    "get_packaged_model",
    "list_models",
    "models_dir",
    "prepare_model",
    "resolve_model",
    "weights_sha256",
]
