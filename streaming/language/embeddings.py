"""Text embeddings (OpenAI's ``/embeddings``, which Ollama, llama.cpp, vLLM and LM Studio
serve too): what an event's description means, as a unit vector, for search by meaning.
``VISIONSTREAM_VLM_EMBEDDINGS`` names the provider and model; vectors are only ever compared
with vectors of the same model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .answers import ProviderRefused
from .client import ProviderClient

__all__ = ["MAX_DIMENSIONS", "MAX_TEXT_CHARS", "Embedder", "Embedding", "unit"]

MAX_DIMENSIONS = 8192
"""An embedding longer than this is refused (the largest models make 4096)."""
MAX_TEXT_CHARS = 4000
"""What is embedded of a text, at most (a description, or a search's words)."""


@dataclass(frozen=True)
class Embedding:
    """A text's vector, by the model that made it."""

    model: str
    vector: np.ndarray
    """float32, of unit length."""


def unit(values: Any) -> np.ndarray:
    """``values`` as a float32 vector of unit length; refused when empty, too long, not
    finite or zero (a provider may answer anything)."""
    vector = np.asarray(values, dtype=np.float32).reshape(-1)
    if not 0 < vector.size <= MAX_DIMENSIONS:
        raise ValueError(f"an embedding of {vector.size} dimensions (1 to {MAX_DIMENSIONS})")
    norm = float(np.linalg.norm(vector.astype(np.float64)))
    if not np.isfinite(norm) or norm == 0.0:
        raise ValueError("an embedding of zero length, or not finite")
    return (vector / norm).astype(np.float32)


class Embedder:
    """One provider's model that makes vectors; ``embed`` blocks (a worker thread's call)."""

    def __init__(self, client: ProviderClient, model: str | None) -> None:
        self.client = client
        self.model: str = model or client.spec.model or ""
        if not self.model:
            raise ProviderRefused(
                f"VISIONSTREAM_VLM_EMBEDDINGS names provider {client.name!r} and no model, and "
                "the provider names none: write it as provider:model"
            )

    def embed(self, text: str) -> Embedding:
        """``text``'s vector; raises ``ProviderRefused`` / ``ProviderUnavailable``."""
        (values,) = self.client.embed([text[:MAX_TEXT_CHARS]], self.model)
        try:
            return Embedding(self.model, unit(values))
        except (ValueError, TypeError) as exc:
            raise ProviderRefused(f"provider {self.client.name!r} gave {exc}") from None
