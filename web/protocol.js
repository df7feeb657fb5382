// Wire formats the page shares with the Python clients (webrtc-protocol.md §1–3): signaling,
// the result channel's <III chunks (gzip when data outputs are on), the upload channel's <II
// chunks. No DOM in here.

export const RESULT_HEADER_BYTES = 12;
export const CHUNK_BYTES = 48 * 1024;
export const UPLOAD_HEADER_BYTES = 8;
const UPLOAD_HIGH_WATER = 256 * 1024; // what the SDK throttles at
const UPLOAD_LOW_WATER = 64 * 1024;
const UTF8 = new TextDecoder();

/** A failure the person should read: `message` is already in words. */
export class StreamError extends Error {
  /** `said`: the server's own message, where it answered with one. */
  constructor(message, { status = null, cause = undefined, said = null } = {}) {
    super(message, { cause });
    this.name = "StreamError";
    this.status = status;
    this.said = said;
  }
}

/**
 * Collects result chunks per message id, bounded like the Python client's Reassembler: the
 * headers come from the peer, so nothing is sized from them. A message that declares more than
 * the byte budget is refused at its first chunk; incomplete messages more than `window` ids
 * behind the newest are dropped; the oldest go while held bytes exceed `maxBytes`.
 */
export class ResultAssembler {
  constructor({ window = 64, maxBytes = 64 << 20 } = {}) {
    this.window = window;
    this.maxBytes = maxBytes;
    this.pending = new Map(); // id -> {total, parts: Map(index -> Uint8Array), bytes}
    this.newest = null;
    this.pendingBytes = 0;
    this.dropped = 0;
    this.rejected = 0;
  }

  /** Returns the payload (Uint8Array) once complete, else null; throws on a bad chunk. */
  add(buffer) {
    if (buffer.byteLength < RESULT_HEADER_BYTES) {
      return this.#reject(`chunk of ${buffer.byteLength} bytes is shorter than its header`);
    }
    const header = new DataView(buffer, 0, RESULT_HEADER_BYTES);
    const id = header.getUint32(0, true);
    const index = header.getUint32(4, true);
    const total = header.getUint32(8, true);
    if (total === 0 || index >= total) return this.#reject(`chunk ${index} of ${total} is out of range`);
    if ((total - 1) * CHUNK_BYTES >= this.maxBytes) {
      return this.#reject(`message ${id} declares ${total} chunks, beyond the byte budget`);
    }
    if (this.newest !== null && id + this.window < this.newest) {
      return this.#reject(`chunk of message ${id} arrived after its window closed`);
    }
    const payload = new Uint8Array(buffer, RESULT_HEADER_BYTES);
    if (total === 1 && !this.pending.has(id)) {
      this.#advance(id);
      if (this.pending.size > 0) this.#evict();
      return payload; // the common case: one chunk, nothing to hold
    }
    let message = this.pending.get(id);
    if (message === undefined) {
      message = { total, parts: new Map(), bytes: 0 };
      this.pending.set(id, message);
    } else if (message.total !== total) {
      this.#discard(id);
      return this.#reject(`message ${id} changed its chunk count (${message.total} -> ${total})`);
    }
    const previous = message.parts.get(index);
    message.bytes += payload.byteLength - (previous ? previous.byteLength : 0);
    this.pendingBytes += payload.byteLength - (previous ? previous.byteLength : 0);
    message.parts.set(index, payload);
    this.#advance(id);
    if (message.parts.size === total) {
      this.#discard(id);
      const whole = new Uint8Array(message.bytes);
      let offset = 0;
      for (let i = 0; i < total; i++) {
        whole.set(message.parts.get(i), offset);
        offset += message.parts.get(i).byteLength;
      }
      this.#evict();
      return whole;
    }
    this.#evict();
    return null;
  }

  #advance(id) {
    if (this.newest === null || id > this.newest) this.newest = id;
  }

  #evict() {
    for (const id of [...this.pending.keys()]) {
      if (id + this.window < this.newest) {
        this.#discard(id);
        this.dropped += 1;
      }
    }
    while (this.pendingBytes > this.maxBytes && this.pending.size > 0) {
      this.#discard(this.pending.keys().next().value);
      this.dropped += 1;
    }
  }

  #discard(id) {
    const message = this.pending.get(id);
    if (message === undefined) return;
    this.pending.delete(id);
    this.pendingBytes -= message.bytes;
  }

  #reject(reason) {
    this.rejected += 1;
    throw new StreamError(reason);
  }
}

/** The client rule: a payload that starts with the gzip magic is gzip; then UTF-8 JSON. */
export async function decodeResult(payload) {
  let bytes = payload;
  if (bytes.byteLength >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b) {
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    bytes = new Uint8Array(await new Response(stream).arrayBuffer());
  }
  return JSON.parse(UTF8.decode(bytes));
}

/** The server's `received_at` (naive ISO, the server's local time) as epoch milliseconds. */
export function receivedAtMs(text) {
  if (typeof text !== "string") return null;
  const value = Date.parse(text.replace(/(\.\d{3})\d+/, "$1"));
  return Number.isFinite(value) ? value : null;
}

/** The first of `names` (one name or a list) fired on `target`; null after `timeoutMs`. */
export function waitForEvent(target, names, { signal, timeoutMs } = {}) {
  const list = Array.isArray(names) ? names : [names];
  return new Promise((resolve, reject) => {
    const cleanup = () => {
      for (const name of list) target.removeEventListener(name, done);
      signal?.removeEventListener("abort", aborted);
      clearTimeout(timer);
    };
    const done = (event) => {
      cleanup();
      resolve(event);
    };
    const aborted = () => {
      cleanup();
      reject(new StreamError("stopped"));
    };
    const timer = timeoutMs ? setTimeout(() => done(null), timeoutMs) : undefined;
    for (const name of list) target.addEventListener(name, done);
    signal?.addEventListener("abort", aborted);
  });
}

/** Resolves once ICE gathering completes (or after `timeoutMs`: send what we have). */
export async function iceGathered(pc, timeoutMs = 3000) {
  const deadline = performance.now() + timeoutMs;
  while (pc.iceGatheringState !== "complete") {
    const left = deadline - performance.now();
    if (left <= 0 || (await waitForEvent(pc, "icegatheringstatechange", { timeoutMs: left })) === null) {
      return;
    }
  }
}

/**
 * Who this key is, by the server's word (GET /auth/me): `{ name, role, can: { watch, run,
 * admin } }`, or null when the server does not take it (no key, a wrong one).
 */
export async function signedIn(apiKey) {
  try {
    return await getJson("/auth/me", apiKey);
  } catch {
    return null;
  }
}

/** What the status bar says of a `signedIn` answer. */
export function signedInText(me) {
  if (!me) return "no key";
  return me.via === "open" ? "open server (admin)" : `${me.name} (${me.role})`;
}

/** Request headers, with the API key as a Bearer token when one is given. */
export function authHeaders(apiKey, extra = {}) {
  return apiKey ? { ...extra, Authorization: `Bearer ${apiKey}` } : extra;
}

/** GET a JSON resource of this server; failures become a StreamError in words. */
export async function getJson(path, apiKey) {
  return readJson(path, await send(path, { headers: authHeaders(apiKey) }));
}

/** POST the offer; returns the answer, or throws a StreamError carrying the server's message. */
export async function negotiate(body, apiKey) {
  const path = "/initialise_webrtc_worker";
  const response = await send(path, {
    method: "POST",
    headers: authHeaders(apiKey, { "Content-Type": "application/json" }),
    body: JSON.stringify(body),
  });
  return readJson(path, response);
}

async function send(path, init) {
  try {
    return await fetch(path, init);
  } catch (error) {
    throw new StreamError(
      `Cannot reach the server at ${location.origin} (${error.message}). Is visionstream running?`,
      { cause: error },
    );
  }
}

async function readJson(path, response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // a proxy's HTML error page, an empty body: the status says enough
  }
  if (!response.ok) {
    const said = body && typeof body.message === "string" ? body.message : response.statusText;
    const hint = response.status === 401 ? " Enter the server's API key under “API key”." : "";
    throw new StreamError(`The server answered ${response.status} to ${path}: ${said}.${hint}`, {
      status: response.status,
      said: body && typeof body.message === "string" ? body.message : null,
    });
  }
  return body;
}

/**
 * Sends `file` over the `video_upload` channel: <II header (chunk index, total chunks) + up to
 * 48 KiB, in order, pausing while more than 256 KiB are buffered. `onProgress(sent, total)`.
 */
export async function uploadFile(channel, file, { onProgress, signal } = {}) {
  const total = Math.max(1, Math.ceil(file.size / CHUNK_BYTES));
  channel.bufferedAmountLowThreshold = UPLOAD_LOW_WATER;
  for (let index = 0; index < total; index++) {
    if (signal?.aborted || channel.readyState !== "open") throw new StreamError("upload stopped");
    const piece = await file.slice(index * CHUNK_BYTES, (index + 1) * CHUNK_BYTES).arrayBuffer();
    const message = new Uint8Array(UPLOAD_HEADER_BYTES + piece.byteLength);
    const header = new DataView(message.buffer, 0, UPLOAD_HEADER_BYTES);
    header.setUint32(0, index, true);
    header.setUint32(4, total, true);
    message.set(new Uint8Array(piece), UPLOAD_HEADER_BYTES);
    while (channel.bufferedAmount > UPLOAD_HIGH_WATER) {
      await waitForEvent(channel, ["bufferedamountlow", "close"], { signal });
      if (channel.readyState !== "open") throw new StreamError("upload stopped: the channel closed");
    }
    channel.send(message);
    onProgress?.(index + 1, total);
  }
}

/**
 * WHIP/WHEP (RFC 9725): POSTs the complete offer as application/sdp, the API key as the
 * bearer token; returns the answer and the resource's URL (DELETE there ends it).
 */
export async function exchangeSdp(path, offerSdp, apiKey) {
  const response = await send(path, {
    method: "POST",
    headers: authHeaders(apiKey, { "Content-Type": "application/sdp" }),
    body: offerSdp,
  });
  if (response.status !== 201) await readJson(path, response); // throws, in words
  const resource = new URL(response.headers.get("Location"), globalThis.location.origin).href;
  return { sdp: await response.text(), location: resource };
}

/** DELETE a WHIP or WHEP resource; best effort (the server also notices a peer going). */
export async function deleteResource(url, apiKey) {
  try {
    await fetch(url, { method: "DELETE", headers: authHeaders(apiKey) });
  } catch {
    // the server is gone; nothing to end
  }
}

/** The ICE configuration for a page's settings: a TURN server (or none), relay-only or not. */
export function iceConfiguration({ turnUrl = "", username = "", credential = "", relayOnly = false } = {}) {
  const iceServers = turnUrl ? [{ urls: turnUrl, username, credential }] : [];
  return { iceServers, iceTransportPolicy: relayOnly ? "relay" : "all" };
}

/**
 * The candidate pair in use, as "<local type> → <remote type>" (host, srflx, prflx, relay),
 * from the browser's own statistics; null before one is selected.
 */
export async function candidatePath(pc) {
  const stats = await pc.getStats();
  let pair = null;
  stats.forEach((report) => {
    if (report.type === "transport" && report.selectedCandidatePairId) {
      pair = stats.get(report.selectedCandidatePairId);
    }
  });
  if (pair === null) {
    stats.forEach((report) => {
      if (report.type === "candidate-pair" && report.nominated && report.state === "succeeded") pair = report;
    });
  }
  if (pair === null) return null;
  const local = stats.get(pair.localCandidateId);
  const remote = stats.get(pair.remoteCandidateId);
  if (!local || !remote) return null;
  return `${local.candidateType} → ${remote.candidateType}`;
}
