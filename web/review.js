// The review page: every running pipeline source as a live tile (watched over WebRTC, as the
// stream page watches one), the event timeline (filters, thumbnails, a click plays the event's
// clip or the recording around it), and a chart of counts per minute. Plain DOM and SVG: no
// build step, nothing from a CDN.

import { numbersOf, renderCounts } from "./counts.js";
import { StreamError, getJson, signedIn, signedInText } from "./protocol.js";
import { StreamSession } from "./session.js";

const KEY_STORAGE = "visionstream.apiKey"; // shared with the stream page
const EVENTS_EVERY_MS = 500; // new events show within about this (plus the store's 0.1 s)
const TILES_EVERY_MS = 5000;
const CHART_EVERY_MS = 5000;
const LATE_WINDOW_MS = 5000; // an event committed late (another writer) is still picked up
const DESCRIBED_WINDOW_MS = 120_000; // a model's description lands on an event this late, at most
const DESCRIPTIONS_EVERY_MS = 5000;
const PAGE = 50;
const CHART_KINDS = new Set(["line_crossing", "zone_entry", "zone_exit"]);
const COLOURS = ["#2f6fdd", "#d9480f", "#2b8a3e", "#ae3ec9", "#e8590c", "#1098ad", "#c2255c", "#5c940d"];

const $ = (id) => document.getElementById(id);

// For tests and the curious: what the page shows, and when each event appeared.
// `playback`: the clip chosen last, whether its video played, and how many of its frames were
// presented (so a test sees the frames advance however short the clip).
const state = { tiles: {}, events: [], shownAt: {}, chart: [], playing: null, playback: null, errors: [] };
window.visionstream = state;

const tiles = new Map(); // "pipeline#source" -> {element, session, video}
const labels = new Map(); // "pipeline#source" -> the camera's name, from its (masked) URL
let lastChart = null; // what the chart last drew, to draw again at a new width
const seen = new Set();
let newest = null; // the newest event shown: the next poll asks from a little before it
let olderCursor = null;
let similarTo = null; // the event whose likes are shown (nearest first), or null

function apiKey() {
  return $("api-key").value.trim();
}

/** A URL of this server for an element that cannot send headers (img, video): the key in the query. */
function withKey(path) {
  const key = apiKey();
  return key ? `${path}${path.includes("?") ? "&" : "?"}api_key=${encodeURIComponent(key)}` : path;
}

function messageOf(error) {
  return error instanceof StreamError ? error.message : String(error?.message ?? error);
}

function showError(error) {
  if (error?.status === 401) { // say what to do, where "No pipeline is running" would mislead
    state.authorised = false;
    $("no-tiles").textContent = apiKey()
      ? "This API key is not accepted: check it under API key."
      : "This server needs an API key: enter it under API key.";
    $("no-tiles").hidden = false;
    $("key-box").open = true;
  }
  const message = messageOf(error);
  state.errors.push(message);
  $("error").textContent = message;
  $("error").hidden = false;
}

function clearError() {
  $("error").hidden = true;
}

/** Events by likeness (a search by meaning, or "similar"): one page, nearest first, no polling. */
function ranked() {
  return similarTo !== null || ($("search-by").value === "about" && $("search").value.trim() !== "");
}

function localInputToIso(value) {
  return value ? new Date(value).toISOString() : null;
}

function filters() {
  const params = new URLSearchParams();
  const camera = $("camera").value;
  if (camera) {
    const [pipeline, source] = camera.split("#");
    params.set("pipeline", pipeline);
    params.set("source", source);
  }
  if ($("kind").value) params.set("kind", $("kind").value);
  const words = $("search").value.trim();
  if (similarTo) params.set("similar_to", String(similarTo.id));
  else if (words) params.set($("search-by").value, words); // q: words, about: meaning
  const since = localInputToIso($("since").value);
  const until = localInputToIso($("until").value);
  if (since) params.set("since", since);
  if (until) params.set("until", until);
  return params;
}

// --- live tiles ------------------------------------------------------------------------------

/** A camera's name from its URL (credentials are masked by the server): host and path, or a
 * file's name; what names it in tiles, the camera filter, the timeline and the chart. */
function cameraLabel(reference) {
  const text = String(reference ?? "");
  try {
    const url = new URL(text);
    const path = url.pathname.replace(/\/+$/, "");
    return url.host ? `${url.host}${path}` : text;
  } catch {
    return text.split(/[\\/]/).pop() || text;
  }
}

function tileName(pipeline, source) {
  return labels.get(`${pipeline}#${source}`) ?? `pipeline ${pipeline.slice(0, 8)} · source ${source}`;
}

function showTileCounts(tile, result) {
  const counts = numbersOf(result);
  state.tiles[tile.key].counts = counts;
  renderCounts(tile.counts, counts);
}

function addTile(pipeline, source) {
  const key = `${pipeline}#${source}`;
  const element = document.createElement("article");
  element.className = "tile";
  element.dataset.key = key;
  const title = document.createElement("h3");
  title.textContent = tileName(pipeline, source);
  const where = document.createElement("small");
  where.textContent = `pipeline ${pipeline.slice(0, 8)} · source ${source}`;
  title.append(where);
  const video = document.createElement("video");
  Object.assign(video, { autoplay: true, muted: true, playsInline: true });
  video.setAttribute("aria-label", `Live video of ${tileName(pipeline, source)}`);
  const counts = document.createElement("dl");
  element.append(title, video, counts);
  $("tiles").append(element);
  const tile = { key, element, video, counts, session: null };
  state.tiles[key] = { pipeline, source, state: "connecting", results: 0, counts: {} };
  tile.session = new StreamSession({
    source: { kind: "pipeline", pipelineId: pipeline, sourceId: Number(source) },
    realtime: true,
    apiKey: apiKey(),
    onState: (s) => (state.tiles[key].state = s),
    onTrack: (stream) => (video.srcObject = stream),
    onResult: (result) => {
      state.tiles[key].results += 1;
      showTileCounts(tile, result);
    },
    onError: (error) => (state.tiles[key].error = error.message),
  });
  tile.session.start().catch((error) => (state.tiles[key].error = error.message));
  tiles.set(key, tile);
}

function removeTile(key) {
  const tile = tiles.get(key);
  tile.session?.close("removed");
  tile.element.remove();
  tiles.delete(key);
  delete state.tiles[key];
}

async function refreshTiles() {
  const { pipelines } = await getJson("/inference_pipelines/list", apiKey());
  const sources = [];
  for (const id of pipelines) {
    const { report } = await getJson(`/inference_pipelines/${encodeURIComponent(id)}/status`, apiKey());
    for (const meta of report?.sources_metadata ?? []) {
      sources.push([id, String(meta.source_id)]);
      labels.set(`${id}#${meta.source_id}`, cameraLabel(meta.source_reference));
    }
  }
  state.authorised = true;
  // Events shown before their camera's name was known say it now.
  for (const line of document.querySelectorAll("#timeline small[data-camera]")) {
    const [pipeline, source] = line.dataset.camera.split("#");
    line.textContent = `${line.dataset.time} · ${tileName(pipeline, source)}`;
  }
  const wanted = new Set(sources.map(([p, s]) => `${p}#${s}`));
  for (const key of [...tiles.keys()]) if (!wanted.has(key)) removeTile(key);
  for (const [pipeline, source] of sources) if (!tiles.has(`${pipeline}#${source}`)) addTile(pipeline, source);
  $("no-tiles").textContent = "No pipeline is running.";
  $("no-tiles").hidden = tiles.size > 0;
  $("tile-count").textContent = String(tiles.size);
  const camera = $("camera");
  const chosen = camera.value;
  camera.replaceChildren(
    new Option("All", ""),
    ...sources.map(([p, s]) => new Option(tileName(p, s), `${p}#${s}`)),
  );
  if ([...camera.options].some((o) => o.value === chosen)) camera.value = chosen;
}

// --- the timeline ----------------------------------------------------------------------------

function describe(event) {
  const what = event.kind.replaceAll("_", " ") + (event.direction ? ` (${event.direction})` : "");
  const object = [event.class_name, event.tracker_id != null ? `#${event.tracker_id}` : null].filter(Boolean).join(" ");
  const state = event.payload?.new_state ? `${event.payload.previous_state} → ${event.payload.new_state}` : "";
  return { what, detail: [object, state, event.step].filter(Boolean).join(" · ") };
}

function entry(event) {
  const item = document.createElement("li");
  const button = document.createElement("button");
  button.type = "button";
  button.dataset.id = String(event.id);
  if (event.snapshot_url) { // only an event sink's events have a picture: no empty frames
    const thumb = document.createElement("img");
    thumb.alt = "";
    thumb.loading = "lazy";
    thumb.src = withKey(event.snapshot_url);
    button.append(thumb);
    button.classList.add("with-thumb");
  }
  const text = document.createElement("span");
  const { what, detail } = describe(event);
  const time = new Date(event.timestamp * 1000).toLocaleString();
  text.append(what);
  const detailLine = document.createElement("small");
  detailLine.textContent = detail;
  const whereLine = document.createElement("small");
  whereLine.dataset.camera = `${event.pipeline}#${event.source}`;
  whereLine.dataset.time = time;
  whereLine.textContent = `${time} · ${tileName(event.pipeline, event.source)}`;
  text.append(detailLine, whereLine);
  if (event.description || event.summary?.title) {
    // What the vision-language model said of it: a summary's title and threat level first.
    const said = document.createElement("p");
    said.className = "description";
    const level = event.summary?.threat_level;
    if (event.summary?.title) {
      const title = document.createElement("strong");
      title.textContent = event.summary.title;
      said.append(title, " ");
    }
    if (level != null) {
      const badge = document.createElement("span");
      badge.className = `threat threat-${level}`;
      badge.textContent = ["normal", "needs a look", "needs action"][level] ?? String(level);
      said.append(badge, " ");
    }
    said.append(event.description ?? "");
    text.append(said);
  }
  if (event.distance != null) {
    const distance = document.createElement("small");
    distance.className = "distance";
    distance.textContent = `distance ${event.distance.toFixed(3)} (0: the same meaning)`;
    text.append(distance);
  }
  button.append(text);
  button.addEventListener("click", () => play(event, button));
  item.append(button);
  if (event.description) { // what its description means, and which others mean the like
    const similar = document.createElement("button");
    similar.type = "button";
    similar.className = "similar";
    similar.textContent = "Similar";
    similar.setAttribute("aria-label", `Events similar to ${what} at ${time}`);
    similar.addEventListener("click", () => findSimilar(event));
    item.append(similar);
  }
  return item;
}

function findSimilar(event) {
  similarTo = event;
  const { what } = describe(event);
  $("similar-what").textContent = `${what} at ${new Date(event.timestamp * 1000).toLocaleString()}`;
  $("similar-banner").hidden = false;
  loadEvents().catch(showError);
}

function showAll() {
  similarTo = null;
  $("similar-banner").hidden = true;
  loadEvents().catch(showError);
}

function showNothingFound() {
  const words = $("search").value.trim();
  let empty = "";
  if (state.events.length) empty = "";
  else if (similarTo) empty = "No other described event to compare it with.";
  else if (words && $("search-by").value === "about") empty = `No described event to compare with “${words}”.`;
  else if (words) empty = `No event holds every word of “${words}”.`;
  $("timeline").dataset.empty = empty;
}

/** An event shown before its description came (a model answers in seconds): shown again. */
function refresh(event) {
  const button = document.querySelector(`#timeline button[data-id="${event.id}"]`);
  if (!button || button.querySelector("p.description")) return;
  if (!event.description && !event.summary?.title) return;
  button.parentElement.replaceWith(entry(event));
  state.events = state.events.map((e) => (e.id === event.id ? event : e));
}

function show(events, { atTop }) {
  for (const event of events) if (seen.has(event.id)) refresh(event);
  const fresh = events.filter((e) => !seen.has(e.id));
  if (!fresh.length) return;
  const now = Date.now();
  for (const event of fresh) {
    seen.add(event.id);
    state.shownAt[event.id] = now;
  }
  const items = fresh.map(entry);
  if (atTop) $("timeline").prepend(...items.reverse()); // newest first
  else $("timeline").append(...items);
  state.events = atTop ? [...fresh.reverse(), ...state.events] : [...state.events, ...fresh];
  for (const event of fresh) if (!newest || event.timestamp > newest.timestamp) newest = event;
  $("event-count").textContent = String(state.events.length);
}

/** The last minutes' events again: descriptions written since they were shown. */
async function refreshDescriptions() {
  if (state.ranked) return; // a ranking is asked for once (each asks the embeddings model)
  const params = filters();
  params.set("limit", "200");
  params.set("since", String((Date.now() - DESCRIBED_WINDOW_MS) / 1000));
  const page = await getJson(`/events?${params}`, apiKey());
  for (const event of page.events) if (seen.has(event.id)) refresh(event);
}

async function loadEvents() {
  $("timeline").replaceChildren();
  seen.clear();
  state.events = [];
  newest = null;
  $("event-count").textContent = "0";
  const params = filters();
  params.set("limit", String(PAGE));
  state.ranked = ranked();
  let page;
  try {
    page = await getJson(`/events?${params}`, apiKey());
  } catch (error) {
    if (!state.ranked || error?.status === 401) throw error;
    // A search by meaning this server cannot make (no embeddings model, the model down):
    // said where its results would be, and kept there (the polls' success clears alerts).
    state.errors.push(messageOf(error));
    $("timeline").dataset.empty = `This search by meaning could not be made: ${error?.said ?? messageOf(error)}`;
    $("older").hidden = true;
    return;
  }
  olderCursor = page.next_cursor;
  $("older").hidden = !olderCursor;
  if (state.ranked) show(page.events, { atTop: false }); // nearest first, as given
  else show(page.events.slice().reverse(), { atTop: true });
  showNothingFound();
}

async function loadOlder() {
  const params = filters();
  params.set("limit", String(PAGE));
  params.set("cursor", olderCursor);
  const page = await getJson(`/events?${params}`, apiKey());
  olderCursor = page.next_cursor;
  $("older").hidden = !olderCursor;
  show(page.events, { atTop: false });
}

async function pollEvents() {
  if ($("until").value || state.ranked) return; // a closed range, or a ranking: nothing new
  const params = filters();
  params.set("order", "asc");
  params.set("limit", "200");
  if (newest) params.set("since", String(newest.timestamp - LATE_WINDOW_MS / 1000));
  const page = await getJson(`/events?${params}`, apiKey());
  show(page.events, { atTop: true });
  $("updated").textContent = new Date().toLocaleTimeString();
}

function play(event, button) {
  for (const other of document.querySelectorAll('#timeline button[aria-current="true"]')) {
    other.removeAttribute("aria-current");
  }
  button.setAttribute("aria-current", "true");
  const player = $("player");
  $("player-panel").hidden = false;
  const { what } = describe(event);
  if (!event.clip_url) { // said at once, without an empty player
    player.pause();
    player.removeAttribute("src");
    player.hidden = true;
    state.playing = null;
    state.playback = null;
    $("player-caption").textContent = `${what}: no clip (this camera is not recorded).`;
    return;
  }
  player.hidden = false;
  state.playing = event.id;
  state.playback = { id: event.id, playing: false, frames: 0 };
  $("player-caption").textContent = `${what} at ${new Date(event.timestamp * 1000).toLocaleTimeString()}`;
  player.src = withKey(event.clip_url);
  player.play().catch((error) => {
    if (error.name !== "AbortError") showError(new StreamError(`The clip does not play: ${error.message}`));
  });
}

function watchPlayback() {
  const player = $("player");
  player.addEventListener("playing", () => {
    if (state.playback) state.playback.playing = true;
  });
  player.addEventListener("error", () => {
    if (state.playing === null) return;
    player.hidden = true; // no 0:00 player left behind
    $("player-caption").textContent += ": the clip could not be loaded (no recording of that moment).";
  });
  const presented = () => {
    if (state.playback && !player.paused) state.playback.frames += 1;
    player.requestVideoFrameCallback(presented);
  };
  player.requestVideoFrameCallback(presented);
}

// --- the chart -------------------------------------------------------------------------------

function svg(name, attributes = {}, text = null) {
  const element = document.createElementNS("http://www.w3.org/2000/svg", name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, String(value));
  if (text !== null) element.textContent = text;
  return element;
}

async function refreshChart() {
  const end = Math.ceil(Date.now() / 60000) * 60000;
  const start = end - 60 * 60000;
  const params = new URLSearchParams({ bucket: "minute", since: String(start / 1000) });
  const camera = $("camera").value;
  if (camera) {
    const [pipeline, source] = camera.split("#");
    params.set("pipeline", pipeline);
    params.set("source", source);
  }
  const { buckets } = await getJson(`/events/summary?${params}`, apiKey());
  const rows = buckets.filter((b) => CHART_KINDS.has(b.kind));
  state.chart = rows;
  const series = new Map();
  for (const row of rows) {
    const name = `${tileName(row.pipeline, row.source)} · ${row.step} ${row.direction ?? row.kind.replace("zone_", "")}`;
    if (!series.has(name)) series.set(name, new Map());
    series.get(name).set(Date.parse(row.start), row.count);
  }
  drawChart(series, start, end);
}

function drawChart(series, start, end) {
  lastChart = [series, start, end];
  const chart = $("chart");
  // One unit a CSS pixel: a fixed viewBox scaled into a narrow column drew 11 px text at 6.
  const width = Math.max(280, Math.round(chart.getBoundingClientRect().width) || 600);
  const [height, left, bottom, top] = [240, 36, 24, 12];
  chart.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const most = Math.max(1, ...[...series.values()].flatMap((points) => [...points.values()]));
  const x = (t) => left + ((t - start) / (end - start)) * (width - left - 8);
  const y = (n) => height - bottom - (n / most) * (height - bottom - top);
  const parts = [
    svg("line", { class: "axis", x1: left, y1: height - bottom, x2: width - 8, y2: height - bottom }),
    svg("line", { class: "axis", x1: left, y1: top, x2: left, y2: height - bottom }),
    svg("text", { x: 4, y: top + 8 }, String(most)),
    svg("text", { x: 4, y: height - bottom }, "0"),
    svg("text", { x: left, y: height - 6 }, new Date(start).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })),
    svg("text", { x: width - 8, y: height - 6, "text-anchor": "end" }, new Date(end).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })),
  ];
  const legend = [];
  [...series.entries()].forEach(([name, points], i) => {
    const colour = COLOURS[i % COLOURS.length];
    const minutes = [];
    for (let t = start; t < end; t += 60000) minutes.push([t, points.get(t) ?? 0]);
    parts.push(svg("polyline", {
      points: minutes.map(([t, n]) => `${x(t).toFixed(1)},${y(n).toFixed(1)}`).join(" "),
      fill: "none", stroke: colour, "stroke-width": 2, "data-series": name,
    }));
    for (const [t, n] of points) {
      parts.push(svg("circle", { cx: x(t).toFixed(1), cy: y(n).toFixed(1), r: 3.5, fill: colour,
                                 "data-series": name, "data-start": new Date(t).toISOString(), "data-count": n }));
    }
    const item = document.createElement("li");
    const swatch = document.createElement("span");
    swatch.style.background = colour;
    item.append(swatch, name);
    legend.push(item);
  });
  if (!series.size) {
    parts.push(svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle" }, "No counts in the last hour"));
  }
  chart.replaceChildren(...parts);
  $("legend").replaceChildren(...legend);
}

// --- wiring ----------------------------------------------------------------------------------

function every(ms, work) {
  const run = async () => {
    try {
      await work();
      clearError();
    } catch (error) {
      showError(error);
    }
    setTimeout(run, ms); // the next look once this one is answered: never two at once
  };
  return run();
}

/** Who is signed in (the review page only watches: any role sees all of it). */
async function showWho() {
  $("who").textContent = signedInText(await signedIn(apiKey()));
}

$("api-key").value = sessionStorage.getItem(KEY_STORAGE) ?? "";
$("api-key").addEventListener("change", () => {
  sessionStorage.setItem(KEY_STORAGE, apiKey());
  for (const key of [...tiles.keys()]) removeTile(key);
  loadEvents().catch(showError);
  showWho();
});
$("similar-clear").addEventListener("click", showAll);
for (const id of ["camera", "kind", "since", "until", "search", "search-by"]) {
  $(id).addEventListener("change", () => {
    if (id.startsWith("search")) { // new words: a search of its own, not the likes of an event
      similarTo = null;
      $("similar-banner").hidden = true;
    }
    loadEvents().catch(showError);
    refreshChart().catch(showError);
  });
}
$("older").addEventListener("click", () => loadOlder().catch(showError));
new ResizeObserver(() => lastChart && drawChart(...lastChart)).observe($("chart"));
window.addEventListener("pagehide", () => {
  for (const key of [...tiles.keys()]) removeTile(key);
});

watchPlayback();
showWho();
await loadEvents().catch(showError);
every(TILES_EVERY_MS, refreshTiles);
every(EVENTS_EVERY_MS, pollEvents);
every(CHART_EVERY_MS, refreshChart);
every(DESCRIPTIONS_EVERY_MS, refreshDescriptions);
