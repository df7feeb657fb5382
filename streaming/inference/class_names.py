"""Class-name lists models commonly ship without (``visionstream models add --names coco``)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["COCO80", "COCO_KEYPOINTS", "read_class_names", "read_keypoint_names"]

# The 80 COCO detection classes in the order YOLOv5/v8/v11 and most ONNX exports use.
COCO80: tuple[str, ...] = (
    "person",
    "bicycle",
    "car",
    "motorcycle",
    "airplane",
    "bus",
    "train",
    "truck",
    "boat",
    "traffic light",
    "fire hydrant",
    "stop sign",
    "parking meter",
    "bench",
    "bird",
    "cat",
    "dog",
    "horse",
    "sheep",
    "cow",
    "elephant",
    "bear",
    "zebra",
    "giraffe",
    "backpack",
    "umbrella",
    "handbag",
    "tie",
    "suitcase",
    "frisbee",
    "skis",
    "snowboard",
    "sports ball",
    "kite",
    "baseball bat",
    "baseball glove",
    "skateboard",
    "surfboard",
    "tennis racket",
    "bottle",
    "wine glass",
    "cup",
    "fork",
    "knife",
    "spoon",
    "bowl",
    "banana",
    "apple",
    "sandwich",
    "orange",
    "broccoli",
    "carrot",
    "hot dog",
    "pizza",
    "donut",
    "cake",
    "chair",
    "couch",
    "potted plant",
    "bed",
    "dining table",
    "toilet",
    "tv",
    "laptop",
    "mouse",
    "remote",
    "keyboard",
    "cell phone",
    "microwave",
    "oven",
    "toaster",
    "sink",
    "refrigerator",
    "book",
    "clock",
    "vase",
    "scissors",
    "teddy bear",
    "hair drier",
    "toothbrush",
)


def read_class_names(spec: str) -> list[str]:
    """``coco``, a file (one name per line, or a JSON list), or ``a,b,c``."""
    if spec.lower() == "coco":
        return list(COCO80)
    path = Path(spec)
    if path.is_file():
        text = path.read_text(encoding="utf-8")
        if text.lstrip().startswith("["):
            import json

            names = json.loads(text)
        else:
            names = [line.strip() for line in text.splitlines() if line.strip()]
    else:
        names = [name.strip() for name in spec.split(",") if name.strip()]
    if not names or not all(isinstance(n, str) for n in names):
        raise ValueError(f"no class names in {spec!r} (give coco, a file, or a,b,c)")
    return names


COCO_KEYPOINTS = (
    "nose",
    "left_eye",
    "right_eye",
    "left_ear",
    "right_ear",
    "left_shoulder",
    "right_shoulder",
    "left_elbow",
    "right_elbow",
    "left_wrist",
    "right_wrist",
    "left_hip",
    "right_hip",
    "left_knee",
    "right_knee",
    "left_ankle",
    "right_ankle",
)
"""The 17 keypoints of COCO (and YOLOv8/11-pose), in their output order."""


def read_keypoint_names(spec: str) -> list[str]:
    """``coco`` (its 17 keypoints), a file, or ``a,b,c``."""
    return list(COCO_KEYPOINTS) if spec.lower() == "coco" else read_class_names(spec)
