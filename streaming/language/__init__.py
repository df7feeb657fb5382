"""Vision-language models: providers by name (OpenAI-compatible, Anthropic, Gemini) behind one
``describe(prompt) -> answer``, and the pure reading of their answers (``decoding``)."""

from .answers import Answer, Prompt, ProviderError, ProviderRefused, ProviderUnavailable, Usage
from .providers import Providers, Target

__all__ = [
    "Answer",
    "Prompt",
    "ProviderError",
    "ProviderRefused",
    "ProviderUnavailable",
    "Providers",
    "Target",
    "Usage",
]
