// The webcam published over WHIP and its annotated output played over WHEP (RFC 9725): the
// standard protocols OBS, GStreamer and FFmpeg speak, from the page. The workflow's results go
// to its sinks; the page shows the video only (no data channel in either protocol).

import { StreamError, candidatePath, deleteResource, exchangeSdp, iceGathered } from "./protocol.js";
import { ICE_FAILED } from "./session.js";

export class WhipSession {
  /**
   * @param {object} options
   *   source: {kind: "webcam", stream}; workflow: {workspace_name, workflow_id};
   *   parameters (query parameters of the WHIP URL), ice (iceConfiguration()), apiKey, and
   *   the callbacks onState, onConnection, onTrack, onPath, onError (as StreamSession's)
   */
  constructor(options) {
    this.options = options;
    this.state = "new";
    this.closed = false;
    this.resultsReceived = 0;
    this.lastFrameId = 0;
    this.dropped = 0;
    this.latencyMs = null;
    this.latencyBasis = null;
    this.pc = null; // the publisher
    this.player = null;
    this.resource = null; // the WHIP resource's URL
    this.playback = null; // the WHEP session's URL
  }

  #setState(state) {
    if (this.state === state) return;
    this.state = state;
    this.options.onState?.(state);
  }

  async start() {
    const { source, workflow, parameters, apiKey } = this.options;
    const ice = this.options.ice ?? { iceServers: [], iceTransportPolicy: "all" };
    this.#setState("connecting");
    const publisher = new RTCPeerConnection(ice);
    this.pc = publisher;
    publisher.addEventListener("connectionstatechange", () => this.#onConnection(publisher));
    for (const track of source.stream.getVideoTracks()) {
      publisher.addTransceiver(track, { direction: "sendonly", streams: [source.stream] });
    }
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(parameters ?? {})) {
      query.set(name, typeof value === "string" ? value : JSON.stringify(value));
    }
    const path =
      `/whip/workflows/${encodeURIComponent(workflow.workspace_name)}/` +
      `${encodeURIComponent(workflow.workflow_id)}` + (query.size ? `?${query}` : "");
    const published = await this.#offer(publisher, path);
    if (published === null) return;
    this.resource = published.location;

    const player = new RTCPeerConnection(ice);
    this.player = player;
    player.addTransceiver("video", { direction: "recvonly" });
    player.addEventListener("track", (event) => this.options.onTrack?.(new MediaStream([event.track])));
    player.addEventListener("connectionstatechange", () => this.#onConnection(player));
    const id = this.resource.split("/").pop();
    const played = await this.#offer(player, `/whep/resources/${encodeURIComponent(id)}`);
    if (played === null) return;
    this.playback = played.location;
  }

  /** Offer, gathered whole (no trickle), POSTed; the answer applied. Null once closed. */
  async #offer(pc, path) {
    await pc.setLocalDescription(await pc.createOffer());
    await iceGathered(pc);
    if (this.closed) return null;
    const answer = await exchangeSdp(path, pc.localDescription.sdp, this.options.apiKey);
    if (this.closed) {
      deleteResource(answer.location, this.options.apiKey);
      return null;
    }
    await pc.setRemoteDescription({ type: "answer", sdp: answer.sdp });
    return answer;
  }

  #onConnection(pc) {
    const state = pc.connectionState;
    if (pc === this.player) this.options.onConnection?.(state);
    if (state === "connected" && pc === this.player) {
      this.#setState("connected");
      candidatePath(pc).then((path) => path && this.options.onPath?.(path), () => {});
    } else if (state === "failed" && !this.closed) {
      this.options.onError?.(new StreamError(ICE_FAILED));
      this.close("failed");
    }
  }

  /** Ends both (idempotent): DELETE on the player's and the publisher's resources. */
  close(state = "stopped") {
    if (this.closed) return;
    this.closed = true;
    const { apiKey, source } = this.options;
    if (this.playback) deleteResource(this.playback, apiKey);
    if (this.resource) deleteResource(this.resource, apiKey);
    this.player?.close();
    this.pc?.close();
    for (const track of source.stream.getTracks()) track.stop();
    this.#setState(state);
  }
}
