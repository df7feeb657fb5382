"""An OpenCV window; closing it (or pressing q / Esc) tells the caller to stop."""

from __future__ import annotations

import cv2
import numpy as np

__all__ = ["DisplayWindow"]


class DisplayWindow:
    """Shows frames in an OpenCV window; q or Esc asks to stop."""

    def __init__(self, title: str = "visionstream") -> None:
        self.title = title
        try:
            cv2.namedWindow(title, cv2.WINDOW_AUTOSIZE)
        except cv2.error:
            raise RuntimeError(
                "this OpenCV build has no window support (opencv-python-headless); "
                "install opencv-python to display frames"
            ) from None
        self._opened = True

    def show(self, image: np.ndarray) -> bool:
        """Shows one frame; False once the user asked to stop."""
        cv2.imshow(self.title, image)
        key = cv2.waitKey(1) & 0xFF
        if key in (ord("q"), 27):
            return False
        return cv2.getWindowProperty(self.title, cv2.WND_PROP_VISIBLE) >= 1

    def close(self) -> None:
        if self._opened:
            self._opened = False
            cv2.destroyWindow(self.title)
            cv2.waitKey(1)
