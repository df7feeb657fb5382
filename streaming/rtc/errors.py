"""The one error of this package."""

from __future__ import annotations

__all__ = ["RtcInstallError"]


class RtcInstallError(RuntimeError):
    """aiortc no longer looks like the version these changes were written for: install the
    tested range (``pip install 'aiortc>=1.16,<1.17'``) rather than run half-changed."""
