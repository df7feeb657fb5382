"""Every operation of the reference's query language, compiled once into a Python function of
``(value, env)``. Each reads its own fields at compile time (a bad field is a 400 naming the
step, the field and the operation) and checks the value it is given at run time (a wrong one
fails the frame with a ``QueryError``).

The operations, by what they take:
- strings: ``StringToLowerCase``, ``StringToUpperCase``, ``StringSubSequence``,
  ``StringMatches``, ``ToString``;
- numbers and booleans: ``ToNumber``, ``NumberRound``, ``Multiply``, ``Divide``,
  ``ToBoolean``, ``RandomNumber``;
- any value: ``LookupTable``; dictionaries: ``ConvertDictionaryToJSON``;
- sequences: ``SequenceLength``, ``SequenceElementsCount``, ``SequenceJoin``,
  ``SequenceMap``, ``SequenceApply``, ``SequenceAggregate``, ``NumericSequenceAggregate``;
- detections: ``DetectionsFilter``, ``DetectionsSelection``, ``SortDetections``,
  ``DetectionsOffset``, ``DetectionsShift``, ``DetectionsRename``,
  ``PickDetectionsByParentClass``, ``DetectionsPropertyExtract``, ``DetectionsToDictionary``;
  one detection: ``ExtractDetectionProperty``;
- classification: ``ClassificationPropertyExtract``;
- images and frames: ``ExtractImageProperty``, ``ExtractFrameMetadata``,
  ``ConvertImageToJPEG``, ``ConvertImageToBase64``; timestamps: ``TimestampToISOFormat``.

Each family lives in a module of its own (``scalar_ops``, ``detection_ops``, ``image_ops``),
built from the field readers and value checks of ``fields``; this table joins them.
"""

from __future__ import annotations

from .detection_ops import DETECTION_OPERATIONS
from .fields import Builder, Op
from .image_ops import IMAGE_OPERATIONS
from .scalar_ops import SCALAR_OPERATIONS

__all__ = ["OPERATIONS", "Op"]

OPERATIONS: dict[str, Builder] = {**SCALAR_OPERATIONS, **DETECTION_OPERATIONS, **IMAGE_OPERATIONS}
