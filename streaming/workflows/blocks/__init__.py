"""Workflow blocks by type id; ``get_block`` raises on unknown names."""

from __future__ import annotations

from .aggregation import DataAggregatorBlock
from .analytics import LineCounterBlock, LineCounterV1Block, TimeInZoneBlock
from .base import Block
from .change import BackgroundSubtractionBlock, MotionDetectionBlock
from .classification import (
    ClassificationModelBlock,
    ClassificationModelBlockV3,
    MultiLabelClassificationModelBlock,
    MultiLabelClassificationModelBlockV3,
)
from .consensus import DetectionsConsensusBlock
from .crops import AbsoluteStaticCropBlock, DynamicCropBlock, RelativeStaticCropBlock
from .detection import (
    InstanceSegmentationModelBlock,
    InstanceSegmentationModelBlockV3,
    KeypointDetectionModelBlock,
    KeypointDetectionModelBlockV3,
    ObjectDetectionModelBlock,
    ObjectDetectionModelBlockV3,
)
from .dynamic_zone import DynamicZoneBlock
from .email import EmailNotificationBlock, EmailNotificationV2Block
from .features import (
    SiftBlock,
    SiftComparisonBlock,
    SiftComparisonV2Block,
    TemplateMatchingBlock,
)
from .files import LocalFileSinkBlock
from .filtering import (
    DetectionsFilterBlock,
    DetectionsTransformationBlock,
    PropertyDefinitionBlock,
)
from .flow import ContinueIfBlock, DeltaFilterBlock, RateLimiterBlock
from .focus import CameraFocusBlock, CameraFocusV2Block
from .formatters import (
    CsvFormatterBlock,
    ExpressionBlock,
    FirstNonEmptyOrDefaultBlock,
    JsonParserBlock,
)
from .fusion import (
    DetectionsClassesReplacementBlock,
    DetectionsCombineBlock,
    DetectionsMergeBlock,
    DimensionCollapseBlock,
)
from .geometry import DetectionOffsetBlock
from .image_ops import (
    ContrastEnhancementBlock,
    ConvertGrayscaleBlock,
    DominantColorBlock,
    ImagePreprocessingBlock,
    MorphologicalTransformationBlock,
    MorphologicalTransformationV2Block,
)
from .model_visualization import (
    ClassificationLabelVisualizationBlock,
    KeypointVisualizationBlock,
    MaskVisualizationBlock,
    ModelComparisonVisualizationBlock,
    PolygonVisualizationBlock,
)
from .motion import PathDeviationBlock, StabilizeDetectionsBlock, VelocityBlock
from .ocr import OcrModelBlock, PpOcrBlock
from .perspective import PerspectiveCorrectionBlock
from .rollup import DetectionsListRollupBlock
from .secrets import EnvironmentSecretsStoreBlock
from .sinks import EventSinkBlock, MqttSinkBlock, WebhookSinkBlock
from .slicing import DetectionsStitchBlock, ImageSlicerBlock, ImageSlicerV2Block
from .text_stitching import StitchOcrDetectionsBlock, StitchOcrDetectionsV2Block
from .tracking import ByteTrackerBlock
from .transforms import ImageBlurBlock
from .visualization import (
    BlurVisualizationBlock,
    BoundingBoxVisualizationBlock,
    DotVisualizationBlock,
    HeatmapVisualizationBlock,
    LabelVisualizationBlock,
    LabelVisualizationBlockV2,
    PixelateVisualizationBlock,
)
from .zone_visualization import (
    LineCounterVisualizationBlock,
    PolygonZoneVisualizationBlock,
    TraceVisualizationBlock,
)

__all__ = ["BLOCKS", "Block", "get_block"]

BLOCKS: dict[str, type[Block]] = {
    type_id: cls
    for cls in (
        ObjectDetectionModelBlock,
        InstanceSegmentationModelBlock,
        KeypointDetectionModelBlock,
        ClassificationModelBlock,
        MultiLabelClassificationModelBlock,
        ObjectDetectionModelBlockV3,
        InstanceSegmentationModelBlockV3,
        KeypointDetectionModelBlockV3,
        ClassificationModelBlockV3,
        MultiLabelClassificationModelBlockV3,
        BoundingBoxVisualizationBlock,
        LabelVisualizationBlock,
        LabelVisualizationBlockV2,
        ImageBlurBlock,
        ByteTrackerBlock,
        LineCounterV1Block,
        LineCounterBlock,
        TimeInZoneBlock,
        LineCounterVisualizationBlock,
        PolygonZoneVisualizationBlock,
        TraceVisualizationBlock,
        BlurVisualizationBlock,
        PixelateVisualizationBlock,
        DotVisualizationBlock,
        HeatmapVisualizationBlock,
        MaskVisualizationBlock,
        PolygonVisualizationBlock,
        KeypointVisualizationBlock,
        ClassificationLabelVisualizationBlock,
        DetectionsFilterBlock,
        PropertyDefinitionBlock,
        ContinueIfBlock,
        DeltaFilterBlock,
        RateLimiterBlock,
        DataAggregatorBlock,
        VelocityBlock,
        StabilizeDetectionsBlock,
        PathDeviationBlock,
        WebhookSinkBlock,
        MqttSinkBlock,
        EventSinkBlock,
        DynamicCropBlock,
        AbsoluteStaticCropBlock,
        RelativeStaticCropBlock,
        DimensionCollapseBlock,
        DetectionsClassesReplacementBlock,
        ImageSlicerBlock,
        ImageSlicerV2Block,
        DetectionsStitchBlock,
        DetectionOffsetBlock,
        FirstNonEmptyOrDefaultBlock,
        ExpressionBlock,
        JsonParserBlock,
        DetectionsCombineBlock,
        DetectionsMergeBlock,
        CsvFormatterBlock,
        LocalFileSinkBlock,
        ConvertGrayscaleBlock,
        ImagePreprocessingBlock,
        ContrastEnhancementBlock,
        MorphologicalTransformationBlock,
        MorphologicalTransformationV2Block,
        DominantColorBlock,
        EnvironmentSecretsStoreBlock,
        DetectionsTransformationBlock,
        OcrModelBlock,
        PpOcrBlock,
        StitchOcrDetectionsBlock,
        StitchOcrDetectionsV2Block,
        EmailNotificationBlock,
        EmailNotificationV2Block,
        BackgroundSubtractionBlock,
        MotionDetectionBlock,
        CameraFocusBlock,
        CameraFocusV2Block,
        SiftBlock,
        SiftComparisonBlock,
        SiftComparisonV2Block,
        TemplateMatchingBlock,
        DetectionsConsensusBlock,
        DetectionsListRollupBlock,
        DynamicZoneBlock,
        PerspectiveCorrectionBlock,
        ModelComparisonVisualizationBlock,
    )
    for type_id in cls.type_ids
}


def get_block(type_id: str) -> type[Block] | None:
    return BLOCKS.get(type_id)
