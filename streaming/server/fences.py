"""The shape of what we subclass in uvicorn, checked at start-up.

``connections.guarded_protocol`` mixes a deadline into uvicorn's HTTP protocol class and
``shutdown.DrainingServer`` subclasses ``uvicorn.Server``: both rely on names uvicorn does not
promise to keep. pyproject pins the range the suite ran on; this check turns a uvicorn that
changed shape anyway (installed by hand, say) into one named error at start, rather than
slowloris protection or the drain silently doing nothing.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import uvicorn
from uvicorn.server import ServerState

__all__ = ["TESTED_UVICORN", "UvicornShapeError", "check_protocol", "check_server"]

TESTED_UVICORN = ">=0.54,<0.55"

_PROTOCOL_METHODS = ("connection_made", "data_received", "on_response_complete", "connection_lost")
_PROTOCOL_ATTRIBUTES = ("cycle", "transport", "loop")
_SERVER_METHODS = {
    "handle_exit": ("sig", "frame"),
    "serve": ("sockets",),
    "startup": ("sockets",),
}
_SERVER_ATTRIBUTES = ("should_exit", "force_exit")


class UvicornShapeError(RuntimeError):
    """uvicorn no longer looks like the version our subclasses were written for: install the
    tested range (``pip install 'uvicorn>=0.54,<0.55'``) rather than run half-guarded."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"uvicorn {uvicorn.__version__} changed shape: {what}; visionstream was tested "
            f"with uvicorn{TESTED_UVICORN}: install that range"
        )


async def _noop_app(scope: Any, receive: Any, send: Any) -> None:
    """Never called: the protocol is only built, not connected. It takes an app's three
    arguments: uvicorn calls an app that takes none as a factory, and warns so."""


def check_protocol(base: type) -> None:
    """``base`` (an HTTP protocol class) has the methods we extend and, once built, the
    attributes we read; raises ``UvicornShapeError``."""
    missing = [m for m in _PROTOCOL_METHODS if not callable(getattr(base, m, None))]
    if missing:
        raise UvicornShapeError(f"{base.__name__} has no {', '.join(missing)}")
    loop = asyncio.new_event_loop()
    try:
        config = uvicorn.Config(_noop_app, log_config=None)  # the server's logging untouched
        protocol = base(config=config, server_state=ServerState(), app_state={}, _loop=loop)
    except TypeError as exc:
        raise UvicornShapeError(f"{base.__name__} is built differently: {exc}") from None
    finally:
        loop.close()
    absent = [a for a in _PROTOCOL_ATTRIBUTES if not hasattr(protocol, a)]
    if absent:
        raise UvicornShapeError(f"{base.__name__} instances have no {', '.join(absent)}")


def check_server(server: type = uvicorn.Server) -> None:
    """``server`` has the methods ``DrainingServer`` overrides, with their parameters, and
    the flags it sets; raises ``UvicornShapeError``."""
    for name, parameters in _SERVER_METHODS.items():
        method = getattr(server, name, None)
        if not callable(method):
            raise UvicornShapeError(f"{server.__name__} has no {name}")
        found = tuple(inspect.signature(method).parameters)[1:]
        if found != parameters:
            raise UvicornShapeError(f"{server.__name__}.{name} takes {found}, not {parameters}")
    instance = server(uvicorn.Config(_noop_app, log_config=None))
    absent = [a for a in _SERVER_ATTRIBUTES if not hasattr(instance, a)]
    if absent:
        raise UvicornShapeError(f"{server.__name__} instances have no {', '.join(absent)}")
