// The watch page's replay mode (?replay=NAME): the recorded session's index (its hello, every
// frame message and its end, as a live viewer got them) from GET /v1/replays/NAME, its rendered
// boards fetched in chunks from /boards, and the frame controls: a slider, step buttons,
// play/pause and a speed.

import { $, getJSON, setText } from "./api.js";
import { HISTORY, annotate, historyEntry, model, viewer } from "./model.js";

const CHUNK = 32; // boards fetched per request
const boards = new Map(); // frame -> rendered board
const pending = new Set(); // chunk starts being fetched

function fetchChunk(n) {
  const R = viewer.replay;
  const start = Math.floor(n / CHUNK) * CHUNK;
  if (start >= R.frames || boards.has(start) || pending.has(start)) return;
  pending.add(start);
  getJSON(`/v1/replays/${encodeURIComponent(R.name)}/boards?start=${start}&count=${CHUNK}`)
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

let playClock = null; // {t, n}: when playing started, from which frame
function setPlaying(on) {
  const R = viewer.replay;
  R.playing = on && R.n < R.frames - 1;
  playClock = R.playing ? { t: performance.now(), n: R.n } : null;
  $("playpause").textContent = R.playing ? "⏸" : "▶";
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

/** Opens replay `name`: its index, its first frame, and the controls wired. */
export async function openReplay(name) {
  $("replay-controls").hidden = false;
  try {
    // The server sends the hello a live viewer of the session got, and its end message.
    const index = await getJSON(`/v1/replays/${encodeURIComponent(name)}`);
    const fps = index.hello.config.fps;
    viewer.replay = { name, index, frames: index.frames.length, n: 0, want: null, playing: false, fps, seek };
    model.hello = index.hello;
    const scrub = $("scrub");
    scrub.max = String(index.frames.length - 1);
    scrub.addEventListener("input", () => {
      setPlaying(false);
      seek(Number(scrub.value));
    });
    $("rewind").addEventListener("click", () => seek(0));
    $("back").addEventListener("click", () => {
      setPlaying(false);
      seek(viewer.replay.n - 1);
    });
    $("fwd").addEventListener("click", () => {
      setPlaying(false);
      seek(viewer.replay.n + 1);
    });
    $("playpause").addEventListener("click", () => setPlaying(!viewer.replay.playing));
    $("speed").addEventListener("change", () => setPlaying(viewer.replay.playing));
    seek(0);
  } catch (e) {
    model.error = `cannot open replay ${name}: ${e.message}`;
  }
  model.dirty = true;
}
