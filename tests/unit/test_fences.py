"""uvicorn's shape, as our subclasses need it: the installed one passes; one that changed
fails at start with a named error saying which range to install."""

from __future__ import annotations

import pytest
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from streaming.server.connections import guarded_protocol
from streaming.server.fences import UvicornShapeError, check_protocol, check_server


def test_the_installed_uvicorn_has_the_shape_we_subclass():
    check_server()
    check_protocol(H11Protocol)
    assert guarded_protocol(5.0).header_timeout_s == 5.0


def test_a_protocol_without_a_method_we_extend_is_refused():
    class Renamed(H11Protocol):
        on_response_complete = None  # as if uvicorn renamed it

    with pytest.raises(UvicornShapeError, match=r"Renamed has no on_response_complete.*uvicorn>="):
        check_protocol(Renamed)


def test_a_protocol_whose_instances_lack_what_we_read_is_refused():
    class NoCycle(H11Protocol):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            del self.cycle

    with pytest.raises(UvicornShapeError, match="NoCycle instances have no cycle"):
        check_protocol(NoCycle)


def test_a_server_whose_exit_hook_changed_is_refused():
    class Changed(uvicorn.Server):
        def handle_exit(self, sig, frame, reason=None) -> None:  # type: ignore[override]
            super().handle_exit(sig, frame)

    with pytest.raises(UvicornShapeError, match=r"Changed.handle_exit takes"):
        check_server(Changed)
