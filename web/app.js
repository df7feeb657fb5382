// The page: controls -> StreamSession -> video, detections panel, status bar. Live figures are
// kept in window.visionstream.stats for people debugging and for the browser tests.

import { numbersOf, renderCounts } from "./counts.js";
import { StreamError, getJson, iceConfiguration, signedIn, signedInText } from "./protocol.js";
import { StreamSession } from "./session.js";
import { WhipSession } from "./whip.js";

const $ = (id) => document.getElementById(id);
const form = $("controls");
const video = $("output");
const KEY_STORAGE = "visionstream.apiKey";
const FPS_WINDOW_MS = 1000;
const MAX_ROWS = 50;
const LATENCIES_KEPT = 1000;

// What each session starts from (Start resets these; phase, mode, provider and lastError are
// kept by the page across sessions).
const SESSION_STATS = {
  state: "new", // the peer connection's state
  framesReceived: 0,
  resultsReceived: 0,
  latencyMs: null,
  latencyBasis: null,
  dropped: 0,
  fps: 0,
  uploadPercent: 0,
  startToFirstFrameMs: null,
  detections: 0,
  path: null, // the candidate pair in use: "host → host", "relay → host"
};
const stats = {
  ...SESSION_STATS,
  phase: "idle", // the session's: connecting, uploading, processing, done, stopped, failed
  mode: "webcam",
  provider: null,
  lastError: null,
};
// `latencies`: the last readings, for percentiles (benchmarks/browser.py reads them).
const latencies = [];
// `geometry`: the line or zone the next session uses ({name, kind, points}, video pixels);
// `counts`: the numbers in the latest result (count_in, count_out, ...).
window.visionstream = { stats, session: null, detections: [], metadata: null, latencies, geometry: null, counts: {} };

let session = null;
let startedAt = 0;
let frameWatch = 0; // which session's frame counter runs: a new one stops the old one
let presented = [];
let renderQueued = false;
let latestResult = null;
const workflowInfo = new Map(); // id -> the server's summary (outputs, geometry)

function mode() {
  return form.elements.mode.value;
}

function apiKey() {
  return $("api-key").value.trim();
}

function showError(error) {
  const message = error instanceof StreamError ? error.message : `Unexpected problem: ${error?.message ?? error}`;
  stats.lastError = message;
  $("error").textContent = message;
  $("error").hidden = false;
}

function clearError() {
  stats.lastError = null;
  $("error").hidden = true;
  $("error").textContent = "";
}

function setPhase(phase) {
  stats.phase = phase;
  const running = !["idle", "done", "stopped", "failed"].includes(phase);
  if (!running) freezeVideo();
  const focused = document.activeElement; // a disabled button loses focus: pass it on
  $("start").disabled = running;
  $("stop").disabled = !running;
  if (running && focused === $("start")) $("stop").focus();
  if (!running && focused === $("stop")) $("start").focus();
  for (const element of form.querySelectorAll("fieldset, .mode-panel, #workflow, #every-frame, #network-box input")) {
    element.disabled = running;
  }
  renderStatus();
}

function renderStatus() {
  // Words, not colours: the phase, or that the connection is interrupted.
  $("state").textContent = stats.state === "disconnected" ? "interrupted" : stats.phase;
  $("fps").textContent = stats.framesReceived ? stats.fps.toFixed(1) : "–";
  $("latency").textContent =
    stats.latencyMs === null
      ? "–"
      : `${Math.round(stats.latencyMs)} ms${stats.latencyBasis === "server" ? " (server clock)" : ""}`;
  $("path").textContent = stats.path ?? "–";
  // A viewer of a pipeline sends nothing: it drops nothing of its own ("–", not the pipeline's).
  $("dropped").textContent = stats.dropped === null ? "–" : String(stats.dropped);
  $("results").textContent = String(stats.resultsReceived);
}

// --- the video element: count what is actually presented ---------------------------------

function watchFrames() {
  if (typeof video.requestVideoFrameCallback !== "function") return;
  // One counter at a time: a second chain (a new session, a second track) counted every
  // frame twice (57 fps shown for a 30 fps camera).
  const mine = ++frameWatch;
  const onFrame = (now) => {
    if (mine !== frameWatch || !video.srcObject) return;
    stats.framesReceived += 1;
    if (stats.startToFirstFrameMs === null) stats.startToFirstFrameMs = now - startedAt;
    presented.push(now);
    while (presented.length && now - presented[0] > FPS_WINDOW_MS) presented.shift();
    stats.fps = presented.length > 1 ? ((presented.length - 1) * 1000) / (now - presented[0]) : 0;
    renderStatus();
    video.requestVideoFrameCallback(onFrame);
  };
  video.requestVideoFrameCallback(onFrame);
}

/** Keeps the last frame on screen as the poster once the stream ends (no black box). */
function freezeVideo() {
  if (!video.srcObject) return;
  if (video.videoWidth) {
    const canvas = document.createElement("canvas");
    canvas.width = video.videoWidth;
    canvas.height = video.videoHeight;
    canvas.getContext("2d").drawImage(video, 0, 0);
    video.poster = canvas.toDataURL("image/jpeg", 0.9);
  }
  video.srcObject = null;
}

// --- results: the detections panel ---------------------------------------------------------

function predictionsOf(result) {
  for (const value of Object.values(result.serialized_output_data ?? {})) {
    if (value && Array.isArray(value.predictions)) return value.predictions;
  }
  return null;
}

function renderDetections() {
  renderQueued = false;
  const predictions = latestResult ? predictionsOf(latestResult) : null;
  const rows = (predictions ?? []).slice(0, MAX_ROWS).map((p) => {
    const row = document.createElement("tr");
    const [x, y, w, h] = [p.x, p.y, p.width, p.height].map((v) => Math.round(v));
    const box = `${x}, ${y}; ${w} × ${h}`;
    for (const text of [p.class ?? String(p.class_id), `${(100 * p.confidence).toFixed(0)} %`, box]) {
      const cell = document.createElement("td");
      cell.textContent = text;
      row.append(cell);
    }
    return row;
  });
  $("detections").tBodies[0].replaceChildren(...rows);
  $("detections").hidden = rows.length === 0;
  $("no-detections").hidden = rows.length > 0;
  $("no-detections").textContent = predictions === null ? "None yet." : "Nothing detected in this frame.";
  showCounts();
  const errors = latestResult?.errors ?? [];
  if (errors.length) showError(new StreamError(`The server reported: ${errors.join("; ")}`));
}

function onResult(result, latencyMs) {
  stats.resultsReceived = session.resultsReceived;
  stats.latencyMs = latencyMs;
  if (latencyMs !== null) {
    latencies.push(latencyMs);
    if (latencies.length > LATENCIES_KEPT) latencies.shift();
  }
  stats.latencyBasis = session.latencyBasis;
  stats.dropped = watching() ? null : session.dropped;
  window.visionstream.detections = predictionsOf(result) ?? [];
  window.visionstream.metadata = result.video_metadata; // the frame they were found in
  stats.detections = window.visionstream.detections.length;
  latestResult = result;
  if (mode() === "file") $("processed-text").textContent = `${session.lastFrameId} frames processed`;
  if (!renderQueued) {
    renderQueued = true;
    requestAnimationFrame(renderDetections); // at most one table per screen refresh
  }
  renderStatus();
}

// Numbers among the outputs (a line's count_in and count_out, a property's count), live.
function showCounts() {
  const counts = numbersOf(latestResult);
  window.visionstream.counts = counts;
  $("counts-panel").hidden = Object.keys(counts).length === 0;
  renderCounts($("counts"), counts);
}

// --- drawing a line or a zone on the video ----------------------------------------------------
// A workflow whose parameter defaults to two points (a line) or more (a zone) can have it drawn
// here: clicks on the video place points in the video's own pixels; Apply (re)starts the
// session with them as the workflow's parameter.

let drawing = { spec: null, points: [] }; // spec: {name, kind, default} from /workflows

function drawable() {
  return workflowInfo.get($("workflow").value)?.geometry?.[0] ?? null;
}

function chosenGeometry() {
  const spec = drawing.spec;
  if (!spec) return null;
  const done = spec.kind === "line" ? drawing.points.length === 2 : drawing.points.length >= 3;
  return { name: spec.name, kind: spec.kind, points: done ? drawing.points : spec.default, drawn: done };
}

function onWorkflowChange() {
  drawing = { spec: drawable(), points: [] };
  $("geometry-panel").hidden = !drawing.spec || watching();
  renderGeometry();
}

/** The video's picture inside its element (letterboxed): offset and scale to its pixels. */
function pictureBox() {
  const width = video.videoWidth;
  const height = video.videoHeight;
  if (!width || !height) return null;
  const box = video.getBoundingClientRect();
  const scale = Math.min(box.width / width, box.height / height);
  return { box, scale, left: (box.width - width * scale) / 2, top: (box.height - height * scale) / 2 };
}

function onDrawingClick(event) {
  const spec = drawing.spec;
  const picture = pictureBox();
  if (!spec || !picture) return;
  if (spec.kind === "line" && drawing.points.length === 2) drawing.points = [];
  const x = (event.clientX - picture.box.left - picture.left) / picture.scale;
  const y = (event.clientY - picture.box.top - picture.top) / picture.scale;
  drawing.points.push([Math.round(x), Math.round(y)]);
  renderGeometry();
}

function renderGeometry() {
  const geometry = chosenGeometry();
  window.visionstream.geometry = geometry;
  const spec = drawing.spec;
  if (spec) {
    const noun = spec.kind === "line" ? "line" : "zone";
    const shape = spec.kind === "line" ? "click its two ends" : "click its corners (3 or more)";
    const needed = spec.kind === "line" ? "of 2 points" : "points (3 or more)";
    $("geometry-help").textContent = geometry.drawn
      ? `${noun[0].toUpperCase()}${noun.slice(1)} drawn. Apply (re)starts the stream with it; counts start from zero.`
      : drawing.points.length
        ? `${drawing.points.length} ${needed} placed.`
        : `Draw the ${noun} on the video: ${shape}. Using the default for now.`;
    $("geometry-apply").disabled = !geometry.drawn;
  }
  const canvas = $("drawing");
  const rect = canvas.getBoundingClientRect();
  canvas.width = Math.round(rect.width);
  canvas.height = Math.round(rect.height);
  const context = canvas.getContext("2d");
  context.clearRect(0, 0, canvas.width, canvas.height);
  const picture = pictureBox();
  if (!picture || !drawing.points.length) return;
  const at = ([x, y]) => [picture.left + x * picture.scale, picture.top + y * picture.scale];
  context.strokeStyle = context.fillStyle = "#ffd400";
  context.lineWidth = 3;
  context.beginPath();
  drawing.points.forEach((point, index) => (index ? context.lineTo(...at(point)) : context.moveTo(...at(point))));
  if (spec?.kind === "polygon" && drawing.points.length >= 3) context.closePath();
  context.stroke();
  for (const point of drawing.points) {
    context.beginPath();
    context.arc(...at(point), 5, 0, 2 * Math.PI);
    context.fill();
  }
}

function parameters() {
  const geometry = chosenGeometry();
  return geometry?.drawn ? { [geometry.name]: geometry.points } : {};
}

async function applyGeometry() {
  if (session && !session.closed) {
    session.close("stopped"); // the workflow's parameters are fixed for a session: start anew
    await begin();
  }
}

// --- sources --------------------------------------------------------------------------------

async function openCamera() {
  const [width, height] = $("resolution").value.split("x").map(Number);
  const constraints = { width: { ideal: width }, height: { ideal: height } };
  if ($("device").value) constraints.deviceId = { exact: $("device").value };
  if (!navigator.mediaDevices?.getUserMedia) {
    throw new StreamError("This browser cannot use a camera here: open the page over HTTPS or on localhost.");
  }
  try {
    const stream = await navigator.mediaDevices.getUserMedia({ video: constraints, audio: false });
    listDevices(); // labels are only readable once permission is granted
    return stream;
  } catch (error) {
    const words = {
      NotAllowedError: "Camera permission was denied. Allow camera access for this page in the browser's site settings, then press Start again.",
      NotFoundError: "No camera was found on this device.",
      NotReadableError: "The camera is in use by another application or could not be started.",
      OverconstrainedError: `The chosen camera cannot deliver ${width} × ${height}; pick another resolution.`,
    };
    throw new StreamError(words[error.name] ?? `The camera could not be opened: ${error.message}`, { cause: error });
  }
}

async function sourceForMode() {
  switch (mode()) {
    case "webcam":
      return { kind: "webcam", stream: await openCamera() };
    case "file": {
      const file = $("file").files[0];
      if (!file) throw new StreamError("Choose a video file first.");
      return { kind: "file", file };
    }
    default: {
      const url = $("camera-url").value.trim();
      const pipeline = $("pipeline").value;
      if (pipeline) {
        const [pipelineId, sourceId] = pipeline.split("#");
        return { kind: "pipeline", pipelineId, sourceId: Number(sourceId) };
      }
      if (!/^(rtsps?|https?):\/\/[^/]+/i.test(url)) {
        throw new StreamError("Enter a camera URL starting with rtsp://, http:// or https://, or pick a pipeline.");
      }
      return { kind: "camera", url };
    }
  }
}

// --- start / stop ---------------------------------------------------------------------------

function resetStats() {
  Object.assign(stats, SESSION_STATS, { mode: mode(), dropped: watching() ? null : 0 });
  presented = [];
  latencies.length = 0;
  latestResult = null;
  video.poster = "";
  $("progress").hidden = mode() !== "file";
  $("upload-progress").value = 0;
  $("upload-text").textContent = "0 %";
  $("processed-text").textContent = "";
  renderDetections();
}

async function start(event) {
  event.preventDefault();
  if (session && !session.closed) return;
  await begin();
}

async function begin() {
  clearError();
  resetStats();
  startedAt = performance.now();
  setPhase("connecting");
  const [workspace_name, workflow_id] = $("workflow").value.split("/");
  try {
    const source = await sourceForMode();
    const Session = source.kind === "webcam" && $("whip").checked ? WhipSession : StreamSession;
    session = new Session({
      source,
      workflow: { workspace_name, workflow_id },
      realtime: !$("every-frame").checked,
      apiKey: apiKey(),
      ice: iceConfiguration({
        turnUrl: $("turn-url").value.trim(),
        username: $("turn-username").value.trim(),
        credential: $("turn-credential").value,
        relayOnly: $("relay-only").checked,
      }),
      onPath: (path) => {
        stats.path = path;
        renderStatus();
      },
      parameters: parameters(),
      onState: (phase) => setPhase(phase),
      onConnection: (state) => {
        stats.state = state;
        renderStatus();
      },
      onTrack: (stream) => {
        video.srcObject = stream;
        watchFrames();
      },
      onResult,
      onUpload: (sent, total) => {
        stats.uploadPercent = Math.round((100 * sent) / total);
        $("upload-progress").value = stats.uploadPercent;
        $("upload-text").textContent = `${stats.uploadPercent} %`;
      },
      onComplete: (reason) => {
        $("processed-text").textContent =
          `Done: ${session.lastFrameId} frames processed` + (reason ? ` (${reason.replaceAll("_", " ")})` : "");
      },
      onError: showError,
    });
    window.visionstream.session = session;
    await session.start();
  } catch (error) {
    if (session?.closed && stats.lastError) return; // already reported by the session
    showError(error);
    session?.close("failed");
    setPhase("failed");
  }
}

function stop() {
  freezeVideo();
  session?.close("stopped");
}

// --- lists from the server --------------------------------------------------------------------

async function listDevices() {
  if (!navigator.mediaDevices?.enumerateDevices) return;
  const select = $("device");
  const chosen = select.value;
  const cameras = (await navigator.mediaDevices.enumerateDevices()).filter((d) => d.kind === "videoinput");
  const options = cameras.map((camera, index) => {
    const option = new Option(camera.label || `Camera ${index + 1}`, camera.deviceId);
    option.title = option.text; // a long name is cut in the control: whole in its tooltip
    return option;
  });
  select.replaceChildren(new Option("Default camera", ""), ...options);
  select.value = chosen;
}

async function listWorkflows() {
  try {
    const { workflows, default: preferred } = await getJson("/workflows", apiKey());
    const select = $("workflow");
    workflowInfo.clear();
    for (const workflow of workflows) workflowInfo.set(workflow.id, workflow);
    // The title alone fits the control; the id is added where a title is not enough to tell
    // workflows apart (two of one title, or another workspace's), and in each option's tooltip.
    const titles = workflows.map((w) => w.title);
    const options = workflows.map((w) => {
      const shared = titles.indexOf(w.title) !== titles.lastIndexOf(w.title);
      const text = shared || w.workspace_name !== "local" ? `${w.title} · ${w.id}` : w.title;
      const option = new Option(text, w.id);
      option.title = w.description ? `${w.id}: ${w.description}` : w.id;
      return option;
    });
    select.replaceChildren(...options);
    select.value = preferred;
    onWorkflowChange();
  } catch (error) {
    showError(error);
  }
}

/** Each listed pipeline source's restream URLs (``pipeline#source``), from its status. */
const restreams = new Map();

const RESTREAM_PLAYERS = {
  rtsp: "RTSP: VLC, an NVR, Home Assistant",
  hls: "HLS: Safari, TVs, hls.js",
  mjpeg: "MJPEG: an <img>, Home Assistant's MJPEG camera",
  snapshot: "Snapshot JPEG: picture cards",
  whep: "WHEP: WebRTC players (they send a key)",
};

/** The chosen pipeline source's URLs for other players, each with a copy button. */
function showRestream() {
  const entry = restreams.get($("pipeline").value);
  $("restream-panel").hidden = !entry;
  if (!entry) return;
  const expires = new Date(entry.expires_at * 1000).toLocaleString();
  $("restream-note").textContent =
    `Each link carries a token for this source alone (role ${entry.role}), good until ${expires}; never your key.`;
  const rows = [];
  for (const [name, url] of Object.entries(entry.urls)) {
    const term = document.createElement("dt");
    term.textContent = RESTREAM_PLAYERS[name] ?? name;
    const value = document.createElement("dd");
    const field = Object.assign(document.createElement("input"), { readOnly: true, value: url, className: "restream-url" });
    field.dataset.output = name;
    const copy = Object.assign(document.createElement("button"), { type: "button", textContent: "Copy" });
    copy.addEventListener("click", () => navigator.clipboard?.writeText(url));
    value.append(field, copy);
    rows.push(term, value);
  }
  $("restream-urls").replaceChildren(...rows);
}

async function listPipelines() {
  const select = $("pipeline");
  try {
    const { pipelines } = await getJson("/inference_pipelines/list", apiKey());
    const options = [];
    restreams.clear();
    for (const id of pipelines) {
      const { report, restream } = await getJson(`/inference_pipelines/${encodeURIComponent(id)}/status`, apiKey());
      for (const [index, source] of (report.sources_metadata ?? []).entries()) {
        const where = source.source_reference ?? `source ${index}`;
        const sourceId = source.source_id ?? index;
        options.push(new Option(`${id.slice(0, 8)} · ${where}`, `${id}#${sourceId}`));
        if (restream?.[String(sourceId)]) restreams.set(`${id}#${sourceId}`, restream[String(sourceId)]);
      }
    }
    const chosen = select.value;
    select.replaceChildren(new Option(options.length ? "(none)" : "(no pipelines running)", ""), ...options);
    if ([...select.options].some((o) => o.value === chosen)) select.value = chosen;
    onWatchChange();
  } catch (error) {
    showError(error);
  }
}

async function showProvider() {
  try {
    const health = await getJson("/healthz");
    const [model] = Object.values(health.models ?? {});
    stats.provider = model?.providers?.[0] ?? null;
    // "OpenVINO CPU bf16", "CUDA:0", ...; and say so when it runs on less than it asked for.
    const where = model ? model.device + (model.degraded ? " (degraded)" : "") : null;
    $("provider").textContent = where ?? (health.ready ? "ready" : "loading models");
  } catch (error) {
    $("provider").textContent = "unreachable";
    showError(error);
  }
}

// --- wiring ---------------------------------------------------------------------------------

/** Watching a running pipeline: its workflow, its line and its pace are the pipeline's. */
function watching() {
  return mode() === "camera" && Boolean($("pipeline").value);
}

function onWatchChange() {
  const own = !watching() && !stats.watchOnly; // a viewer runs no workflow of its own
  for (const element of [$("workflow"), document.querySelector('label[for="workflow"]'), $("every-frame").closest("label")]) {
    element.hidden = !own;
  }
  $("geometry-panel").hidden = !own || !drawing.spec;
  showRestream();
}

function onModeChange() {
  for (const panel of document.querySelectorAll(".mode-panel")) panel.hidden = panel.dataset.mode !== mode();
  $("every-frame").checked = mode() === "file"; // a file is worth every frame; a live feed is not
  stats.mode = mode();
  if (mode() === "camera") listPipelines();
  onWatchChange();
}

/**
 * Who is signed in, in the status bar; a role that may only watch (viewer) is offered only
 * what it may do: watching a running pipeline.
 */
async function showWho() {
  const me = await signedIn(apiKey());
  $("who").textContent = signedInText(me);
  const watchOnly = Boolean(me) && !me.can.run;
  stats.watchOnly = watchOnly;
  for (const radio of form.elements.mode) {
    radio.closest("label").hidden = watchOnly && radio.value !== "camera";
  }
  for (const element of [$("camera-url"), document.querySelector('label[for="camera-url"]')]) {
    element.hidden = watchOnly;
  }
  if (watchOnly && mode() !== "camera") form.elements.mode.value = "camera";
  onModeChange();
}

$("api-key").value = sessionStorage.getItem(KEY_STORAGE) ?? "";
$("api-key").addEventListener("change", () => {
  sessionStorage.setItem(KEY_STORAGE, apiKey());
  clearError();
  listWorkflows();
  showWho();
});
form.addEventListener("submit", start);
$("stop").addEventListener("click", stop);
$("refresh-pipelines").addEventListener("click", listPipelines);
$("pipeline").addEventListener("change", onWatchChange);
$("workflow").addEventListener("change", onWorkflowChange);
$("drawing").addEventListener("click", onDrawingClick);
$("geometry-apply").addEventListener("click", applyGeometry);
$("geometry-reset").addEventListener("click", () => {
  drawing.points = [];
  renderGeometry();
  applyGeometry();
});
new ResizeObserver(renderGeometry).observe(video);
for (const radio of form.elements.mode) radio.addEventListener("change", onModeChange);
window.addEventListener("pagehide", stop);
onModeChange();
setPhase("idle");
showProvider();
listWorkflows();
listDevices();
showWho();
