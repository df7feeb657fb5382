"""The only readers of the environment: ``Settings`` for the server (prefix ``STREAMING_``),
``ClientSettings`` for our client library and ``visionstream stream`` (prefix ``VISIONSTREAM_``)."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from .access import AuthSettings
from .bounds import WorkflowLimits
from .inference.manifest import BackendName

__all__ = ["ClientSettings", "DecodeSettings", "Settings", "SmtpSettings", "unknown_settings"]


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class SmtpSettings(BaseSettings):
    """The server's mail relay (``STREAMING_SMTP_*``): what ``email_notification@v2`` steps
    that ask for Roboflow's managed provider send through, and how every SMTP connection a
    workflow makes is secured."""

    model_config = SettingsConfigDict(env_prefix="STREAMING_SMTP_", extra="ignore")

    host: str | None = None
    """The relay; unset, a step asking for the managed provider is refused."""
    port: int = Field(default=465, ge=1, le=65535)
    username: str | None = None
    password: SecretStr | None = None
    sender: str | None = None
    """The From address of the relay's messages (default: ``username``)."""
    tls: Literal["auto", "implicit", "starttls", "none"] = "auto"
    """``auto``: implicit TLS on port 465, STARTTLS elsewhere (a server without it is an
    error); ``none`` sends in the clear, passwords included: for a relay on this machine."""
    ca_file: Path | None = None
    """A CA bundle to check SMTP servers' certificates against (default: the system's)."""
    allowed_recipients: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Whom the relay sends to: addresses (``ops@example.com``) and domains
    (``@example.com``), comma-separated; ``*`` anyone. Empty: a step may not use the relay."""
    max_recipients: int = Field(default=10, ge=1)
    """To, Cc and Bcc of one message, at most (the step's own server's too)."""
    min_interval_s: float = Field(default=60.0, ge=0)
    """Seconds between two relay messages of one step, and of one caller's steps, at least
    (a step's ``cooldown_seconds`` may be longer, never shorter)."""
    max_attachment_bytes: int = Field(default=5 * 1024 * 1024, ge=0)
    """Attachments and inline images of one message, at most (the step's own server's too)."""
    max_message_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    """One whole message, at most (the step's own server's too)."""

    @field_validator("allowed_recipients", mode="before")
    @classmethod
    def _csv(cls, value: object) -> object:
        return _split_csv(value)


class DecodeSettings(BaseSettings):
    """How cameras are decoded (``STREAMING_DECODE_*``)."""

    model_config = SettingsConfigDict(env_prefix="STREAMING_DECODE_", extra="ignore")

    hwaccel: Literal["none", "cuda", "vaapi", "qsv", "videotoolbox", "d3d11va", "drm"] = "none"
    """Decode cameras on this device through FFmpeg's hwaccel (NVDEC is ``cuda``). Where it
    cannot be opened, a camera says so once (a warning, its stats' ``decoder``) and decodes
    in software."""
    threads: int = Field(default=1, ge=0, le=64)
    """Decoder threads per camera: 1 (one core per camera at most: a box watching many
    cameras spreads them over its cores), 0 for FFmpeg's choice (about one per core)."""

    def opening_fields(self) -> dict[str, Any]:
        """What ``sources.kinds.Opening`` takes of these."""
        return {"hwaccel": None if self.hwaccel == "none" else self.hwaccel,
                "decoder_threads": self.threads}  # fmt: skip


class _PeerSettings(BaseSettings):
    """How the server meets WebRTC peers and where it connects for callers: a part of
    ``Settings`` (a base class, so every field is still ``settings.<name>``)."""

    ice_servers: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """STUN/TURN URLs the server peer uses (comma-separated): ``turn:host:3478`` (UDP),
    ``turn:host:3478?transport=tcp``, ``turns:host:5349`` (TLS). Empty: nothing leaves the
    machine. aiortc uses the first TURN and the first STUN URL it supports."""
    ice_username: str | None = None
    """Long-term credential user name for the TURN URLs of ``ice_servers``."""
    ice_credential: SecretStr | None = None
    """Long-term credential password for those TURN URLs (never logged or shown)."""
    ice_transport_policy: Literal["all", "relay"] = "all"
    """``relay``: the server peer uses only relayed candidates, so it never exposes a host
    address; a session then needs a TURN server (ours or the client's) or is refused (502
    ``turn_unavailable``, saying why)."""
    ice_host_addresses: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Host addresses ICE candidates are restricted to (comma-separated); empty: all interfaces."""
    allow_client_ice_servers: bool = True
    """Honour the ICE servers a client sends in ``webrtc_config`` (their hosts checked)."""
    allowed_networks: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["0.0.0.0/0", "::/0"]
    )
    """Networks (CIDR, comma-separated) the server may connect to for a caller: cameras,
    webhooks, client ICE servers. Loopback, link-local (cloud metadata), unspecified and
    multicast addresses stay refused unless a listed network lies inside them
    (``127.0.0.0/8`` for cameras on this machine)."""
    peer_networks: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["0.0.0.0/0", "::/0"]
    )
    """Networks WebRTC peers' ICE candidates may be in (not the cameras' list); loopback only
    from a caller on this machine; link-local, multicast, unspecified only when listed."""


class Settings(_PeerSettings):
    """Everything the server can be told, from the environment or the command line."""

    model_config = SettingsConfigDict(env_prefix="STREAMING_", extra="ignore")

    host: str = "127.0.0.1"
    """Address the HTTP server binds to."""
    port: int = 9001
    """Port the HTTP server binds to."""
    models_dir: Path = Field(default_factory=lambda: Path.home() / ".cache/visionstream/models")
    """Where converted models and their manifests live."""
    default_model: str = "yolov3-tiny-416"
    """Model prepared (downloaded, converted) and warmed up before the server reports ready."""
    prepare_default_model: bool = True
    """Fetch and convert the default model on start when it is missing."""

    ready_wait_s: float = Field(default=60.0, ge=0)
    """An offer or pipeline arriving before the models are ready waits this long, then 503."""
    max_remote_candidates: int = Field(default=48, ge=1)
    """ICE candidates one offer may carry (a browser on a busy machine offers a dozen or
    two); more is answered 400 before any is parsed."""
    max_sessions: int = Field(default=16, ge=1)
    """Concurrent WebRTC sessions; one more is answered 429."""
    max_sessions_per_address: int = Field(default=8, ge=0)
    """Concurrent WebRTC sessions one client address may hold (0: up to max_sessions)."""
    http_header_timeout_s: float = Field(default=10.0, gt=0)
    """A connection whose next request head has not fully arrived by then is closed (idle
    and slowloris connections)."""
    http_body_timeout_s: float = Field(default=15.0, gt=0)
    """A request body whose next part takes longer is answered 408."""
    http_body_deadline_s: float = Field(default=60.0, gt=0)
    """A request body not complete this long after the request began is answered 408,
    however steadily it trickles in."""
    max_connections: int = Field(default=512, ge=1)
    """Concurrent HTTP connections (and requests in progress); past it new requests are
    answered 503 at once (uvicorn's ``limit_concurrency``)."""
    trusted_proxies: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Addresses or networks of reverse proxies whose ``X-Forwarded-For``/``-Proto`` are
    believed (uvicorn's ``forwarded_allow_ips``); none by default, so a client cannot pick the
    address its throttle and session cap count against."""
    max_request_bytes: int = Field(default=1024 * 1024, ge=1024)
    """Largest accepted signaling request body; larger is answered 413."""
    max_infer_request_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    """Largest inference request (``/infer/...``, ``/workflows/run``, V2 ``/v2/.../infer``)
    and largest image fetched from a URL; larger is answered 413."""
    max_images_per_request: int = Field(default=16, ge=1)
    """Images one ``/infer/...`` or workflow run request may carry; more is answered 413."""
    api_key: SecretStr | None = None
    """When set, every route but health, readiness and the page's files requires it (body
    ``api_key`` where inference-sdk sends it there, or ``Authorization: Bearer``)."""
    auth_failures_per_minute: int = Field(default=10, ge=1)
    """Wrong API keys one address may send in a minute; then 429 with ``Retry-After``."""
    metrics_require_api_key: bool = True
    """With an API key set, ``/metrics`` requires it too (false: scrapers need none)."""

    shutdown_drain_s: float = Field(default=10.0, ge=0)
    """On SIGTERM, how long live sessions and pipelines get to end (completion message sent,
    sinks flushed) before the server closes what is left and exits."""
    session_timeout_s: float = Field(default=3600.0, gt=0)
    """Session lifetime when the request gives no ``processing_timeout``."""
    max_session_timeout_s: float = Field(default=24 * 3600.0, gt=0)
    """Upper bound on any session's lifetime, whatever the request asks."""
    connect_timeout_s: float = Field(default=30.0, gt=0)
    """A peer that has not connected by then is closed and its slot freed."""
    ice_gathering_timeout_s: float = Field(default=5.0, gt=0)
    """Longest wait for the server's ICE gathering before the offer fails (504)."""

    release_frames: Literal["auto", "always", "never"] = "auto"
    """Follow each returned VP8 frame with a 3-byte hidden one, so receivers that hold a frame
    until the next begins (aiortc: every inference-sdk program) show it at once; ``auto``: for
    peers whose offer aiortc made, other than our own client (``rtc/release.py``)."""

    video_kbps_per_megapixel: int = Field(default=3000, ge=0)
    """Cap on the returned video's VP8 bitrate, per megapixel of frame (920 kbps at 640x480,
    230 kbps at 320x240); below it the bitrate follows what the receiver estimates (aiortc:
    500 kbps to 1.5 Mbps). 0: no cap. Server-wide, set at start (``rtc/encoder.py``)."""

    whip_idle_timeout_s: float = Field(default=10.0, gt=0)
    """A WHIP publisher that sends no video for this long is treated as gone: its pipeline
    source stops and its peer closes (one killed without a goodbye stays "connected" to
    ICE for much longer)."""

    video_start_kbps: int = Field(default=500, ge=50)
    """Where the returned video's bitrate starts (VP8 and H.264); the receiver's REMB then
    moves it between ``video_min_kbps`` and ``video_max_kbps``."""
    video_min_kbps: int = Field(default=250, ge=50)
    """Lowest bitrate of the returned video, whatever the receiver's REMB says."""
    video_max_kbps: int = Field(default=1500, ge=50)
    """Highest bitrate of the returned video (also capped by ``video_kbps_per_megapixel``)."""
    video_codec: Literal["auto", "vp8", "h264"] = "auto"
    """The returned video's codec: ``auto`` follows the client's offer (its first codec we
    have: VP8 from Chrome, Firefox and aiortc, H.264 from Safari); ``vp8`` or ``h264`` is
    chosen whenever the offer has it. One m-line carries both directions, so the client's
    video is received in the same codec."""
    video_receive_max_kbps: int = Field(default=1000, ge=0)
    """Highest bitrate the server's REMB lets a client send its video at (0: aiortc's
    estimate, unbounded). A client on the same machine or LAN would otherwise be raised to
    its encoder's maximum, and every packet costs the server Python time."""

    ack_window: int = Field(default=8, ge=1)
    """Processed-but-unacknowledged frames allowed in non-realtime mode once ACKs flow."""
    input_queue_frames: int = Field(default=120, ge=1)
    """Bound of the non-realtime input FIFO; overflow drops the oldest frame and reports it."""
    output_queue_frames: int = Field(default=4, ge=1)
    """Bound of the non-realtime outbound video queue (the processor waits when full)."""
    datachannel_high_water_bytes: int = Field(default=4 * 1024 * 1024, ge=65536)
    """Above this many buffered bytes the sender waits for the channel to drain."""
    datachannel_low_water_bytes: int = Field(default=1024 * 1024, ge=0)
    """The channel's ``bufferedAmountLowThreshold``: sending resumes below it."""
    datachannel_drain_timeout_s: float = Field(default=120.0, gt=0)
    """Longest wait for a congested channel before the rest of a message is abandoned."""
    max_upload_bytes: int = Field(default=2 * 1024**3, ge=1)
    """Largest uploaded video file; checked on the first chunk and on every byte after."""
    upload_dir: Path | None = None
    """Base directory of uploads (default ``<tmp>/visionstream-uploads-<uid>``); each server
    writes into a private ``server-<pid>`` directory there and, at start, removes those of
    servers that were killed."""
    upload_idle_timeout_s: float = Field(default=30.0, gt=0)
    """An upload with no chunk for this long is abandoned (its file deleted, the client told)."""
    max_frame_pixels: int = Field(default=3840 * 2160, ge=64 * 64)
    """Largest video frame a client's track may send (width x height); larger frames are
    dropped and the client told once."""
    decode_queue_frames: int = Field(default=8, ge=1)
    """Decoded frames an uploaded file's reader runs ahead; when full, decoding pauses."""
    rtsp_read_timeout: float = Field(default=5.0, gt=0)
    """A camera that sends nothing for this long is treated as disconnected (and reconnected)."""
    camera_first_frame_s: float = Field(default=15.0, gt=0)
    """How long a session that names a camera (``rtsp_url``, ``mjpeg_url``) waits for its
    first frame before answering 502. A camera that refuses the connection fails at once;
    this covers one that connects and is slow to send (a loaded server or camera)."""
    rtsp_max_backoff: float = Field(default=10.0, gt=0)
    """Longest wait between reconnection attempts to a camera (the wait doubles up to it)."""
    allow_local_sources: bool = False
    """Let pipelines read local files and device indexes (the server's own disk and cameras)."""
    max_pipelines: int = Field(default=8, ge=1)
    """Concurrent monitoring pipelines; one more is answered 429."""
    sink_dir: Path = Field(
        default_factory=lambda: Path.home() / ".local" / "share" / "visionstream" / "sinks"
    )
    """Where pipelines' jsonl and video_file sinks and workflows' event sinks write (requests
    name files, never paths)."""
    workflow_secrets: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Variables ``environment_secrets_store`` may read (never ``STREAMING_*``)."""
    file_sink_dir: Path | None = None
    """Where ``local_file_sink`` steps may write; unset, such a step is refused."""
    smtp: SmtpSettings = Field(default_factory=SmtpSettings)
    """Mail (``STREAMING_SMTP_*``)."""
    decode: DecodeSettings = Field(default_factory=DecodeSettings)  # STREAMING_DECODE_*
    limits: WorkflowLimits = Field(default_factory=WorkflowLimits)  # STREAMING_LIMIT_*
    auth: AuthSettings = Field(default_factory=AuthSettings)  # STREAMING_AUTH_*
    data_dir: Path = Field(
        default_factory=lambda: Path.home() / ".local" / "share" / "visionstream"
    )
    """The server's own state: ``pipelines/`` holds the requests of running pipelines, so a
    restarted server restarts them (one server per directory)."""
    data_group_readable: bool = False
    """Let the owner's group read what the server stores (``data_dir``, ``sink_dir``): by
    default only the server's own user can (directories 0700, files 0600)."""
    store_events: bool = True
    """Keep events (line crossings, zone entries and exits, event sinks, sources' states,
    failures) in the event store, for ``GET /events``."""
    events_url: str | None = None
    """The event store: None keeps it in ``<data_dir>/events.sqlite3`` (SQLite, one
    server); ``postgresql://user:password@host/db`` for a cluster, where every replica and
    pipeline actor writes to it and any replica answers. Its password is never logged."""
    events_max_age_days: float | None = Field(default=30.0, gt=0)
    """Events older than this are deleted, with their snapshots and clips (None: kept)."""
    events_max_count: int | None = Field(default=5_000_000, ge=1)
    """At most this many events are kept: the oldest go first, with their evidence."""
    events_queue: int = Field(default=10_000, ge=1)
    """Events waiting for the database at most (it is down or slow); beyond, they are
    dropped and counted (``visionstream_events_dropped``), and frames never wait."""
    recordings_min_free_mb: int = Field(default=1024, ge=0)
    """Pipelines' recordings never fill the disk: below this much free space the oldest
    segments are removed, and with none left no new segment starts."""
    max_export_seconds: float = Field(default=3600.0, gt=0)
    """Longest range ``GET /recordings/{pipeline}/{source}`` exports as one file."""
    persist_pipelines: bool = True
    """Keep pipelines across restarts (false: a server starts with none)."""
    ray_proxy_location: Literal["EveryNode", "HeadOnly"] = "EveryNode"
    """``serve --ray``: where Ray Serve runs its HTTP proxy on ``host:port``. EveryNode lets a
    load balancer reach any node; HeadOnly where nodes share an address (one machine)."""
    ray_min_replicas: int = Field(default=1, ge=1)
    """``serve --ray --replicas auto``: media replicas kept however few sessions there are."""
    ray_max_replicas: int | None = Field(default=None, ge=1)
    """``serve --ray --replicas auto``: the most media replicas (default: one per CPU of the
    cluster when the server starts)."""
    ray_replica_resources: dict[str, float] = Field(default_factory=lambda: {"CPU": 1.0})
    """``serve --ray``: what each media replica reserves (its loop is one core's work); on GPU
    nodes add a ``GPU`` share (``{"CPU": 1, "GPU": 0.125}``), or the replica sees no GPU."""
    ray_models: Literal["replica", "deployment"] = "replica"
    """``serve --ray``: where the default model runs: in every replica (measured the better
    on CPUs: benchmarks/README.md), or one Ray Serve deployment batching for all of them."""
    ray_model_resources: dict[str, float] = Field(default_factory=lambda: {"CPU": 1.0})
    """``serve --ray`` with ``ray_models=deployment``: what the model deployment reserves
    (``{"CPU": 1, "GPU": 1}`` for a GPU of its own)."""
    ray_pipeline_resources: dict[str, float] = Field(default_factory=lambda: {"CPU": 1.0})
    """``serve --ray``: what each pipeline's actor reserves on its node: ``CPU``, ``GPU`` (as
    for replicas) and custom resources (``{"CPU": 1, "cameras": 1}`` keeps pipelines on
    nodes that declare ``cameras``)."""
    workflows_dir: Path | None = None
    """Directory of ``<id>.json`` workflow specifications requests may name as ``local/<id>``."""
    jpeg_quality: int = Field(default=80, ge=1, le=100)
    """Quality of JPEG images serialized into data-channel results."""
    gzip_level: int = Field(default=6, ge=1, le=9)
    """gzip level of data-channel results that carry data outputs."""

    inference_backend: BackendName | None = None
    """Runtime for every model, overriding manifests (``torch``: the ``torch`` extra). ``auto``:
    ONNX Runtime (TensorRT, CUDA) with an NVIDIA driver, else OpenVINO (2x ORT on CPUs)."""
    onnx_providers: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """ONNX Runtime providers in order of preference; empty: the best that loads here
    (TensorRT and CUDA only where an NVIDIA driver is present)."""
    onnx_device_id: int = Field(default=0, ge=0)
    """CUDA / TensorRT device."""
    onnx_intra_op_threads: int = Field(default=0, ge=0)
    """ONNX Runtime intra-op threads (0: ONNX Runtime decides)."""
    trt_fp16: bool = True
    """Let TensorRT run layers in fp16."""
    trt_cache_dir: Path = Field(
        default_factory=lambda: Path.home() / ".cache" / "visionstream" / "trt-engines"
    )
    """Where TensorRT engines are cached (building one takes minutes)."""
    openvino_device: str = "AUTO"
    """OpenVINO device: AUTO, CPU, GPU."""
    openvino_performance_hint: Literal["LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT"] = "LATENCY"
    """OpenVINO's performance hint."""
    openvino_precision: Literal["f32", "bf16", "f16"] | None = None
    """OpenVINO inference precision; unset: the device's default (bf16 on CPUs that have it,
    which shifts scores by up to ~0.07; f32 matches ONNX Runtime)."""
    openvino_requests: int = Field(default=0, ge=0)
    """In-flight OpenVINO infer requests per model (0: the device's optimal number)."""
    remote_inference_api_key: SecretStr | None = None
    """Sent as ``Authorization: Bearer`` to the remote V2 server (never logged)."""
    remote_inference_url: str | None = None
    """V2 server (``http://host:8000`` or ``grpc://host:8001``) for models whose backend is
    ``remote`` and whose manifest names no server."""
    max_batch_size: int = Field(default=0, ge=0)
    """Largest cross-session batch per model; 0: 1 on CPU (batching does not pay there), 16
    on GPUs and remote servers."""
    max_queue_delay_ms: float = Field(default=2.0, ge=0)
    """How long a batch gathers frames while another runs (on an idle device: at once)."""
    batch_workers: int = Field(default=2, ge=1)
    """Batches of one model in flight at once (one forms while the other runs)."""
    max_crop_batch: int = Field(default=32, ge=1)
    """The most crops of one frame a model runs at once (1: each on its own)."""
    access_log: bool = False
    """Log every HTTP request (uvicorn's access log, keys in queries masked)."""
    input_variants: bool = True
    """On CPUs, run frames on a model's smaller input variants where they fit (16:9: 416x288)."""
    malloc_trim: bool = True
    """After sessions end, return freed heap to the system (glibc's ``malloc_trim``): without
    it RSS creeps up with session churn (``benchmarks churn``)."""
    workflow_threads: int = Field(default=4, ge=1)
    """Threads that run workflows (preprocess, inference, annotate, serialize) for all sessions."""

    @model_validator(mode="after")
    def _bitrates_in_order(self) -> Settings:
        if not self.video_min_kbps <= self.video_start_kbps <= self.video_max_kbps:
            raise ValueError(
                "video bitrates must be ordered: video_min_kbps <= video_start_kbps <= "
                f"video_max_kbps (got {self.video_min_kbps}, {self.video_start_kbps}, "
                f"{self.video_max_kbps})"
            )
        return self

    @field_validator("ice_servers", "ice_host_addresses", "onnx_providers", "allowed_networks",
                     "peer_networks", "trusted_proxies", "workflow_secrets",
                     mode="before")  # fmt: skip
    @classmethod
    def _csv(cls, value: object) -> object:
        return _split_csv(value)

    @field_validator("allowed_networks", "peer_networks", "trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for network in value:
            ipaddress.ip_network(network, strict=False)  # ValueError names the bad one
        return value


class ClientSettings(BaseSettings):
    """What our client can be told by the environment; arguments given in code or on the
    command line win. Narrow on purpose: a client never reads the server's settings."""

    model_config = SettingsConfigDict(env_prefix="VISIONSTREAM_", extra="ignore")

    api_url: str = "http://127.0.0.1:9001"
    """The server ``Client()`` and ``visionstream stream`` talk to."""
    api_key: SecretStr | None = None
    """The server's API key (never logged)."""
    connect_timeout_s: float = Field(default=30.0, gt=0)
    """Seconds to set a session up (signaling and ICE)."""
    request_timeout_s: float = Field(default=90.0, gt=0)
    """Seconds one HTTP request to the server may take."""
    release_on_marker: bool = True
    """Our connections' video receivers release each frame on its last packet (one frame
    interval sooner than aiortc's own); off: aiortc's buffer, and the server sends the hidden
    frames it sends any aiortc receiver (``streaming/rtc/``)."""
    ice_host_addresses: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """``visionstream stream`` only: host addresses ICE offers (comma-separated); empty: every
    interface, or loopback for a server on this machine. Process-wide, so the library leaves
    it to the program."""

    @field_validator("ice_host_addresses", mode="before")
    @classmethod
    def _csv(cls, value: object) -> object:
        return _split_csv(value)


def unknown_settings(environ: Mapping[str, str] | None = None) -> list[str]:
    """A line for each ``STREAMING_*`` variable no setting reads (a typo the server would
    otherwise ignore without a word), with the nearest settings' names."""
    from .suggest import did_you_mean

    known = set()
    for model, prefix in ((Settings, "STREAMING_"), (SmtpSettings, "STREAMING_SMTP_"),
                          (DecodeSettings, "STREAMING_DECODE_"),
                          (WorkflowLimits, "STREAMING_LIMIT_"),
                          (AuthSettings, "STREAMING_AUTH_")):  # fmt: skip
        known |= {prefix + name.upper() for name in model.model_fields}
    lines = []
    for name in sorted(os.environ if environ is None else environ):
        if name.startswith("STREAMING_") and name.upper() not in known:
            close = did_you_mean(name, known)
            lines.append(
                f"{name} is not a setting, and is ignored" + (f"; {close}" if close else "")
            )
    return lines
