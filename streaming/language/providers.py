"""The server's providers by name (``VISIONSTREAM_VLM_PROVIDERS``), made when first asked for and
shared by every step and event description, so each provider's concurrency limit holds
server-wide; and how a block's cloud or model family finds its provider."""

from __future__ import annotations

import threading
from concurrent.futures import Executor, ThreadPoolExecutor

from sinks.pinning import Pin

from ..errors import WorkflowCompilationError
from ..settings.language import CLOUDS, ProviderSettings, VlmSettings
from .answers import ProviderRefused
from .anthropic_messages import AnthropicMessages
from .client import ProviderClient, UsageSink
from .embeddings import Embedder
from .gemini import GeminiContent
from .openai_chat import OpenAIChat

__all__ = ["APIS", "Providers", "Target"]

APIS: dict[str, type[ProviderClient]] = {
    "openai": OpenAIChat,
    "anthropic": AnthropicMessages,
    "gemini": GeminiContent,
}
"""Each wire format's module: a new API is one module and one line here."""

ROBOFLOW_KEY_PREFIX = "rf_"
MAX_URLS = 64
"""Distinct ``openai_compatible`` base URLs the server keeps a client for, at most (each a
connection pool): a caller's per-frame URL cannot grow them without bound."""


class Target:
    """A provider and the model a step asks it for (None: the provider's own)."""

    def __init__(self, client: ProviderClient, model: str | None) -> None:
        self.client = client
        self.model = model


class Providers:
    def __init__(
        self,
        settings: VlmSettings,
        *,
        pin: Pin | None,
        usage: UsageSink | None = None,
        executor: ThreadPoolExecutor | None = None,
    ) -> None:
        """``executor``: where live steps ask (default: ``live_threads`` threads of ours,
        made when first needed); given, it is still shut down by ``close``."""
        self._settings = settings
        self._pin = pin
        self._usage = usage
        self._clients: dict[str, ProviderClient] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._executor: ThreadPoolExecutor | None = executor

    def named(self, name: str) -> ProviderClient:
        spec = self._settings.providers.get(name)
        if spec is None:
            known = ", ".join(sorted(self._settings.providers)) or "none"
            raise ProviderRefused(
                f"no provider named {name!r} (VISIONSTREAM_VLM_PROVIDERS names: {known})"
            )
        return self._client(name, spec)

    def cloud(self, cloud: str, step: str, api_key: str | None) -> ProviderClient:
        """The provider a cloud block (``open_ai``, ``anthropic_claude``, ``google_gemini``,
        ``openrouter``) asks: the one configured under the cloud's name, else the cloud's
        own service with the step's key; neither is a 400 naming the setting. Keys are the
        caller's: ``Prompt.api_key`` carries the step's."""
        if cloud in self._settings.providers:
            return self.named(cloud)
        if api_key and api_key.startswith(ROBOFLOW_KEY_PREFIX):
            raise WorkflowCompilationError(
                f"step '{step}': its api_key is a Roboflow key (rf_...), for Roboflow's proxy to "
                f"{cloud}; this server proxies nothing: give the step your own {cloud} key, "
                f"or configure a provider '{cloud}' in VISIONSTREAM_VLM_PROVIDERS"
            )
        if not api_key:
            raise WorkflowCompilationError(
                f"step '{step}' asks {cloud} with no api_key, and VISIONSTREAM_VLM_PROVIDERS "
                f"names no provider '{cloud}': give the step a key, or configure that provider"
            )
        api, url = CLOUDS[cloud]
        return self._client(f"{cloud}-cloud", ProviderSettings(api=api, base_url=url))

    def at(self, base_url: str) -> ProviderClient:
        """An OpenAI-compatible server a step names by URL (``openai_compatible``): one client
        per URL, rationed as a named provider is, its every connection checked by the pin."""
        spec = ProviderSettings(api="openai", base_url=base_url)  # checks the URL's shape
        name = f"url:{spec.url()}"
        with self._lock:
            named = sum(1 for n in self._clients if n.startswith("url:"))
            if name not in self._clients and named >= MAX_URLS:
                raise ProviderRefused(
                    f"{MAX_URLS} OpenAI-compatible base URLs are in use on this server: a "
                    "workflow may not name a new one per frame"
                )
        return self._client(name, spec)

    def embedder(self) -> Embedder | None:
        """What makes vectors of event descriptions (``VISIONSTREAM_VLM_EMBEDDINGS``); None:
        no search by meaning on this server. A provider that is not configured refuses."""
        named = self._settings.embeddings
        if named is None:
            return None
        name, _, model = named.partition(":")
        return Embedder(self.named(name), model or None)

    @property
    def executor(self) -> Executor:
        """Where live steps ask in the background (``holding.Holder``)."""
        with self._lock:
            if self._closed:
                raise ProviderRefused("the server is shutting down")
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    self._settings.live_threads, thread_name_prefix="vlm"
                )
            return self._executor

    @property
    def settings(self) -> VlmSettings:
        return self._settings

    def family(self, family: str, step: str) -> Target:
        """The provider (and model) the operator maps a model family to
        (``VISIONSTREAM_VLM_FAMILIES``); unmapped, a 400 naming the setting."""
        mapped = self._settings.families.get(family)
        if mapped is None:
            raise WorkflowCompilationError(
                f"step '{step}' runs the {family} model family, which this server runs through "
                f"a provider: map it in VISIONSTREAM_VLM_FAMILIES (for example "
                f'{{"{family}": "ollama:<model>"}}) to a provider of VISIONSTREAM_VLM_PROVIDERS'
            )
        name, _, model = mapped.partition(":")
        try:
            return Target(self.named(name), model or None)
        except ProviderRefused as exc:
            raise WorkflowCompilationError(f"step '{step}': {exc}") from None

    def _client(self, name: str, spec: ProviderSettings) -> ProviderClient:
        with self._lock:
            if self._closed:
                raise ProviderRefused("the server is shutting down")
            client = self._clients.get(name)
            if client is None:
                client = APIS[spec.api](name, spec, pin=self._pin, usage=self._usage)
                self._clients[name] = client
            return client

    def close(self) -> None:
        with self._lock:
            self._closed = True
            clients, self._clients = list(self._clients.values()), {}
            executor, self._executor = self._executor, None
        for client in clients:  # ends their waits: the threads asking return at once
            client.close()
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
