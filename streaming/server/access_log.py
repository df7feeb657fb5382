"""uvicorn's access log, with keys in query strings masked.

inference-sdk's default transport sends the API key as ``?api_key=`` on some calls; uvicorn
logs each request's path with its query. The key must never reach a log."""

from __future__ import annotations

import logging

from sinks.masking import mask_url

__all__ = ["install_access_log_masking"]

_ACCESS_LOGGER = "uvicorn.access"
_PATH_ARG = 2
"""uvicorn's access record: ``(client, method, path with query, http version, status)``."""


class _MaskedQueries(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) > _PATH_ARG:
            path = args[_PATH_ARG]
            if isinstance(path, str) and "?" in path:
                record.args = (*args[:_PATH_ARG], mask_url(path), *args[_PATH_ARG + 1 :])
        return True


def install_access_log_masking() -> None:
    """Idempotent: one filter however many apps a process makes."""
    logger = logging.getLogger(_ACCESS_LOGGER)
    if not any(isinstance(f, _MaskedQueries) for f in logger.filters):
        logger.addFilter(_MaskedQueries())
