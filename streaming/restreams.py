"""The server's restreams: each pipeline source's annotated picture (``sinks/restream``) fed
from the pipeline while someone plays it, the RTSP server, and the URLs a status lists.

A source's restream watches its pipeline (here or in a Ray actor, through ``WatchedPipeline``)
only while it has players: the first player attaches the watcher, the last one leaving detaches
it. The picture is the workflow's first image output (its drawing), or the camera's frame
when the workflow draws none. A source that ends ends its players.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np

from sinks.pinning import Pin
from sinks.restream import (
    OUTPUTS,
    HlsStream,
    Restream,
    RestreamConfig,
    RestreamFull,
    RtspRefused,
    RtspServer,
    idle_stats,
)
from sinks.restream.passthrough import CameraPackets, CameraRestream
from sinks.restream.push import Push, TargetOpener
from sinks.restream.push_targets import push_opener
from sources import LiveFeed

from .config import Settings
from .egress import EgressPolicy
from .errors import NotFound, StreamingError, TooManyPlayers
from .peer.whip_push import WhipTarget
from .pipelines import Pipelines
from .pipelines.models import WHIP_SCHEMES, InitialisePipelinePayload, PushTarget, path_number
from .rtc.candidates import CandidateScreen
from .viewer_tokens import ViewerTokens
from .watching import PipelineResult, WatchedPipeline, image_in

__all__ = ["Restreams", "SourceRestream"]

log = logging.getLogger(__name__)


def restream_config(settings: Settings) -> RestreamConfig:
    return RestreamConfig(
        fps=settings.restream_fps,
        max_width=settings.restream_max_width,
        max_height=settings.restream_max_height,
        encoder=settings.restream_encoder,
        kbps=settings.restream_kbps,
        keyframe_s=settings.restream_keyframe_s,
        jpeg_quality=settings.restream_jpeg_quality,
        stall_s=settings.restream_stall_s,
        max_viewers=settings.restream_max_viewers,
    )


@dataclass(eq=False)
class CameraCopy:
    """A camera source's own packets restreamed (RTSP ``…/camera``), from the connection its
    pipeline has, while it has players; its players end with the source."""

    watched: WatchedPipeline
    source_id: int
    feed: LiveFeed
    restream: CameraRestream
    _sink: CameraPackets | None = None
    _unwatch: Callable[[], None] | None = None

    def activate(self, active: bool) -> None:
        if active and self._sink is None:
            loop = asyncio.get_running_loop()
            self._sink = CameraPackets(loop, self.restream.deliver, self.restream.end)
            self.feed.add_packet_sink(self._sink)
            self._unwatch = self.watched.watch(lambda _result: None, self._ended)
        elif not active and self._sink is not None:
            self.feed.remove_packet_sink(self._sink)
            self._sink = None
            if self._unwatch is not None:
                self._unwatch()

    def _ended(self, source_id: int | None, why: str) -> None:
        if source_id is None or source_id == self.source_id:
            self.restream.end(why)


@dataclass(eq=False)
class SourceRestream:
    """One pipeline source's restream, its HLS output, and its watcher while it plays."""

    pipeline_id: str
    source_id: int
    watched: WatchedPipeline
    restream: Restream
    hls: HlsStream
    _unwatch: Callable[[], None] | None = field(default=None)
    ended: str | None = None
    pushes: list[Push] = field(default_factory=list)
    camera: CameraCopy | None = None

    def subscribe(self, kind: Any) -> Any:
        """A subscription of ``kind`` (503 when the source has all the players it may)."""
        if self.ended is not None:
            raise NotFound(f"pipeline {self.pipeline_id} source {self.source_id}: {self.ended}")
        try:
            return self.restream.subscribe(kind)
        except RestreamFull as full:
            raise TooManyPlayers(str(full)) from None

    def activate(self, active: bool) -> None:
        if active and self._unwatch is None:
            self._unwatch = self.watched.watch(self._result, self._ended)
        elif not active and self._unwatch is not None:
            unwatch, self._unwatch = self._unwatch, None
            unwatch()

    def _result(self, result: PipelineResult) -> None:
        if result.source_id == self.source_id:
            self.restream.offer(lambda: _picture(self.watched, result))

    def _ended(self, source_id: int | None, why: str) -> None:
        if source_id is None or source_id == self.source_id:
            self.end(why)

    def end(self, why: str) -> None:
        """Idempotent: every player is told ``why``; the watcher goes."""
        if self.ended is None:
            self.ended = why
            self.restream.end(why)
            self.activate(False)
            if self.camera is not None:
                self.camera.restream.end(why)


def _picture(watched: WatchedPipeline, result: PipelineResult) -> np.ndarray:
    """What the source's players see of ``result`` (on the restream's thread)."""
    for name in watched.outputs.image_outputs():
        if (image := image_in(result.outputs.get(name))) is not None:
            return image
    return result.frame.image


class Restreams:
    """Every restream of this server, by pipeline and source."""

    def __init__(self, settings: Settings, pipelines: Pipelines, pin: Pin | None) -> None:
        """``pin``: where pushes connect (the egress policy's checked address)."""
        self._settings = settings
        self._pipelines = pipelines
        self._pin = pin
        self._config = restream_config(settings)
        self.tokens = ViewerTokens.for_settings(settings)
        self._sources: dict[tuple[str, int], SourceRestream] = {}
        self.rtsp: RtspServer | None = None

    async def start(self) -> None:
        """The RTSP server, where ``VISIONSTREAM_RESTREAM_RTSP_PORT`` asks for one."""
        port = self._settings.restream_rtsp_port
        if port is not None:
            settings = self._settings
            second = max(128 * 1024, settings.restream_kbps * 1000 // 8)
            self.rtsp = RtspServer(
                settings.host, port, self._resolve, settings.restream_stall_s, second
            )
            await self.rtsp.start()
            log.info("restreams over RTSP on port %d", self.rtsp.port)

    async def source(self, pipeline_id: str, source_id: int) -> SourceRestream:
        """The source's restream (404 for a pipeline or source that does not exist)."""
        key = (pipeline_id, source_id)
        known = self._sources.get(key)
        if known is not None and known.ended is None and known.restream.encoding:
            return known
        watched = await self._pipelines.watched(pipeline_id)
        if source_id not in watched.source_ids:
            raise NotFound(f"pipeline {pipeline_id} has no source {source_id}")
        if known is not None and known.ended is None:
            known.watched = watched  # the newest: a Ray actor may have moved meanwhile
            return known
        for stale in [k for k, s in self._sources.items() if s.ended is not None]:
            del self._sources[stale]
        restream = Restream(f"{pipeline_id}/{source_id}", self._config)
        settings = self._settings
        hls = HlsStream(restream, settings.restream_hls_segments, settings.restream_hls_idle_s)
        made = SourceRestream(pipeline_id, source_id, watched, restream, hls)
        restream.on_active = made.activate
        self._sources[key] = made
        return made

    async def _resolve(self, path: str, query: str) -> Restream:
        """An RTSP request's ``/<pipeline>/<source>?token=...`` to its restream."""
        parts = [p for p in path.split("/") if p]
        if parts and parts[-1] == "trackID=0":
            parts.pop()  # a player that names the track's control URL
        camera = len(parts) == 3 and parts[2] == "camera"
        source_id = path_number(parts[1]) if len(parts) == 2 + camera else None
        if source_id is None:
            raise RtspRefused(404, f"no restream at {path!r}: /<pipeline_id>/<source_id>[/camera]")
        pipeline_id = parts[0]
        token = parse_qs(query).get("token", [""])[0]
        try:
            self.tokens.check(token, pipeline_id, source_id)
            source = await self.source(pipeline_id, source_id)
            return self._camera(source).restream if camera else source.restream
        except StreamingError as error:
            raise RtspRefused(error.status, error.message) from None

    def _camera(self, source: SourceRestream) -> CameraCopy:
        """The source's camera copy (404 for a source that is not a camera here)."""
        if source.camera is not None and not source.camera.restream.ended:
            return source.camera
        feed = source.watched.camera_feed(source.source_id)
        if feed is None:
            raise NotFound(
                f"source {source.source_id} is not a camera this server reads: its picture "
                "is restreamed decoded only"
            )
        restream = CameraRestream(f"{source.pipeline_id}/{source.source_id}/camera", self._config)
        source.camera = CameraCopy(source.watched, source.source_id, feed, restream)
        restream.on_active = source.camera.activate
        return source.camera

    async def push(self, pipeline_id: str, payload: InitialisePipelinePayload) -> None:
        """The pipeline's pushes started (``restream.push`` of its request): each connects
        now, and again with backoff whenever its target goes away, until the source ends."""
        for target in payload.restream.push if payload.restream else ():
            source = await self.source(pipeline_id, target.source_id)
            push = Push(
                source.restream,
                target.url,
                self._opener(target),
                self._settings.restream_push_max_backoff_s,
            )
            source.pushes.append(push)
            push.start()

    def _opener(self, target: PushTarget) -> TargetOpener:
        """How the push connects: WHIP for ``http(s)://``, else by its scheme's entry."""
        if urlsplit(target.url).scheme.lower() not in WHIP_SCHEMES:
            return push_opener(target.url, self._pin)
        # Its answer's candidates are where this server connects: the egress policy's.
        screen = CandidateScreen(
            EgressPolicy(self._settings.allowed_networks), self._settings.max_remote_candidates
        )
        return lambda _keyframe: WhipTarget(target.url, target.token, self._pin, screen)

    def urls(self, base: str, pipeline_id: str, source_id: int, ttl_s: int | None) -> dict:
        """Every URL a player may open for the source, each carrying one token."""
        token, expires = self.tokens.issue(pipeline_id, source_id, ttl_s)
        public = self._settings.restream_public_url or base
        http = public.rstrip("/") + f"/restream/{pipeline_id}/{source_id}"
        urls: dict[str, Any] = {}
        for output in OUTPUTS:
            if output.scheme == "http":
                urls[output.name] = f"{http}{output.path}?token={token}"
            elif self.rtsp is not None:
                host = urlsplit(public).hostname or "127.0.0.1"
                host = f"[{host}]" if ":" in host else host
                where = f"rtsp://{host}:{self.rtsp.port}/{pipeline_id}/{source_id}"
                urls[output.name] = f"{where}{output.path}?token={token}"
                urls["rtsp_camera"] = f"{where}/camera?token={token}"
        urls["whep"] = public.rstrip("/") + f"/whep/pipelines/{pipeline_id}/{source_id}"
        return {"urls": urls, "expires_at": expires, "role": "viewer"}

    def stats_of(self, pipeline_id: str, source_id: int) -> dict[str, Any]:
        """What the source's restream costs now, and its pushes' states (none yet: nothing)."""
        source = self._sources.get((pipeline_id, source_id))
        if source is None:  # never played: a restream's figures, all at zero
            return {**idle_stats(), "pushes": [], "camera_copy": None}
        camera = source.camera.restream.stats() if source.camera is not None else None
        return {
            **source.restream.stats(),
            "pushes": [vars(push.status) for push in source.pushes],
            "camera_copy": camera,
        }

    async def close(self) -> None:
        """Idempotent: every player ended, the RTSP server closed."""
        for source in list(self._sources.values()):
            source.end("the server is shutting down")
            await source.hls.close()
            for push in source.pushes:
                await push.close()
        self._sources.clear()
        rtsp, self.rtsp = self.rtsp, None
        if rtsp is not None:
            await rtsp.close()
