// One WebRTC session with the server: the same requests and channels as the Python clients.
// Sources: a camera MediaStream (sent), a File (uploaded), or a camera URL / pipeline the server
// reads (receive-only). No DOM in here: the page listens to the callbacks.

import {
  ResultAssembler,
  StreamError,
  candidatePath,
  decodeResult,
  iceGathered,
  negotiate,
  receivedAtMs,
  uploadFile,
  waitForEvent,
} from "./protocol.js";
import { connectionProblem, hopeless } from "./reach.js";

export const ICE_FAILED =
  "The video connection (ICE) failed: this browser and the server could not reach each other's " +
  "media ports. A firewall or NAT may be in the way: set a TURN server under “Network”, or the " +
  "server's VISIONSTREAM_ICE_SERVERS; VISIONSTREAM_ICE_HOST_ADDRESSES controls what it offers.";

const SENT_TIMES_KEPT = 600; // ~20 s of 30 fps: results come back long before that
const PAIRING_RESULTS = 30; // results without a paired send time before falling back

/**
 * Records when each encoded frame left this page, keyed by its RTP timestamp, which every
 * result's `pts` carries less a constant: a result's arrival minus its frame's send time is the
 * end-to-end latency on one clock (this page's). Chromium's encoded-frame API only.
 */
function recordSendTimes(sender, sentAt) {
  if (typeof sender.createEncodedStreams !== "function") return false;
  const { readable, writable } = sender.createEncodedStreams();
  const stamp = new TransformStream({
    transform(frame, controller) {
      const rtp = frame.getMetadata?.().rtpTimestamp ?? frame.timestamp;
      sentAt.set(rtp, performance.now());
      if (sentAt.size > SENT_TIMES_KEPT) sentAt.delete(sentAt.keys().next().value);
      controller.enqueue(frame);
    },
  });
  readable.pipeThrough(stamp).pipeTo(writable).catch(() => {}); // ends with the connection
  return true;
}

/** With the encoded-frame API on, Chromium holds every receiver's frames until piped. */
function passThrough(receiver) {
  if (typeof receiver.createEncodedStreams !== "function") return;
  const { readable, writable } = receiver.createEncodedStreams();
  readable.pipeTo(writable).catch(() => {});
}

export class StreamSession {
  /**
   * @param {object} options
   *   source: {kind: "webcam", stream} | {kind: "file", file} | {kind: "camera", url} |
   *           {kind: "pipeline", pipelineId, sourceId}
   *   workflow: {workspace_name, workflow_id} (not needed to watch a pipeline)
   *   parameters: the workflow's parameters (e.g. a line the user drew), or none
   *   realtime: drop frames to keep up (false: every frame, with ACKs)
   *   ice: {iceServers, iceTransportPolicy} (iceConfiguration()): used here and sent to the
   *        server, which then relays through the same TURN server
   *   apiKey, and callbacks onState(state), onTrack(MediaStream), onResult(result, latencyMs),
   *   onUpload(sent, total), onComplete(reason), onError(StreamError), onPath(text): the
   *   candidate pair in use ("host → host", "relay → host")
   */
  constructor(options) {
    this.options = options;
    this.state = "new";
    this.resultsReceived = 0;
    this.lastFrameId = 0;
    this.dropped = 0;
    this.latencyMs = null;
    this.latencyBasis = null; // "sent" (this page's clock) or "server" (server clock, estimate)
    this.pc = null;
    this.closed = false;
    this.#abort = new AbortController();
  }

  #abort;
  #connected = false;
  #assembler = new ResultAssembler();
  #decoding = Promise.resolve();
  #sentAt = new Map();
  #offsets = null;
  #offset = null;
  #results = null;

  #setState(state) {
    if (this.state === state) return;
    this.state = state;
    this.options.onState?.(state);
  }

  #fail(error) {
    if (this.closed) return;
    const failure = error instanceof StreamError ? error : new StreamError(String(error?.message ?? error));
    this.options.onError?.(failure);
    this.close("failed");
  }

  async start() {
    const { source, realtime, apiKey } = this.options;
    const encoded =
      source.kind === "webcam" && typeof RTCRtpSender.prototype.createEncodedStreams === "function";
    const ice = this.options.ice ?? { iceServers: [], iceTransportPolicy: "all" };
    const pc = new RTCPeerConnection({ ...ice, encodedInsertableStreams: encoded });
    this.pc = pc;
    pc.addEventListener("connectionstatechange", () => this.#onConnectionState());
    pc.addEventListener("track", (event) => {
      if (encoded) passThrough(event.receiver);
      this.options.onTrack?.(new MediaStream([event.track]));
    });

    if (source.kind === "webcam") {
      for (const track of source.stream.getVideoTracks()) {
        const transceiver = pc.addTransceiver(track, { direction: "sendrecv", streams: [source.stream] });
        if (encoded && recordSendTimes(transceiver.sender, this.#sentAt)) this.latencyBasis = "sent";
      }
    } else {
      pc.addTransceiver("video", { direction: "recvonly" });
    }
    // A browser offers a data section only when the page creates a channel before the offer.
    const results = pc.createDataChannel("inference");
    results.binaryType = "arraybuffer";
    results.addEventListener("message", (event) => this.#onMessage(event.data));
    results.addEventListener("close", () => {
      if (!this.closed) this.#fail(new StreamError("The server ended the session."));
    });
    this.#results = results;
    const upload = source.kind === "file" ? pc.createDataChannel("video_upload") : null;

    this.#setState("connecting");
    await pc.setLocalDescription(await pc.createOffer());
    await iceGathered(pc);
    if (this.closed) return;
    const answer = await negotiate(this.#request(pc.localDescription), apiKey);
    if (this.closed) return;
    await pc.setRemoteDescription({ type: answer.type, sdp: answer.sdp });
    this.#watchConnecting(answer.connect_timeout_s);

    if (upload !== null) {
      upload.binaryType = "arraybuffer";
      if (upload.readyState !== "open") {
        await waitForEvent(upload, ["open", "close"], { signal: this.#abort.signal });
      }
      if (upload.readyState !== "open") throw new StreamError("the upload channel closed before it opened");
      this.#setState("uploading");
      await uploadFile(upload, source.file, {
        signal: this.#abort.signal,
        onProgress: (sent, total) => this.options.onUpload?.(sent, total),
      });
      if (this.state === "uploading") this.#setState("processing");
    }
  }

  #request(offer) {
    const { source, workflow, realtime, apiKey, parameters } = this.options;
    const body = {
      webrtc_offer: { type: offer.type, sdp: offer.sdp },
      webrtc_realtime_processing: Boolean(realtime),
      data_output: ["*"],
      stream_output: null, // the workflow's first image output, drawn by the server
    };
    if (apiKey) body.api_key = apiKey;
    const servers = this.options.ice?.iceServers ?? [];
    if (servers.length) body.webrtc_config = { iceServers: servers };
    if (source.kind === "pipeline") {
      body.pipeline_id = source.pipelineId;
      body.pipeline_source_id = source.sourceId ?? 0;
      return body;
    }
    body.workflow_configuration = {
      type: "WorkflowConfiguration",
      workspace_name: workflow.workspace_name,
      workflow_id: workflow.workflow_id,
      image_input_name: "image",
    };
    if (parameters && Object.keys(parameters).length) {
      body.workflow_configuration.workflows_parameters = parameters;
    }
    if (source.kind === "camera") {
      const field = /^rtsps?:\/\//i.test(source.url) ? "rtsp_url" : "mjpeg_url";
      body[field] = source.url;
    }
    return body;
  }

  /**
   * Says at once when the answer leaves nothing this browser could reach, and otherwise when
   * the server's own connect timeout has passed (it has closed its side by then): a connection
   * that failed must not look like one that is still coming.
   */
  #watchConnecting(timeoutS) {
    const pc = this.pc;
    const host = location.hostname;
    const early = hopeless(pc.localDescription?.sdp, pc.remoteDescription?.sdp, host);
    if (early) {
      this.#fail(new StreamError(early));
      return;
    }
    const seconds = timeoutS ?? 30;
    const timer = setTimeout(() => {
      if (this.#connected || this.closed) return;
      const why = connectionProblem(pc.localDescription?.sdp, pc.remoteDescription?.sdp, host, seconds);
      this.#fail(new StreamError(why));
    }, (seconds + 1) * 1000);
    this.#abort.signal.addEventListener("abort", () => clearTimeout(timer));
  }

  #onConnectionState() {
    const state = this.pc?.connectionState;
    this.options.onConnection?.(state);
    if (state === "connected") {
      this.#connected = true;
      if (this.state === "connecting") this.#setState("connected");
      candidatePath(this.pc).then((path) => path && this.options.onPath?.(path), () => {});
    } else if (state === "failed") {
      const { localDescription, remoteDescription } = this.pc;
      this.#fail(
        new StreamError(
          this.#connected
            ? "The connection to the server was lost."
            : connectionProblem(localDescription?.sdp, remoteDescription?.sdp, location.hostname),
        ),
      );
    }
  }

  #onMessage(data) {
    let payload;
    try {
      payload = typeof data === "string" ? new TextEncoder().encode(data) : this.#assembler.add(data);
    } catch (error) {
      console.warn("visionstream: result chunk refused:", error.message);
      return;
    }
    if (payload === null) return;
    const arrived = performance.now();
    const arrivedWall = Date.now();
    // Decoding is asynchronous (gzip); chaining keeps results in arrival order.
    this.#decoding = this.#decoding
      .then(() => decodeResult(payload))
      .then((message) => this.#onResult(message, arrived, arrivedWall))
      .catch((error) => console.warn("visionstream: unreadable result:", error));
  }

  #onResult(message, arrived, arrivedWall) {
    if (this.closed) return;
    const metadata = message.video_metadata ?? {};
    if (message.processing_complete) {
      this.#setState("done");
      this.options.onComplete?.(message.termination_reason ?? null);
      this.close("done");
      return;
    }
    this.resultsReceived += 1;
    this.lastFrameId = metadata.frame_id ?? this.lastFrameId;
    if (typeof metadata.dropped_frames === "number") this.dropped = metadata.dropped_frames;
    this.latencyMs = this.#latency(metadata, arrived, arrivedWall) ?? this.latencyMs;
    if (this.state === "connecting") this.#setState("connected");
    this.options.onResult?.(message, this.latencyMs);
    if (!this.options.realtime && this.#results?.readyState === "open" && metadata.frame_id) {
      this.#results.send(JSON.stringify({ ack: metadata.frame_id }));
    }
  }

  /**
   * When the frame behind a result left this page. The server's `pts` counts from the first
   * frame it returns (aiortc rebases RTP timestamps too), so pts = rtp - offset for one unknown
   * offset: keep the offsets that fit every result so far until one remains (frame intervals
   * are uneven, so that takes two or three results).
   */
  #sendTime(pts) {
    if (typeof pts !== "number") return undefined;
    if (this.#offset === null) {
      const fits = new Set([...this.#sentAt.keys()].map((rtp) => (rtp - pts) >>> 0));
      const kept = this.#offsets === null ? fits : new Set([...this.#offsets].filter((o) => fits.has(o)));
      this.#offsets = kept.size > 0 ? kept : null; // none fit: frames were forgotten; start over
      if (kept.size !== 1) return undefined;
      this.#offset = [...kept][0];
    }
    return this.#sentAt.get((pts + this.#offset) >>> 0);
  }

  #latency(metadata, arrived, arrivedWall) {
    const sent = this.#sendTime(metadata.pts);
    if (sent !== undefined) {
      this.latencyBasis = "sent";
      return arrived - sent;
    }
    // A frame we no longer remember, or still pairing: wait, unless pairing never succeeds.
    const pairing = this.#offset !== null || this.resultsReceived < PAIRING_RESULTS;
    if (this.latencyBasis === "sent" && pairing) return null;
    // No send time to pair with (uploads, server-read cameras, browsers without the
    // encoded-frame API): from the server's receipt of the frame, on the two machines' clocks.
    const received = receivedAtMs(metadata.received_at);
    if (received === null) return null;
    this.latencyBasis = "server";
    return Math.max(0, arrivedWall - received);
  }

  /** Ends the session (idempotent): the server sees the peer go and frees its slot. */
  close(state = "stopped") {
    if (this.closed) return;
    this.closed = true;
    this.#abort.abort();
    this.pc?.close();
    if (this.options.source.kind === "webcam") {
      for (const track of this.options.source.stream.getTracks()) track.stop();
    }
    if (this.state !== "done") this.#setState(state);
  }
}
