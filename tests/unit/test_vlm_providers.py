"""The providers (``streaming.language``) against each API played on loopback by
``tests/support/vlm_provider.py``, which answers from the pixels it was sent: the image
arrives, the key goes only where its API puts it, usage is counted, 429 and 5xx are tried
again after ``Retry-After``, a refusal is not, a hung provider times out, the concurrency
limit holds, and the egress policy is asked before any connection."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest

from streaming.egress import EgressPolicy
from streaming.language import Prompt, ProviderRefused, Providers, ProviderUnavailable
from streaming.settings.language import ProviderSettings, VlmSettings
from tests.conftest import load_photo

KEY = "sk-test-secret-0123456789"


class Counted:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str]] = []
        self.tokens: list[tuple[str, str, int, int]] = []

    def vlm_request(self, provider: str, model: str, outcome: str) -> None:
        self.requests.append((provider, model, outcome))

    def vlm_token_counts(self, provider: str, model: str, input_tokens: int, output: int) -> None:
        self.tokens.append((provider, model, input_tokens, output))


def url_of(fake, api: str) -> str:
    return {"openai": fake.openai_url, "anthropic": fake.anthropic_url, "gemini": fake.gemini_url}[
        api
    ]


def providers_for(fake, api: str = "openai", networks=("127.0.0.1/32",), **spec) -> Providers:
    named = ProviderSettings(api=api, base_url=url_of(fake, api), api_key=KEY, **spec)
    return Providers(
        VlmSettings(providers={"local": named}), pin=EgressPolicy(networks).pin, usage=Counted()
    )


def jpeg_of(image) -> bytes:
    import cv2

    return cv2.imencode(".jpg", image)[1].tobytes()


@pytest.fixture(scope="module")
def person_jpeg(photos) -> bytes:
    return jpeg_of(load_photo(photos, "person.jpg"))


@pytest.mark.parametrize("api", ["openai", "anthropic", "gemini"])
def test_each_api_sends_the_image_and_the_key_and_counts_the_tokens(vlm_provider, person_jpeg, api):
    providers = providers_for(vlm_provider, api)
    try:
        answer = providers.named("local").describe(
            Prompt("What is in the picture?", (person_jpeg,), system="Be brief.", model="describe")
        )
    finally:
        providers.close()
    (call,) = vlm_provider.calls
    assert call.api == api and call.key == KEY and call.model == "describe"
    assert [i.shape for i in call.images] == [(480, 640, 3)]
    assert "What is in the picture?" in call.text
    # What the detector saw on the photo sent (person.jpg: a person, a horse, a dog)
    assert answer.text.startswith("I see ") and "1 person" in answer.text and "horse" in answer.text
    assert (answer.provider, answer.model) == ("local", "describe")
    words = len(answer.text.split())
    assert answer.usage.input_tokens > 85 and answer.usage.output_tokens == words
    usage = providers._usage  # the sink given, recording
    assert usage.tokens == [("local", "describe", answer.usage.input_tokens, words)]
    assert usage.requests == [("local", "describe", "answered")]


def test_a_schema_is_sent_as_each_api_takes_it(vlm_provider, person_jpeg):
    schema = {"type": "object", "properties": {"title": {"type": "string"}}}
    for api in ("openai", "anthropic", "gemini"):
        providers = providers_for(vlm_provider, api)
        try:
            providers.named("local").describe(Prompt("?", (), schema=schema, model="describe"))
        finally:
            providers.close()
    openai, anthropic, gemini = (c.body for c in vlm_provider.calls)
    assert openai["response_format"]["json_schema"]["schema"] == schema
    assert '"title"' in anthropic["system"]
    assert gemini["generationConfig"]["responseJsonSchema"] == schema
    assert gemini["generationConfig"]["responseMimeType"] == "application/json"


@pytest.mark.parametrize("api", ["openai", "anthropic", "gemini"])
def test_429_and_5xx_are_tried_again_after_retry_after(vlm_provider, api):
    vlm_provider.fail_next = [429, 503]
    vlm_provider.retry_after = "0.2"
    providers = providers_for(vlm_provider, api, retries=2)
    started = time.monotonic()
    try:
        answer = providers.named("local").describe(Prompt("?", model="describe"))
    finally:
        providers.close()
    assert answer.text == "I see nothing."
    assert len(vlm_provider.calls) == 3
    assert time.monotonic() - started >= 0.2  # the provider's Retry-After was kept


def test_tries_run_out_as_unavailable_naming_the_last_failure(vlm_provider, caplog):
    vlm_provider.fail_next = [503, 503]
    providers = providers_for(vlm_provider, retries=1, max_backoff_s=0.05)
    caplog.set_level(logging.DEBUG)
    try:
        with pytest.raises(ProviderUnavailable, match="after 2 tries: HTTP 503"):
            providers.named("local").describe(Prompt("?", model="describe"))
    finally:
        providers.close()
    assert providers._usage.requests == [("local", "describe", "unavailable")]
    assert KEY not in caplog.text


def test_a_model_that_takes_no_images_is_refused_once_not_retried(vlm_provider, person_jpeg):
    providers = providers_for(vlm_provider, retries=3)
    try:
        with pytest.raises(ProviderRefused, match="HTTP 400: model does not support images"):
            providers.named("local").describe(Prompt("?", (person_jpeg,), model="text-only"))
    finally:
        providers.close()
    assert len(vlm_provider.calls) == 1


def test_a_thinking_models_answer_is_read_from_reasoning_content(vlm_provider, person_jpeg):
    providers = providers_for(vlm_provider)
    try:
        answer = providers.named("local").describe(
            Prompt("?", (person_jpeg,), model="reasoning-classify")
        )
    finally:
        providers.close()
    assert answer.from_reasoning and '"class_name": "person"' in answer.text


def test_a_hung_provider_times_out_within_its_bound(vlm_provider):
    vlm_provider.hang()
    providers = providers_for(vlm_provider, timeout_s=0.5, retries=1, max_backoff_s=0.05)
    started = time.monotonic()
    try:
        with pytest.raises(ProviderUnavailable, match="no answer"):
            providers.named("local").describe(Prompt("?", model="describe"))
    finally:
        providers.close()
        vlm_provider.release()
    assert time.monotonic() - started < 10  # two tries of 0.5 s, on a loaded machine


def test_the_concurrency_limit_holds_over_every_caller(vlm_provider):
    vlm_provider.delay_s = 0.2
    providers = providers_for(vlm_provider, max_concurrency=2, timeout_s=30)
    client = providers.named("local")
    answers: list[str] = []
    threads = [
        threading.Thread(
            target=lambda: answers.append(client.describe(Prompt("?", model="describe")).text)
        )
        for _ in range(6)
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        providers.close()
    assert answers == ["I see nothing."] * 6
    assert 1 <= vlm_provider.peak <= 2  # two at once at most, however the threads interleave


def test_an_address_outside_the_egress_policy_is_refused_before_connecting(vlm_provider):
    providers = providers_for(vlm_provider, networks=("10.0.0.0/8",), retries=3)
    try:
        with pytest.raises(ProviderRefused, match="VISIONSTREAM_ALLOWED_NETWORKS"):
            providers.named("local").describe(Prompt("?", model="describe"))
        for api in ("anthropic", "gemini"):
            other = providers_for(vlm_provider, api, networks=("10.0.0.0/8",))
            with pytest.raises(ProviderRefused, match="VISIONSTREAM_ALLOWED_NETWORKS"):
                other.named("local").describe(Prompt("?", model="describe"))
            other.close()
    finally:
        providers.close()
    assert vlm_provider.calls == []


def test_an_answer_over_the_bound_is_refused(vlm_provider, person_jpeg):
    providers = providers_for(vlm_provider, max_answer_chars=1000)
    vlm_provider.answer = lambda script, images: "x" * 5000  # a runaway model
    try:
        with pytest.raises(ProviderRefused, match="5000 characters, over its max_answer_chars"):
            providers.named("local").describe(Prompt("?", model="describe"))
    finally:
        providers.close()


def test_close_ends_a_backoff_at_once(vlm_provider):
    vlm_provider.fail_next = [429]
    vlm_provider.retry_after = "30"
    providers = providers_for(vlm_provider, retries=1, max_backoff_s=60)
    failed: list[BaseException] = []

    def ask() -> None:
        try:
            providers.named("local").describe(Prompt("?", model="describe"))
        except ProviderUnavailable as exc:
            failed.append(exc)

    thread = threading.Thread(target=ask)
    thread.start()
    vlm_provider.wait_calls(1)
    started = time.monotonic()
    providers.close()
    thread.join(30)
    assert not thread.is_alive() and failed
    assert time.monotonic() - started < 10


def test_settings_name_providers_and_families_and_keep_keys_out_of_sight(monkeypatch):
    monkeypatch.setenv(
        "VISIONSTREAM_VLM_PROVIDERS",
        '{"ollama": {"base_url": "http://127.0.0.1:11434/v1/", "model": "qwen2.5vl:3b", '
        f'"api_key": "{KEY}"}}}}',
    )
    monkeypatch.setenv("VISIONSTREAM_VLM_FAMILIES", '{"florence-2": "ollama:florence2"}')
    settings = VlmSettings()
    assert settings.providers["ollama"].url() == "http://127.0.0.1:11434/v1"
    assert KEY not in repr(settings) and KEY not in settings.model_dump_json()
    providers = Providers(settings, pin=None)
    target = providers.family("florence-2", "step")
    assert (target.client.name, target.model) == ("ollama", "florence2")
    with pytest.raises(Exception, match="VISIONSTREAM_VLM_FAMILIES"):
        providers.family("moondream", "step")
    with pytest.raises(ProviderRefused, match="VISIONSTREAM_VLM_PROVIDERS names: ollama"):
        providers.named("nope")
    providers.close()
    with pytest.raises(ValueError, match="without credentials"):
        ProviderSettings(base_url="http://user:pw@127.0.0.1/v1")


@pytest.mark.parametrize("api", ["openai", "anthropic", "gemini"])
def test_a_body_past_its_bound_is_refused_before_it_is_all_read(vlm_provider, api):
    """A server that answers without end (a caller's own ``base_url``) fills no memory:
    the body is cut at eight bytes per answer character allowed, plus 64 KiB."""
    providers = providers_for(vlm_provider, api, max_answer_chars=1000)
    vlm_provider.answer = lambda script, images: "x" * 200_000
    try:
        with pytest.raises(ProviderRefused, match="over 73536 bytes"):
            providers.named("local").describe(Prompt("?", model="describe"))
    finally:
        providers.close()
    assert len(vlm_provider.calls) == 1  # refused, not tried again


def test_a_workflow_cannot_name_base_urls_without_end():
    from streaming.language.providers import MAX_URLS

    providers = Providers(VlmSettings(), pin=None)
    try:
        for port in range(MAX_URLS):
            providers.at(f"http://127.0.0.1:{20000 + port}/v1")
        providers.at("http://127.0.0.1:20000/v1")  # one it has: fine
        with pytest.raises(ProviderRefused, match="may not name a new one per frame"):
            providers.at("http://127.0.0.1:30000/v1")
    finally:
        providers.close()


def embeddings_for(fake, named: str, api: str = "openai", **spec) -> Providers:
    provider = ProviderSettings(api=api, base_url=url_of(fake, api), api_key=KEY, **spec)
    return Providers(
        VlmSettings(providers={"local": provider}, embeddings=named),
        pin=EgressPolicy(("127.0.0.1/32",)).pin,
        usage=Counted(),
    )


def test_embeddings_are_unit_vectors_of_meaning_tried_again_and_counted(vlm_provider):
    """``VISIONSTREAM_VLM_EMBEDDINGS`` names provider and model: words of one sense come out
    near each other, a 429 is tried again, the tokens are counted by model."""
    vlm_provider.fail_next = [429]
    providers = embeddings_for(vlm_provider, "local:nomic-embed-text", retries=1)
    try:
        embedder = providers.embedder()
        assert embedder is not None and embedder.model == "nomic-embed-text"
        person = embedder.embed("A man walks to the door.")
        pedestrian = embedder.embed("a pedestrian")
        car = embedder.embed("a red car")
    finally:
        providers.close()
    assert person.model == "nomic-embed-text"
    assert np.isclose(np.linalg.norm(person.vector), 1.0)
    assert float(person.vector @ pedestrian.vector) > float(car.vector @ pedestrian.vector)
    assert vlm_provider.embedded[:2] == ["A man walks to the door."] * 2  # the 429, again
    assert ("local", "nomic-embed-text", "answered") in providers._usage.requests
    assert providers._usage.tokens[0][:3] == ("local", "nomic-embed-text", 6)


def test_embeddings_that_cannot_be_made_are_refused_with_the_reason(vlm_provider):
    no_model = embeddings_for(vlm_provider, "local")
    with pytest.raises(ProviderRefused, match="provider:model"):
        no_model.embedder()
    no_model.close()
    assert Providers(VlmSettings(), pin=None).embedder() is None
    unknown = embeddings_for(vlm_provider, "elsewhere:m")
    with pytest.raises(ProviderRefused, match="no provider named 'elsewhere'"):
        unknown.embedder()
    unknown.close()
    broken = embeddings_for(vlm_provider, "local:broken-embeddings")
    with pytest.raises(ProviderRefused, match="zero length"):
        broken.embedder().embed("anything")
    broken.close()
    claude = embeddings_for(vlm_provider, "local:m", api="anthropic")
    with pytest.raises(ProviderRefused, match="no embeddings API"):
        claude.embedder().embed("anything")
    claude.close()
    with pytest.raises(ValueError, match="names no provider"):
        VlmSettings(embeddings=":model")
