// vidagent's page: pick a video, see its memory on a timeline, ask, watch the steps arrive, seek to evidence.
"use strict";

const $ = (selector) => document.querySelector(selector);
const state = { videos: [], video: null, memory: null, planners: [], steps: new Map(), open: new Set(), answer: null, asking: null };
const LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const STAGES = ["frames", "speech", "segments", "objects"];
const STAGE_NOTES = {
  frames: "frames: sampled frames, each described (objects with colour and place, on-screen text)",
  speech: "speech: what is said, transcribed",
  segments: "segments: 2-second stretches with a description, speech and on-screen text (what questions read)",
  objects: "objects: people, animals and things tracked across frames (for counting and where/when questions)",
};
const MAX_OBJECT_LANES = 6;

// -- the token: given once as #token=..., kept for this tab and as a SameSite cookie for <video>/<img> -------------
(function takeToken() {
  const match = location.hash.match(/token=([^&]+)/);
  if (match) {
    sessionStorage.setItem("vidagent_token", decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname);
  }
  const token = sessionStorage.getItem("vidagent_token");
  if (token) document.cookie = `vidagent_token=${encodeURIComponent(token)}; path=/; SameSite=Strict`;
})();

function headers(extra = {}) {
  const token = sessionStorage.getItem("vidagent_token");
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: headers(options.headers || {}) });
  const body = response.headers.get("content-type")?.includes("json") ? await response.json() : null;
  if (!response.ok) throw new Error(body?.message || `${response.status} ${response.statusText}`);
  return body;
}

function notify(message, ok = false) {
  const box = $("#notice");
  box.textContent = message;
  box.classList.toggle("ok", ok);
  box.hidden = !message;
  if (ok) setTimeout(() => { if (box.textContent === message) box.hidden = true; }, 4000);
}

const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  for (const child of children.flat()) if (child !== null && child !== undefined) node.append(child);
  return node;
};
const seconds = (t) => `${Number(t).toFixed(1)} s`;
// What an evidence item's text is, said for every kind but the memory's own descriptions: a model's answer about
// the frames must never read as something the video said (tools/base.py EVIDENCE_KINDS).
const EVIDENCE_KINDS = { speech: "speech", text: "on-screen text", objects: "object memory", document: "document",
  file: "file made", model: "a model's answer" };
function evidenceKind(item) {
  const label = EVIDENCE_KINDS[item.kind];
  return label ? el("div", { class: `kind kind-${item.kind}` }, label) : null;
}
const clock = (t) => { const s = Math.max(0, t); return `${Math.floor(s / 60)}:${String(Math.floor(s % 60)).padStart(2, "0")}`; };

// -- videos -------------------------------------------------------------------------------------------------------
async function loadVideos(selectId) {
  const { videos } = await api("/api/videos");
  state.videos = videos;
  const list = $("#video-list");
  list.replaceChildren(...videos.map((video) => el("li", {
    "data-video-id": video.video_id, class: state.video?.video_id === video.video_id ? "active" : "",
    title: video.path, onclick: () => selectVideo(video.video_id),
  }, el("div", { class: "name" }, video.name),
     el("div", { class: "meta" }, video.has_file === false ? `${seconds(video.duration_s)} · ${video.origin}`
       : `${seconds(video.duration_s)} · ${video.width}×${video.height} · ${video.stages.includes("segments") ? "memory built" : "no memory yet"}`))));
  $("#video-empty").hidden = videos.length > 0;
  await loadFiles();
  const wanted = selectId || state.video?.video_id;
  if (wanted) await selectVideo(wanted);
}

// -- the library search: moments across every video, as thumbnails; a click opens the video at the moment -------
async function searchLibrary(event) {
  event.preventDefault();
  const query = $("#search-query").value.trim();
  const list = $("#search-results");
  const says = (text) => { $("#search-status").textContent = text; $("#search-status").hidden = !text; };
  if (!query) { list.hidden = true; says(""); return; }
  says("searching…");
  try {
    const { moments } = await api(`/api/search?${new URLSearchParams({ q: query, limit: 12 })}`);
    list.replaceChildren(...moments.map((moment) => el("li", {
      class: "search-hit", "data-video-id": moment.video_id, tabindex: "0",
      title: moment.lines.map((line) => `${line.kind}: ${line.text}`).join("\n"),
      onclick: () => openMoment(moment),
      onkeydown: (e) => { if (e.key === "Enter") openMoment(moment); },
    }, moment.thumbnail ? el("img", { src: moment.thumbnail, alt: "", loading: "lazy" }) : el("div", { class: "no-thumb" }, "no video"),
       el("div", { class: "hit-text" },
         el("div", { class: "name" }, moment.name),
         el("div", { class: "meta" }, `${moment.spans.map(([a, b]) => (b - a < 0.05 ? seconds(a) : `${a.toFixed(1)}-${seconds(b)}`)).join(", ")} · ${moment.kinds.join(", ")}`),
         el("div", { class: "line" }, moment.lines[0].text)))));
    list.hidden = moments.length === 0;
    says(moments.length ? "" : "Nothing found.");
  } catch (error) {
    list.hidden = true;
    says(error.message);
  }
}

async function openMoment(moment) {
  await selectVideo(moment.video_id);
  seek(moment.spans.length ? moment.spans[0][0] : moment.start_s);
}

// the files in the server's folders that are not registered yet, grouped by folder (two clips of one name in two
// folders are told apart), narrowed by the filter above them: one click adds one
async function loadFiles() {
  let files = [], folders = [];
  try { ({ files, folders } = await api("/api/files")); } catch (error) { return; }
  state.files = files;
  state.roots = folders;
  renderFiles();
}

// a folder's name as the list shows it: the served folder's own name, then the path below it
function folderLabel(folder) {
  const root = (state.roots || []).filter((r) => folder === r || folder.startsWith(`${r}/`) || folder.startsWith(`${r}\\`))
    .sort((a, b) => b.length - a.length)[0];
  if (!root) return folder;
  const base = root.split(/[\\/]/).filter(Boolean).pop() || root;
  return folder === root ? base : `${base}/${folder.slice(root.length + 1)}`;
}

function renderFiles() {
  const fresh = (state.files || []).filter((file) => !file.registered);
  const terms = $("#file-filter").value.toLowerCase().split(/\s+/).filter(Boolean);
  const groups = new Map();
  for (const file of fresh) {
    const label = folderLabel(file.folder);
    const haystack = `${label}/${file.name}`.toLowerCase();
    if (!terms.every((term) => haystack.includes(term))) continue;
    if (!groups.has(file.folder)) groups.set(file.folder, { label, files: [] });
    groups.get(file.folder).files.push(file);
  }
  const closed = state.closedFolders || (state.closedFolders = new Set());
  let shown = 0;
  const sections = [...groups.entries()].sort((a, b) => a[1].label.localeCompare(b[1].label)).map(([folder, group]) => {
    const items = group.files.sort((a, b) => a.name.localeCompare(b.name)).slice(0, Math.max(0, 200 - shown));
    shown += items.length;
    const details = el("details", { class: "folder", "data-folder": folder, ...(terms.length || !closed.has(folder) ? { open: "" } : {}) },
      el("summary", { title: folder }, el("span", { class: "folder-name" }, group.label), el("span", { class: "count" }, String(group.files.length))),
      el("ul", { class: "video-list files" }, items.map((file) => el("li", { title: file.path, "data-path": file.path,
        onclick: () => registerPath(file.path) },
        el("div", { class: "name" }, file.name), el("div", { class: "meta" }, `${(file.bytes / 1e6).toFixed(1)} MB · add`)))));
    details.addEventListener("toggle", () => { if (!terms.length) { if (details.open) closed.delete(folder); else closed.add(folder); } });
    return details;
  });
  $("#file-list").replaceChildren(...sections);
  $("#file-none").hidden = sections.length > 0 || !terms.length;
  $("#folder-files").hidden = fresh.length === 0;
}

async function selectVideo(videoId) {
  const video = state.videos.find((v) => v.video_id === videoId);
  if (!video) return;
  const changed = state.video?.video_id !== videoId;
  state.video = video;
  for (const item of document.querySelectorAll("#video-list li")) item.classList.toggle("active", item.dataset.videoId === videoId);
  $("#video-title").textContent = `· ${video.name}`;
  if (changed) {
    forgetVideoState();
    showPlayer(video);
  }
  renderStages(video.stages);
  $("#ask-button").disabled = false;
  $("#remove-button").disabled = false;
  $("#refer-button").disabled = !hasFile();  // a memory imported from captions has no objects to find
  await loadMemory();
}

// a video file plays; a memory imported from captions has no file: the player area says so (no broken <video>)
function showPlayer(video) {
  const player = $("#player");
  const wrap = $(".player-wrap");
  const hasFile = video.has_file !== false;
  wrap.classList.toggle("no-file", !hasFile);
  wrap.classList.toggle("has-video", hasFile);
  $("#player-nofile").hidden = hasFile;
  $(".legend").hidden = !hasFile;  // what the stages and offline descriptions are; an imported memory has its own
  $("#caption-legend").hidden = hasFile;
  if (hasFile) { preparePlayback(video); return; }
  state.playback = null; playerStatus("");
  player.removeAttribute("src"); player.load();
  $("#player-nofile").replaceChildren(el("b", {}, "No video file: "),
    `a memory imported from a released caption set, ${video.captions} captions by ${video.captioner} over ${seconds(video.duration_s)}. `,
    "Its captions are the timeline below (click one to read it); ask about it as about any video.");
}
const hasFile = () => state.video?.has_file !== false;

// the file plays as it is, or the server makes a copy this browser plays (once; its progress shown over the player);
// a file that should play and does not (the player fails on it) is copied too; a copy that cannot be made says why
async function preparePlayback(video, forceCopy = false) {
  const player = $("#player");
  const ticket = { videoId: video.video_id, forceCopy, source: null };
  state.playback = ticket;
  player.removeAttribute("src"); player.load();
  playerStatus("");
  for (;;) {
    let play;
    try {
      play = await api(`/api/videos/${video.video_id}/playback${forceCopy ? "?proxy=true" : ""}`);
    } catch (error) {
      if (state.playback === ticket) playerStatus(error.message, "failed");
      return;
    }
    if (state.playback !== ticket) return;  // another video was picked meanwhile
    if (play.state === "ready") {
      ticket.source = play.source;
      playerStatus("");
      player.src = play.url;
      return;
    }
    if (play.state === "failed") { playerStatus(play.message, "failed", video); return; }
    const why = forceCopy ? "This browser could not play the file as it is." : `${play.reason}.`;
    playerStatus(`${why} Making a copy it plays (once): ${Math.round(play.progress * 100)} %`, "making", video, play.progress);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

function onPlayerError() {
  const ticket = state.playback;
  const player = $("#player");
  if (!ticket || !player.getAttribute("src") || ticket.videoId !== state.video?.video_id) return;
  if (ticket.source === "original" && !ticket.forceCopy) { preparePlayback(state.video, true); return; }
  playerStatus(`This browser cannot play ${state.video.name} (${player.error?.message || "an unsupported format"}).`, "failed", state.video);
}

// a file that plays its sound and shows no picture (MPEG-4 Part 2 beside AAC: the browser drops what it cannot decode)
function onPlayerMetadata() {
  drawMask();
  const ticket = state.playback;
  if (ticket?.source === "original" && !ticket.forceCopy && ticket.videoId === state.video?.video_id
      && $("#player").videoWidth === 0) preparePlayback(state.video, true);
}

// what the player area says instead of playing: a copy being made (with its bar) or why nothing plays ("" hides it)
function playerStatus(message, kind = "", video = null, progress = 0) {
  const box = $("#player-status");
  box.hidden = !message;
  box.dataset.state = kind;
  if (!message) { box.replaceChildren(); return; }
  const parts = [el("div", { class: "player-status-text" }, message)];
  if (kind === "making") {
    const bar = el("div", { class: "progress" }, el("div", { class: "progress-fill" }));
    bar.firstChild.style.width = `${Math.round(progress * 100)}%`;
    parts.push(bar);
  }
  if (kind === "failed" && video) {
    parts.push(el("a", { class: "file-link", href: `/api/videos/${video.video_id}/file?original=true`, download: video.name }, "download the file as it is"));
  }
  box.replaceChildren(...parts);
}

// what was shown about the previous video (its segment text, reasoning, answer, SQL rows, notices) goes with it
function forgetVideoState() {
  if (state.asking) { state.asking.abort(); state.asking = null; }
  stopClock("");
  state.memory = null; state.shownSegment = null; state.band = null; state.position = 0; state.refer = null;
  $("#refer-result").replaceChildren(); $("#refer-clear").hidden = true; drawMask();
  state.steps = new Map(); state.open = new Set(); state.answer = null;
  $("#trace").replaceChildren(); $("#answer").hidden = true; $("#files").replaceChildren(); $("#ask-button").textContent = "Ask";
  $("#segment-detail").replaceChildren("The memory's segments, speech, on-screen text and objects appear here; click any of them to seek.");
  $("#segment-detail").classList.add("muted");
  $("#sql-result").replaceChildren(); $("#index-progress").hidden = true;
  notify("");
}

function renderStages(built) {
  if (!hasFile()) {  // an imported memory: its captions are its one stage, and there is no video to build from
    $("#stages").replaceChildren(el("span", { class: "stage built", title: `captions: ${state.video.origin}, one segment per caption` }, "captions"));
    $("#index-button").textContent = "Captions imported";
    $("#index-button").disabled = true;
    return;
  }
  $("#stages").replaceChildren(...STAGES.map((stage) => el("span", { class: `stage${built.includes(stage) ? " built" : ""}`,
    title: `${STAGE_NOTES[stage]} — ${built.includes(stage) ? "built" : "not built yet"}` }, stage)));
  const complete = STAGES.every((s) => built.includes(s));
  $("#index-button").textContent = complete ? "Memory built" : "Build memory";
  $("#index-button").disabled = complete;
}

async function loadMemory() {
  if (!state.video) return;
  try {
    state.memory = await api(`/api/videos/${state.video.video_id}/memory`);
  } catch (error) {
    state.memory = null;
    notify(error.message);
  }
  renderTimeline();
}

// -- the memory timeline --------------------------------------------------------------------------------------------
function renderTimeline() {
  const box = $("#timeline");
  const memory = state.memory;
  if (!memory || !state.video) { box.replaceChildren(); return; }
  const duration = Math.max(state.video.duration_s, 0.1);
  const pct = (t) => `${Math.min(100, Math.max(0, (t / duration) * 100))}%`;
  const span = (start, end) => ({ left: pct(start), width: pct(Math.max(end - start, 0)) });
  const block = (kind, start, end, label, title, onclick) => {
    const node = el("div", { class: `block ${kind}`, title, "data-start": start }, label || "");
    const { left, width } = span(start, end);
    node.style.left = left;
    node.style.width = width;
    node.addEventListener("click", (event) => { event.stopPropagation(); seek(start); if (onclick) onclick(); });
    return node;
  };
  const lane = (label, blocks, name) => {
    const track = el("div", { class: "lane-track", "data-lane": name }, blocks);
    track.addEventListener("click", (event) => {
      const rect = track.getBoundingClientRect();
      seek(((event.clientX - rect.left) / rect.width) * duration);
    });
    return el("div", { class: "lane" }, el("div", { class: "lane-label", title: label }, label), track);
  };
  const lanes = [];
  lanes.push(lane("Segments", memory.segments.map((s) => block("segment", s.start_s, s.end_s, String(s.segment_id),
    `${seconds(s.start_s)}–${seconds(s.end_s)}\n${s.text}`, () => showSegment(s))), "segments"));
  if (memory.speech.length) lanes.push(lane("Speech", memory.speech.map((s) => block("speech", s.start_s, s.end_s, s.text, `“${s.text}”`)), "speech"));
  if (memory.text.length) {
    lanes.push(lane("On-screen text", memory.text.map((t) => block("text", t.time_s, t.time_s + Math.min(1, duration / 40), "", `${seconds(t.time_s)}: ${t.text}`)), "text"));
  }
  const objects = [...memory.objects].sort((a, b) => b.frame_count - a.frame_count).slice(0, MAX_OBJECT_LANES);
  for (const object of objects) {
    lanes.push(lane(`${object.category} #${object.object_id}`, object.appearances.map(([start, end]) =>
      block("object", start, Math.max(end, start + 0.2), "", `${object.category} #${object.object_id}: ${object.description}`)), `object-${object.object_id}`));
  }
  if (!memory.segments.length) {
    lanes.splice(0, lanes.length, el("p", { class: "muted" }, "No memory yet: build it, or just ask (the first question builds it)."));
  }
  const ticks = [];
  const step = duration > 120 ? 30 : duration > 40 ? 10 : duration > 12 ? 2 : 1;
  for (let t = 0; t <= duration + 1e-6; t += step) ticks.push(el("span", { style: `left:${pct(t)}` }, clock(t)));
  const overlay = el("div", { class: "timeline-overlay" });
  box.replaceChildren(...lanes, el("div", { class: "axis" }, el("div"), el("div", { class: "axis-track" }, ticks)), overlay);
  drawOverlay();
}

// a segment as the planners read it (what was seen, then its speech and on-screen text), rendered by the server
function showSegment(segment) {
  const parts = [el("b", {}, `Segment ${segment.segment_id} · ${seconds(segment.start_s)}–${seconds(segment.end_s)}: `), segment.text];
  $("#segment-detail").replaceChildren(...parts);
  $("#segment-detail").classList.remove("muted");
}

// the playhead and the highlighted evidence band, drawn over every lane's track
function drawOverlay() {
  const duration = Math.max(state.video?.duration_s || 0, 0.1);
  const now = hasFile() ? $("#player").currentTime || 0 : state.position || 0;
  for (const track of document.querySelectorAll(".lane-track")) {
    let head = track.querySelector(".playhead");
    if (!head) { head = el("div", { class: "playhead" }); track.append(head); }
    head.style.left = `${Math.min(100, (now / duration) * 100)}%`;
    track.querySelectorAll(".band").forEach((band) => band.remove());
    if (state.band) {
      const band = el("div", { class: "band" });
      band.style.left = `${(state.band[0] / duration) * 100}%`;
      band.style.width = `${(Math.max(state.band[1] - state.band[0], 0.1) / duration) * 100}%`;
      track.append(band);
    }
  }
  const segment = state.memory?.segments.find((s) => now >= s.start_s && now < s.end_s);
  if (segment && segment !== state.shownSegment) { state.shownSegment = segment; showSegment(segment); }
  drawMask();
}

function seek(t) {
  if (!hasFile()) {  // no player: the timeline keeps the place
    state.position = Math.max(0, Math.min(t, (state.video?.duration_s || t) - 0.01));
    drawOverlay();
    return;
  }
  const player = $("#player");
  player.currentTime = Math.max(0, Math.min(t, (state.video?.duration_s || t) - 0.01));
  drawOverlay();
}

// -- referring to an object: find it by words, draw its mask over the player ---------------------------------------------
async function referObject(event) {
  event.preventDefault();
  if (!state.video || !hasFile()) return;
  const expression = $("#refer-expression").value.trim();
  if (!expression) { notify("Type what to find, e.g. the black dog on the left."); $("#refer-expression").focus(); return; }
  const videoId = state.video.video_id;
  $("#refer-button").disabled = true;
  $("#refer-result").textContent = "finding it (the object memory is built first if it is missing)…";
  try {
    const found = await api(`/api/videos/${videoId}/refer?expression=${encodeURIComponent(expression)}`);
    if (state.video?.video_id !== videoId) return;  // another video was picked meanwhile
    state.refer = { ...found, images: new Map(), step: maskStep(found.frames) };
    const doubt = found.ambiguous ? ` · ambiguous: ${found.candidates.length} fit, the most seen taken` : "";
    $("#refer-result").replaceChildren(
      el("b", {}, `object ${found.object_id} (${found.category})`), ` ${found.description} · found by the ${found.how}${doubt} · `,
      `${found.frames.length} masks (${found.mask_source}) · ${seconds(found.start_s)} – ${seconds(found.end_s)}`,
      el("a", { class: "file-link", href: found.links.masks, download: `${found.links.masks.split("/").pop()}.zip`, title: "the PNG masks, masks.json and overlay.mp4 as a zip" }, "masks (zip)"),
      el("a", { class: "file-link", href: found.links.overlay, target: "_blank", rel: "noopener", title: "the video with the mask drawn over it" }, "overlay video"));
    $("#refer-result").classList.remove("muted");
    $("#refer-clear").hidden = false;
    state.band = [found.start_s, found.end_s];
    seek(found.frames.length ? found.frames[0].time_s : found.start_s);
    if (!state.video.stages.includes("objects")) loadVideos(videoId);  // it built the object memory
  } catch (error) {
    state.refer = null;
    $("#refer-result").replaceChildren();
    notify(error.message);
    drawMask();
  } finally {
    $("#refer-button").disabled = !hasFile();
  }
}

function clearRefer() {
  state.refer = null; state.band = null;
  $("#refer-result").replaceChildren(); $("#refer-clear").hidden = true;
  drawOverlay();
}

// how far apart the masks are (the objects stage's sampling step): a mask is shown up to one step from its time
function maskStep(frames) {
  let step = Infinity;
  for (let i = 1; i < frames.length; i++) step = Math.min(step, frames[i].time_s - frames[i - 1].time_s);
  return Number.isFinite(step) && step > 0 ? step : 0.5;
}

function maskAt(refer, t) {
  let best = null;
  for (const frame of refer.frames) if (!best || Math.abs(frame.time_s - t) < Math.abs(best.time_s - t)) best = frame;
  return best && Math.abs(best.time_s - t) <= refer.step + 1e-3 ? best : null;
}

// a frame's mask as an image: COCO's run-length counts run down the columns, from background
function maskImage(frame) {
  const [height, width] = frame.rle.size;
  const image = new ImageData(width, height);
  let index = 0, on = false;
  for (const run of frame.counts) {
    if (on) {
      for (let i = index; i < index + run; i++) {
        const at = ((i % height) * width + Math.floor(i / height)) * 4;
        image.data[at] = 0; image.data[at + 1] = 200; image.data[at + 2] = 255; image.data[at + 3] = 120;
      }
    }
    index += run; on = !on;
  }
  return image;
}

// the mask of the frame the player shows, over the picture (the video is letterboxed inside its element)
function drawMask() {
  const canvas = $("#mask-overlay");
  const refer = state.refer;
  const player = $("#player");
  const frame = refer && hasFile() && player.videoWidth ? maskAt(refer, player.currentTime || 0) : null;
  if (!frame) { canvas.hidden = true; delete canvas.dataset.frame; return; }
  const [height, width] = frame.rle.size;
  if (canvas.width !== width || canvas.height !== height) { canvas.width = width; canvas.height = height; }
  if (!refer.images.has(frame.frame)) refer.images.set(frame.frame, maskImage(frame));
  canvas.getContext("2d").putImageData(refer.images.get(frame.frame), 0, 0);
  const scale = Math.min(player.clientWidth / player.videoWidth, player.clientHeight / player.videoHeight);
  const shownWidth = player.videoWidth * scale, shownHeight = player.videoHeight * scale;
  canvas.style.left = `${player.offsetLeft + (player.clientWidth - shownWidth) / 2}px`;
  canvas.style.top = `${player.offsetTop + (player.clientHeight - shownHeight) / 2}px`;
  canvas.style.width = `${shownWidth}px`;
  canvas.style.height = `${shownHeight}px`;
  canvas.dataset.frame = String(frame.frame);
  canvas.hidden = false;
}

// -- building the memory ----------------------------------------------------------------------------------------------
async function buildMemory() {
  if (!state.video) return;
  const videoId = state.video.video_id;
  $("#index-button").disabled = true;
  const bar = $("#index-progress");
  const setBar = (fraction, text) => { bar.hidden = false; bar.querySelector(".progress-fill").style.width = `${fraction * 100}%`; bar.querySelector(".progress-text").textContent = text; };
  setBar(0, "queued…");
  try {
    const job = await api(`/api/videos/${videoId}/index`, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
    await new Promise((resolve, reject) => {
      const source = new EventSource(`/api/jobs/${job.job_id}/events`);
      source.addEventListener("started", (e) => { const d = JSON.parse(e.data); setBar(0.02, d.missing.length ? `building ${d.missing.join(", ")}` : "already built"); });
      source.addEventListener("progress", (e) => {
        const d = JSON.parse(e.data);
        // within a stage the bar moves by frames (a frame stage is most of a build), across stages by stage
        const within = d.state === "done" ? 1 : d.frames_total ? d.frames_done / d.frames_total : 0;
        const frames = d.frames_total && d.state !== "done" ? `: frame ${d.frames_done} of ${d.frames_total}` : "";
        setBar(Math.max(0.03, (d.number - 1 + within) / d.total), d.state === "done" ? `${d.stage} built (${d.number}/${d.total}, ${d.seconds} s)` : `building ${d.stage} (${d.number}/${d.total})${frames}…`);
      });
      source.addEventListener("done", () => { source.close(); setBar(1, "memory built"); resolve(); });
      source.addEventListener("error", (e) => { source.close(); reject(new Error(e.data ? JSON.parse(e.data).error?.message || "the build failed" : "lost the connection")); });
    });
    await loadVideos(videoId);
    setTimeout(() => { bar.hidden = true; }, 1500);
  } catch (error) {
    notify(error.message);
    bar.hidden = true;
  } finally {
    renderStages(state.video?.stages || []);
  }
}

// -- asking -------------------------------------------------------------------------------------------------------------
function addChoice(text = "") {
  const box = $("#choices");
  if (box.children.length >= LETTERS.length) return;
  const row = el("div", { class: "choice" }, el("span", { class: "letter" }),
    el("input", { type: "text", value: text, placeholder: "an answer option", "aria-label": "answer option" }),
    el("button", { type: "button", class: "remove", title: "remove", onclick: () => { row.remove(); letterChoices(); } }, "×"));
  box.append(row);
  letterChoices();
  row.querySelector("input").focus();
}
function letterChoices() { [...$("#choices").children].forEach((row, i) => { row.querySelector(".letter").textContent = LETTERS[i]; }); }

function parseOptions(text) {
  const options = {};
  // pairs part at spaces, or at a comma before the next KEY=: "n=2, tools=export_clip,caption_retrieval"
  for (const pair of text.split(/\s+|,(?=\s*[\w-]+=)/).filter(Boolean)) {
    const [key, ...rest] = pair.split("=");
    if (!rest.length) throw new Error(`a planner option is KEY=VALUE, got “${pair}”`);
    options[key.replace(/-/g, "_")] = rest.join("=");
  }
  return options;
}

async function ask(event) {
  event.preventDefault();
  if (state.asking) { state.asking.abort(); status("stopped"); return; }  // the button says Stop meanwhile
  if (!state.video) return;
  const question = $("#question").value.trim();
  if (!question) { notify("Type a question first."); $("#question").focus(); return; }
  const choices = [...$("#choices").querySelectorAll("input")].map((input) => input.value.trim()).filter(Boolean);
  let options;
  try { options = parseOptions($("#planner-options").value); } catch (error) { notify(error.message); return; }
  const body = { videos: [state.video.video_id], question, choices: choices.length ? choices : null,
                 planner: $("#planner").value || null, options, ...($("#check").checked ? { check: true } : {}) };
  state.steps = new Map(); state.open = new Set(); state.answer = null; state.band = null;
  $("#trace").replaceChildren(); $("#answer").hidden = true; notify("");
  $("#ask-button").textContent = "Stop";
  const controller = new AbortController();
  state.asking = controller;
  const started = performance.now();
  startClock(started, "sending…");
  try {
    const response = await fetch("/api/ask/stream", { method: "POST", signal: controller.signal,
      headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }), body: JSON.stringify(body) });
    if (!response.ok) {
      const problem = await response.json().catch(() => ({}));
      throw new Error(problem.message || `${response.status} ${response.statusText}`);
    }
    await readEvents(response, (name, data) => onAskEvent(name, data, started));
  } catch (error) {
    if (error.name !== "AbortError") { notify(error.message); status("failed"); }
  } finally {
    if (state.asking === controller) {
      state.asking = null;
      $("#ask-button").textContent = "Ask";
      stopClock();
    }
  }
}

// a running clock and a spinner beside the phase while the model works: a question takes 5-80 s on a CPU
function startClock(started, phase) {
  stopClock();
  state.clock = { started, phase };
  $("#ask-status").classList.add("busy");
  const tick = () => { if (state.clock) $("#ask-status").textContent = `${state.clock.phase} ${((performance.now() - state.clock.started) / 1000).toFixed(1)} s`; };
  tick();
  state.clock.timer = setInterval(tick, 100);
}
function stopClock(text) {
  if (state.clock) clearInterval(state.clock.timer);
  state.clock = null;
  $("#ask-status").classList.remove("busy");
  if (text !== undefined) $("#ask-status").textContent = text;
}
function phase(text) { if (state.clock) { state.clock.phase = text; } else status(text); }

// server-sent events from a fetch body (EventSource cannot POST)
async function readEvents(response, handle) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const chunk = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message"; const data = [];
      for (const line of chunk.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      if (data.length) handle(name, JSON.parse(data.join("\n")));
    }
  }
}

function status(text) { stopClock(text); }

function onAskEvent(name, data, started) {
  const elapsed = ((performance.now() - started) / 1000).toFixed(1);
  if (name === "queued") phase(data.ahead ? `queued behind ${data.ahead} job${data.ahead > 1 ? "s" : ""}…` : `queued (${data.planner})…`);
  else if (name === "started") phase("building the memory if needed, then thinking…");
  else if (name === "step") { state.steps.set(data.id, data); renderTrace(data.id); phase(`${state.steps.size} step${state.steps.size === 1 ? "" : "s"}, thinking…`); }
  else if (name === "answer") {
    state.answer = data; renderAnswer(data); status(`answered in ${elapsed} s`);
    const video = state.videos.find((v) => v.video_id === data.video_id);
    if (video && !video.stages.includes("segments")) loadVideos(video.video_id);  // the ask built its memory
  }
  else if (name === "error") { notify(data.message || "the question failed"); status("failed"); }
}

// -- the trace: a chain stays flat, every fork of a search indents its branches ----------------------------------------
function renderTrace(freshId) {
  const children = new Map();
  for (const step of state.steps.values()) {
    const key = step.parent_id ?? "root";
    if (!children.has(key)) children.set(key, []);
    children.get(key).push(step);
  }
  const build = (parentKey) => {
    const nodes = [];
    let kids = children.get(parentKey) || [];
    while (kids.length === 1) { nodes.push(stepNode(kids[0], freshId)); kids = children.get(kids[0].id) || []; }
    kids.forEach((kid, i) => nodes.push(el("div", { class: "branch fork", "data-branch": i + 1 },
      el("div", { class: "branch-label" }, `branch ${i + 1} of ${kids.length}`), stepNode(kid, freshId), build(kid.id))));
    return nodes;
  };
  const trace = $("#trace");
  const atBottom = trace.scrollHeight - trace.scrollTop - trace.clientHeight < 40;
  trace.replaceChildren(...build("root"));
  if (atBottom) trace.scrollTop = trace.scrollHeight;
}

function stepNode(step, freshId) {
  const error = step.type === "observation" && step.is_error ? " error" : "";
  const cost = step.prompt_tokens || step.completion_tokens || step.seconds >= 0.05
    ? `${step.seconds.toFixed(1)} s${step.prompt_tokens ? ` · ${step.prompt_tokens}+${step.completion_tokens} tok` : ""}` : "";
  const label = step.type === "tool_call" ? (step.automatic ? "auto call" : "call") : step.type.replace("_", " ");
  const text = stepText(step);
  const node = el("div", { class: `step${state.open.has(step.id) ? " open" : ""}${step.id === freshId ? " fresh" : ""}`,
                           "data-step-id": step.id, "data-type": step.type, title: "click to expand" },
    el("div", { class: "head" },
      el("span", { class: "id" }, `#${step.id}`),
      el("span", { class: `kind ${step.type}${error}` }, label),
      step.type === "evaluation" && step.score !== null && step.score !== undefined ? el("span", { class: "score" }, (step.score >= 0 ? "+" : "") + Number(step.score).toFixed(2)) : null,
      el("span", { class: "text" }, text),
      step.type === "observation" && madeFile(step) ? fileLink(madeFile(step)) : null,
      cost ? el("span", { class: "cost" }, cost) : null));
  node.addEventListener("click", () => {
    if (state.open.has(step.id)) state.open.delete(step.id); else state.open.add(step.id);
    node.classList.toggle("open");
  });
  if (step.id === freshId) setTimeout(() => node.classList.remove("fresh"), 900);
  return node;
}

function stepText(step) {
  if (step.display) return step.display;  // the server's line for people: options by letter, no markup
  if (step.type === "tool_call") return `${step.tool}(${step.raw_arguments})${step.thought ? `  — ${step.thought}` : ""}`;
  if (step.type === "observation") return step.text;
  if (step.type === "final_answer") return step.answer + (step.thought ? `  — ${step.thought}` : "");
  const summary = step.summary || "";
  return summary.replace(/^[A-Za-z ()]+: /, "");
}

// -- the answer, with evidence that seeks the player ----------------------------------------------------------------------
function renderAnswer(answer) {
  $("#answer").hidden = false;
  const option = answer.choice_index !== null && answer.choice_index !== undefined ? el("span", { class: "option" }, `${LETTERS[answer.choice_index]}.`) : null;
  $("#answer-text").replaceChildren(option || "", answer.answer);
  $("#candidates").replaceChildren(...(answer.candidates.length > 1 ? answer.candidates.map((c) =>
    el("span", { class: `candidate${c.text === answer.answer ? " chosen" : ""}` },
      `${c.choice_index !== null && c.choice_index !== undefined ? `${LETTERS[c.choice_index]}. ` : ""}${c.text} · ${c.votes} vote${c.votes === 1 ? "" : "s"}${c.reward !== null ? ` · reward ${c.reward.toFixed(2)}` : ""}`)) : []));
  const withFile = new Set(state.videos.filter((v) => v.has_file !== false).map((v) => v.video_id));
  // what the check found the answer rests on comes first, then what it did not re-read, then what it found silent
  const rank = (item) => (item.supports === true ? 0 : item.supports === false ? 2 : 1);
  const shown = answer.evidence.map((item, i) => [item, i]).sort((a, b) => rank(a[0]) - rank(b[0]) || a[1] - b[1])
    .slice(0, 12).map(([item]) => item);
  const items = shown.map((item) => {
    if (item.where) {  // a knowledge source's page, section, address or SQL: no time span to seek to
      return el("div", { class: "evidence-item caption knowledge", title: item.text },
        el("div", { class: "when" }, item.where), evidenceKind(item), el("div", { class: "what" }, item.text));
    }
    // a clip or crop's source is its video's id with "@..." or "[...]" after it; a memory id may hold "@" itself
    const videoId = state.videos.some((v) => v.video_id === item.source) ? item.source
      : item.source.split("@")[0].split("[")[0] || answer.video_id;
    const at = item.start_s;
    const image = withFile.has(videoId) ? el("img", { src: `/api/videos/${videoId}/frame?t=${Math.max(0, (item.start_s + item.end_s) / 2).toFixed(2)}&width=320`, alt: `frame at ${seconds(at)}`, loading: "lazy" }) : null;
    const verdict = item.supports === true ? " supports" : item.supports === false ? " silent" : "";
    const mark = item.supports === true ? el("div", { class: "verdict" }, "✓ supports the answer")
      : item.supports === false ? el("div", { class: "verdict" }, "re-read: does not show it") : null;
    return el("button", { type: "button", class: `evidence-item${image ? "" : " caption"}${verdict}`, "data-start": item.start_s, "data-end": item.end_s, title: item.text,
                          onclick: () => showEvidence(videoId, item) },
      image, el("div", { class: "when" }, `${seconds(item.start_s)} – ${seconds(item.end_s)}`), mark, evidenceKind(item),
      el("div", { class: "what" }, item.text));
  });
  $("#evidence").replaceChildren(...items);
  const made = [...new Map(answer.trace.filter((step) => step.type === "observation" && madeFile(step))
    .map((step) => [madeFile(step).name, madeFile(step)])).values()];
  $("#files").replaceChildren(...(made.length ? [el("h3", {}, "Files made"), el("ul", {}, made.map((file) =>
    el("li", {}, fileLink(file), el("span", { class: "muted" }, ` ${file.what}`))))] : []));
  $("#files").hidden = !made.length;
  const usage = answer.usage;
  const sure = answer.abstained ? ` · abstained: ${answer.abstain_reason}` : (answer.confidence !== null && answer.confidence !== undefined ? ` · confidence ${Math.round(answer.confidence * 100)} %` : "");
  $("#usage").textContent = `${answer.planner}${sure} · ${usage.llm_calls} LLM calls${usage.cached_calls ? ` + ${usage.cached_calls} from the cache` : ""} · ${usage.prompt_tokens}+${usage.completion_tokens} tokens · ${usage.seconds.toFixed(1)} s in the LLM`;
}

// -- files a tool made (a clip, an edited video, frames): links that download them --------------------------------------------
function madeFile(step) {
  const file = step.artifacts?.file;
  if (!file) return null;
  const name = file.split(/[\\/]/).pop();
  const kind = step.artifacts.kind;
  const what = kind === "frames" ? `${step.artifacts.count} frames (zip)`
    : kind === "segment" ? `object ${step.artifacts.object_id}'s masks in ${step.artifacts.count} frames and the overlay video (zip)`
    : `${kind}, ${seconds(step.artifacts.start_s)} – ${seconds(step.artifacts.end_s)}`;
  const folder = kind === "frames" || kind === "segment";  // a folder: served as a zip
  return { name, path: file, what, saved: folder ? `${name}.zip` : name };
}

function fileLink(file) {
  return el("a", { class: "file-link", href: `/api/artifacts/${encodeURIComponent(file.name)}`, download: file.saved,
                   title: file.path, onclick: (event) => event.stopPropagation() }, file.name);
}

async function showEvidence(videoId, item) {
  if (state.video?.video_id !== videoId) await selectVideo(videoId);
  state.band = [item.start_s, item.end_s];
  seek(item.start_s);
}

// -- SQL ------------------------------------------------------------------------------------------------------------------
async function runSql(event) {
  event.preventDefault();
  if (!state.video) return;
  const out = $("#sql-result");
  try {
    const result = await api(`/api/videos/${state.video.video_id}/sql`, { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ query: $("#sql-query").value, max_rows: 200 }) });
    out.replaceChildren(el("table", {}, el("thead", {}, el("tr", {}, result.columns.map((c) => el("th", {}, c)))),
      el("tbody", {}, result.rows.map((row) => el("tr", {}, row.map((v) => el("td", {}, v === null ? "" : typeof v === "number" ? String(Math.round(v * 1000) / 1000) : String(v))))))),
      result.truncated ? el("p", { class: "muted" }, "more rows were cut") : "");
  } catch (error) {
    out.replaceChildren(el("p", { class: "notice" }, error.message));
  }
}

// -- removing a video: its memory, and its file when it was uploaded (a folder's file stays, listed as not added) ---
async function removeVideo() {
  const video = state.video;
  if (!video) return;
  const uploaded = video.has_file !== false && !state.files?.some((file) => file.path === video.path);
  const file = video.has_file === false ? " Its caption file stays." : uploaded ? " Its uploaded file is deleted too." : " The file stays in its folder.";
  if (!confirm(`Remove ${video.name} and its memory?${file}`)) return;
  try {
    await api(`/api/videos/${video.video_id}`, { method: "DELETE" });
    forgetVideoState();
    state.video = null;
    const player = $("#player");
    state.playback = null; playerStatus("");
    player.removeAttribute("src"); player.load();
    $(".player-wrap").classList.remove("has-video", "no-file"); $("#player-nofile").hidden = true;
    $(".legend").hidden = false; $("#caption-legend").hidden = true;
    $("#video-title").textContent = ""; $("#timeline").replaceChildren(); $("#stages").replaceChildren();
    $("#ask-button").disabled = true; $("#remove-button").disabled = true; $("#index-button").disabled = true; $("#refer-button").disabled = true;
    await loadVideos();
    notify(`removed ${video.name}`, true);
  } catch (error) { notify(error.message); }
}

// -- adding videos ----------------------------------------------------------------------------------------------------------
async function register(event) {
  event.preventDefault();
  const path = $("#register-path").value.trim();
  if (path && await registerPath(path)) $("#register-path").value = "";
}

async function registerPath(path) {
  try {
    const video = await api("/api/videos", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ path }) });
    notify(`added ${video.name}`, true);
    await loadVideos(video.video_id);
    return true;
  } catch (error) { notify(error.message); return false; }
}

async function upload() {
  const file = $("#upload-input").files[0];
  if (!file) return;
  notify(`uploading ${file.name}…`, true);
  try {
    const video = await api(`/api/videos/upload?filename=${encodeURIComponent(file.name)}`, { method: "POST", body: file,
      headers: { "Content-Type": file.type || "application/octet-stream" } });
    notify(`uploaded ${video.name}`, true);
    await loadVideos(video.video_id);
  } catch (error) { notify(error.message); }
  $("#upload-input").value = "";
}

// -- importing released captions: a job with per-video progress, then the memories are listed --------------------------
async function importCaptions(event) {
  event.preventDefault();
  const path = $("#import-path").value.trim();
  if (!path) { notify("Give the path of a caption file, folder or zip in the server's folders."); return; }
  const says = (text) => { $("#import-status").textContent = text; };
  $("#import-button").disabled = true;
  says("reading and checking the captions…");
  try {
    const job = await api("/api/import", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ path }) });
    says(`importing ${job.videos} videos (${job.format}, ${job.namespace}:…)…`);
    const done = await new Promise((resolve, reject) => {
      const source = new EventSource(`/api/jobs/${job.job_id}/events`);
      source.addEventListener("progress", (e) => { const d = JSON.parse(e.data); says(`importing: ${d.done} of ${d.total} videos…`); });
      source.addEventListener("done", (e) => { source.close(); resolve(JSON.parse(e.data)); });
      source.addEventListener("error", (e) => { source.close(); reject(new Error(e.data ? JSON.parse(e.data).error?.message || "the import failed" : "lost the connection")); });
    });
    const report = done.report;
    const memories = (n) => `${n} ${n === 1 ? "memory" : "memories"}`;
    says(`${memories(report.imported.length)} imported, ${report.unchanged.length} unchanged, ${report.captions} captions, in ${report.seconds} s`);
    $("#import-path").value = "";
    await loadVideos([...report.imported, ...report.unchanged][0]);
  } catch (error) {
    says(""); notify(error.message);
  } finally {
    $("#import-button").disabled = false;
  }
}

// -- start ----------------------------------------------------------------------------------------------------------------
async function start() {
  $("#ask-form").addEventListener("submit", ask);
  $("#search-form").addEventListener("submit", searchLibrary);
  $("#add-choice").addEventListener("click", () => addChoice());
  $("#index-button").addEventListener("click", buildMemory);
  $("#remove-button").addEventListener("click", removeVideo);
  $("#register-form").addEventListener("submit", register);
  $("#import-form").addEventListener("submit", importCaptions);
  $("#upload-input").addEventListener("change", upload);
  $("#sql-form").addEventListener("submit", runSql);
  $("#file-filter").addEventListener("input", renderFiles);
  $("#refer-form").addEventListener("submit", referObject);
  $("#refer-clear").addEventListener("click", clearRefer);
  window.addEventListener("resize", drawMask);
  $("#question").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) ask(e); });
  const player = $("#player");
  player.addEventListener("timeupdate", drawOverlay);
  player.addEventListener("seeked", drawOverlay);
  player.addEventListener("loadedmetadata", onPlayerMetadata);
  player.addEventListener("error", onPlayerError);
  window.addEventListener("keydown", (e) => { if (e.key === "Escape" && state.asking) { state.asking.abort(); status("stopped"); } });
  try {
    const { planners, default: fallback } = await api("/api/planners");
    $("#planner").replaceChildren(...planners.map((name) => el("option", { value: name, ...(name === fallback ? { selected: "" } : {}) }, name)));
    await loadVideos();
    if (!state.video && state.videos.length) await selectVideo(state.videos[0].video_id);
  } catch (error) { notify(error.message); }
  document.body.dataset.ready = "true";
}

start();
