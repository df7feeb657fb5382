"""One prefix for every setting of the product, ``VISIONSTREAM_``: the server's, the client's
and the command line's alike. The server's settings were ``STREAMING_*`` until 2026-11; those
names are still read, below the new ones, and the server says once at start which it read
(``environment_notes``)."""

from __future__ import annotations

from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource

__all__ = ["LEGACY_PREFIX", "PREFIX", "ProductSettings", "legacy_name"]

PREFIX = "VISIONSTREAM_"
LEGACY_PREFIX = "STREAMING_"


def legacy_name(name: str) -> str:
    """``VISIONSTREAM_X``'s old name, ``STREAMING_X``."""
    return LEGACY_PREFIX + name.removeprefix(PREFIX)


class ProductSettings(BaseSettings):
    """Settings read from ``VISIONSTREAM_<NAME>``, else from the deprecated
    ``STREAMING_<NAME>``: a subclass sets ``env_prefix`` to ``VISIONSTREAM_...``."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        prefix = str(settings_cls.model_config.get("env_prefix", ""))
        if not prefix.startswith(PREFIX):
            return init_settings, env_settings, dotenv_settings, file_secret_settings
        legacy = EnvSettingsSource(settings_cls, env_prefix=legacy_name(prefix))
        # Earlier sources win: arguments, then the new names, then the old ones.
        return init_settings, env_settings, legacy, dotenv_settings, file_secret_settings
