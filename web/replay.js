// The watch page's replay mode (?replay=NAME): the recorded session's index (its hello, every
// frame message and its end, as a live viewer got them) from GET /v1/replays/NAME, its rendered
// boards fetched in chunks from /boards, and the frame controls: a slider, step buttons,
// play/pause and a speed, the keys (arrows, Shift+arrows, Home/End, space), a link to the
// frame on screen (?frame=N, kept in the address bar) and the GIF download. A replay of the
// results folder (?results_replay=PATH: an annotated game, `rtplan annotate-games`) comes from
// GET /v1/results/replay?path=PATH the same way.

import { $, getJSON, setText } from "./api.js";
import { HISTORY, annotate, historyEntry, logReport, model, viewer } from "./model.js";

const CHUNK = 32; // boards fetched per request

/** Where the replay a page's query names comes from: its name, and the URLs of its index, its
 * boards and its GIF; null when the query names none. */
export function replaySource(params) {
  const path = params.get("results_replay");
  if (path) {
    const q = `path=${encodeURIComponent(path)}`;
    return {
      name: path.split("/").pop(),
      index: `/v1/results/replay?${q}`,
      boards: (start, count) => `/v1/results/replay/boards?${q}&start=${start}&count=${count}`,
      gif: `/v1/results/replay/gif?${q}`,
    };
  }
  const name = params.get("replay");
  if (!name) return null;
  const base = `/v1/replays/${encodeURIComponent(name)}`;
  return {
    name,
    index: base,
    boards: (start, count) => `${base}/boards?start=${start}&count=${count}`,
    gif: `${base}/gif`,
  };
}
const boards = new Map(); // frame -> rendered board
const pending = new Set(); // chunk starts being fetched

function fetchChunk(n) {
  const R = viewer.replay;
  const start = Math.floor(n / CHUNK) * CHUNK;
  if (start >= R.frames || boards.has(start) || pending.has(start)) return;
  pending.add(start);
  getJSON(R.source.boards(start, CHUNK))
    .then((got) => {
      got.boards.forEach((b, i) => boards.set(got.start + i, b));
      pending.delete(start);
      if (R.want !== null) show(R.want);
    })
    .catch((e) => {
      pending.delete(start);
      model.error = `cannot load frames of ${R.name}: ${e.message}`;
      model.dirty = true;
    });
}

/** Shows frame n once its board (and the one before, for the annotations) is here. */
function show(n) {
  const R = viewer.replay;
  R.want = n;
  const need = n > 0 ? [n - 1, n] : [n];
  const missing = need.filter((m) => !boards.has(m));
  if (missing.length) {
    missing.forEach(fetchChunk);
    return;
  }
  R.want = null;
  R.n = n;
  $("scrub").value = String(n);
  if (!R.playing) syncUrl(n);
  const f = R.index.frames[n];
  model.annot = annotate(n > 0 ? boards.get(n - 1) : null, boards.get(n), null);
  model.latest = { ...f, state: boards.get(n) };
  model.history = R.index.frames
    .slice(Math.max(1, n - HISTORY + 1), n + 1)
    .map((g) => historyEntry(g.previous));
  fetchChunk(n + CHUNK); // the frames that play next
  model.dirty = true;
}

function seek(n) {
  const R = viewer.replay;
  show(Math.max(0, Math.min(R.frames - 1, Math.round(n))));
}

/** Keeps the address bar on frame n (?frame=N), so that a copied link opens there; not while
 * playing (browsers throttle history updates), and once playing stops. */
function syncUrl(n) {
  const url = new URL(location.href);
  const was = url.searchParams.get("frame");
  if (was === String(n) || (was === null && n === 0)) return; // a plain link opens at 0 too
  url.searchParams.set("frame", String(n));
  history.replaceState(history.state, "", url);
}

// Icons as SVG (the media-control characters are missing from stock fonts).
const ICON = {
  play: '<svg viewBox="0 0 16 16" width="14" height="14" aria-hidden="true" fill="currentColor"><path d="M4 3v10l8-5z"/></svg>',
  pause:
    '<svg viewBox="0 0 16 16" width="14" height="14" aria-hidden="true" fill="currentColor"><rect x="3" y="3" width="3.5" height="10"/><rect x="9.5" y="3" width="3.5" height="10"/></svg>',
};

let playClock = null; // {t, n}: when playing started, from which frame
function setPlaying(on) {
  const R = viewer.replay;
  const was = R.playing;
  R.playing = on && R.n < R.frames - 1;
  playClock = R.playing ? { t: performance.now(), n: R.n } : null;
  const button = $("playpause");
  if (was !== R.playing || !button.dataset.state) {
    button.innerHTML = R.playing ? ICON.pause : ICON.play;
    button.setAttribute("aria-label", R.playing ? "pause" : "play");
    button.dataset.state = R.playing ? "playing" : "paused";
  }
  if (was && !R.playing) syncUrl(R.n);
}

/** Shows frame n (and stops playing): a click on the move list. */
function jump(n) {
  setPlaying(false);
  seek(n);
}

/** Steps `by` frames (and stops playing). */
function step(by) {
  setPlaying(false);
  seek(viewer.replay.n + by);
}

/** The replay's keys: ←/→ one frame, Shift+←/→ ten, Home/End the first/last, space plays or
 * pauses; not while typing in a field (the slider and the speed take their own keys). */
function onKey(event) {
  const t = event.target;
  if (t instanceof HTMLElement && (t.closest("input, select, textarea") || t.isContentEditable)) return;
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const R = viewer.replay;
  const act = {
    ArrowLeft: () => step(event.shiftKey ? -10 : -1),
    ArrowRight: () => step(event.shiftKey ? 10 : 1),
    Home: () => step(-R.frames),
    End: () => step(R.frames),
    " ": () => setPlaying(!R.playing),
  }[event.key];
  if (!act) return;
  event.preventDefault(); // no page scroll, and no click of a focused button
  act();
}

/** The frame ?frame=N asks for, clamped to the replay; a note says when it was out of range. */
function startFrame(frames) {
  const asked = new URLSearchParams(location.search).get("frame");
  if (asked === null || asked === "") return 0;
  const n = Number(asked);
  const last = frames - 1;
  if (!Number.isInteger(n)) {
    note(`?frame=${asked} is not a frame number: showing frame 0 (frames 0 to ${last})`);
    return 0;
  }
  const clamped = Math.max(0, Math.min(last, n));
  if (clamped !== n) note(`frame ${n} is out of range (this replay has frames 0 to ${last}): showing frame ${clamped}`);
  return clamped;
}

function note(text) {
  const p = $("replay-note");
  p.textContent = text;
  p.hidden = false;
}

/** Advances a playing replay to the frame its clock has reached (each animation frame). */
export function replayTick(now) {
  const R = viewer.replay;
  if (!R.playing || R.want !== null) return;
  const rate = R.fps * Number($("speed").value);
  const target = Math.min(R.frames - 1, playClock.n + Math.floor(((now - playClock.t) / 1000) * rate));
  if (target > R.n) {
    if (!boards.has(target)) {
      // Waiting for boards: resume the clock from where it stands when they come.
      fetchChunk(target);
      playClock = { t: now, n: R.n };
      return;
    }
    show(target);
  }
  if (R.n >= R.frames - 1) setPlaying(false);
}

/** The replay's position under its controls. */
export function drawReplayPosition() {
  setText("replay-pos", `frame ${viewer.replay.n} / ${viewer.replay.frames - 1}`);
}

/** Opens the replay of `source` (`replaySource`): its index, its first frame, and the
 * controls wired. */
export async function openReplay(source) {
  const name = source.name;
  $("replay-controls").hidden = false;
  try {
    // The server sends the hello a live viewer of the session got, and its end message.
    const index = await getJSON(source.index);
    const fps = index.hello.config.fps;
    viewer.replay = { name, source, index, frames: index.frames.length, n: 0, want: null, playing: false, fps, seek: jump };
    model.hello = index.hello;
    for (const f of index.frames) if (f.previous) logReport(f.previous); // the whole game's charts
    const scrub = $("scrub");
    scrub.max = String(index.frames.length - 1);
    scrub.addEventListener("input", () => {
      setPlaying(false);
      seek(Number(scrub.value));
    });
    $("rewind").addEventListener("click", () => step(-index.frames.length));
    $("back").addEventListener("click", () => step(-1));
    $("fwd").addEventListener("click", () => step(1));
    $("end").addEventListener("click", () => step(index.frames.length));
    $("playpause").addEventListener("click", () => setPlaying(!viewer.replay.playing));
    $("speed").addEventListener("change", () => setPlaying(viewer.replay.playing));
    document.addEventListener("keydown", onKey);
    $("gif").href = source.gif;
    $("gif").setAttribute("download", name.replace(/\.jsonl$/, "") + ".gif");
    setPlaying(false);
    seek(startFrame(index.frames.length));
  } catch (e) {
    model.error = `cannot open replay ${name}: ${e.message}`;
  }
  model.dirty = true;
}
