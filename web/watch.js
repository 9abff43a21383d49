// The watch page: one session's viewer websocket (hello, frames, end; see server/_messages.py),
// or a recorded replay (?replay=NAME, or ?results_replay=PATH for an annotated game of the
// results: replay.js, annotation.js) scrubbed frame by frame. Messages only update
// the model (model.js); a requestAnimationFrame loop draws the newest frame, so a fast session
// never queues drawing work behind it. In a human session the page that holds the session's
// token plays it (play.js). The side panels are panels.js, the thinking panels thinking.js.
// At /tv the page shows the game on air (GET /v1/featured: the server's live sessions in turn,
// server/_tv.py) and follows it to the next; a game that ended keeps its result on screen a
// while first.

import { $, getJSON, saveToken, setText } from "./api.js";
import { carryAnnot } from "./draw.js";
import {
  GAME_LOG, HISTORY, RECENT, annotate, ensureGame, game, historyEntry, kindOf, logReport, model, resetModel, view,
  viewer,
} from "./model.js";
import {
  clearPanels, drawClocks, drawHeader, drawLegend, drawPanels, drawResult, drawStatus, sizeCanvas,
} from "./panels.js";
import { drawPlayStatus, sessionToken, startPlaying } from "./play.js";
import { drawAnnotation } from "./annotation.js";
import { drawReplayPosition, openReplay, replaySource, replayTick } from "./replay.js";
import { drawThinking, resetThinking } from "./thinking.js";

const params = new URLSearchParams(location.search);
const tv = location.pathname === "/tv";
let sessionId = tv ? null : params.get("session");
const replay = tv ? null : replaySource(params);

const TV_POLL_MS = 1000; // how often the TV page asks for the featured game
const TV_HOLD_MS = 4000; // how long a finished game's result stays before the next game

// Live sessions ----------------------------------------------------------------------------

let socket = null;
const send = (msg) => socket.send(JSON.stringify(msg));

/** What the session played before this page joined (the hello's `past`): the charts' recent
 * history, the whole game's decisions and moves, as if the page had watched from frame 0. */
function seedPast(past) {
  if (!past) return;
  model.history = past.reports.map(historyEntry).slice(-HISTORY);
  model.decisions = past.decisions.slice(-GAME_LOG);
  model.moves = past.moves.slice(-GAME_LOG);
}

/** The countdown's end, `ms` from now by a message of the server: the earliest end any
 * message gives (a frame sent to a late viewer was published earlier, its count is stale). */
function countdownFrom(ms) {
  if (!(ms > 0)) return;
  const at = performance.now() + ms;
  model.startsAt = model.startsAt ? Math.min(model.startsAt, at) : at;
}

function onFrame(msg) {
  msg.receivedAt = performance.now();
  countdownFrom(msg.starts_in_ms);
  viewer.frames.push(msg);
  if (viewer.frames.length > RECENT) viewer.frames.shift();
  model.annot = annotate(model.latest && model.latest.state, msg.state, model.annot);
  model.previous = model.latest;
  model.latest = msg;
  const last = model.history[model.history.length - 1];
  if (msg.previous && !(last && last.frame >= msg.previous.frame)) { // not in the hello's past
    model.history.push(historyEntry(msg.previous));
    if (model.history.length > HISTORY) model.history.shift();
    logReport(msg.previous);
  }
  for (const rep of msg.late || []) { // an answer after its deadline: its frame's entry says so
    const entry = model.history.find((h) => h.frame === rep.frame);
    if (entry) entry.kind = kindOf(rep);
  }
}

function onMessage(event) {
  const msg = JSON.parse(event.data);
  viewer.received += 1;
  if (msg.type === "hello") {
    model.hello = msg;
    seedPast(msg.past);
    countdownFrom(msg.session.starts_in_ms);
    // A player's game starts when it joins: join once the board can be drawn.
    const token = tv || msg.config.agent !== "human" ? null : sessionToken(sessionId);
    const ws = socket;
    ensureGame().then(() => token && ws.readyState === WebSocket.OPEN && send({ type: "play", token }));
  } else if (msg.type === "frame") onFrame(msg);
  else if (msg.type === "end") {
    model.end = msg;
    model.endedAt = performance.now();
    viewer.ended = true;
  } else if (msg.type === "player") startPlaying(msg, send);
  else if (msg.type === "error") {
    viewer.errors.push(msg);
    setText("play-status", `server: ${msg.message}`);
  }
  model.dirty = true;
}

function connect() {
  if (!sessionId) {
    model.error = "no session: open this page as /watch?session=ID (links in the lobby)";
    model.dirty = true;
    return;
  }
  const proto = location.protocol === "https:" ? "wss" : "ws";
  const ws = new WebSocket(`${proto}://${location.host}/v1/sessions/${encodeURIComponent(sessionId)}/ws`);
  socket = ws;
  ws.onmessage = (event) => ws === socket && onMessage(event);
  ws.onclose = (event) => {
    if (ws !== socket) return; // a session the TV page has left
    if (!model.end) {
      const why = event.reason ? `: ${event.reason}` : "";
      model.error = event.code === 4404 ? `no session ${sessionId}` : `connection closed (${event.code}${why})`;
    }
    model.dirty = true;
  };
}

// A finished game: a rematch or a new game ---------------------------------------------------

/** The session's settings (the hello's `config`) as a POST /v1/sessions body: the same game
 * again, its seed included. */
function rematchBody() {
  const c = model.hello.config;
  const body = {
    game: c.game_id, seed: c.seed, fps: c.fps, agent: c.agent, fallback: c.fallback,
    clock: c.clock, record: c.record, max_frames: c.max_frames,
  };
  if (c.agent === "planner" && c.ks.length) body.k = c.ks.length === 1 ? c.ks[0] : c.ks;
  if (model.hello.spec.num_players === 2) {
    body.opponent = c.opponent;
    if (c.opponent === "planner" && c.opponent_k) body.opponent_k = c.opponent_k;
    if (c.time_s) Object.assign(body, { time_s: c.time_s, increment_s: c.increment_s });
  }
  return body;
}

async function rematch() {
  $("rematch").disabled = true;
  try {
    const created = await getJSON("/v1/sessions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(rematchBody()),
    });
    saveToken(created.id, created.token); // this tab plays a person's rematch
    location.assign(`/watch?session=${encodeURIComponent(created.id)}`);
  } catch (e) {
    setText("after-status", `could not start a rematch: ${e.message}`);
    $("rematch").disabled = false;
  }
}
$("rematch").addEventListener("click", rematch);

/** Once a live game is over (not on the TV page, which moves on by itself): a rematch (the
 * built-in agents and a person; an Env API agent's game needs its agent) and a new game. */
function drawAfter() {
  const over = Boolean(model.end) && !tv && !viewer.replay && model.hello;
  $("after").hidden = !over;
  $("rematch").hidden = !over || model.hello.config.agent === "grpc";
}

// The TV page ------------------------------------------------------------------------------

/** Read by the tests: the session on screen and how many the page has shown. */
viewer.tv = tv ? { session: null, shown: 0 } : null;

/** Shows session `id` from its start: a fresh model, blank panels and board (nothing of the
 * last game stays while the next one's hello and first frame come), and a socket. */
function tune(id) {
  const old = socket;
  socket = null;
  if (old) old.close();
  resetModel();
  resetThinking();
  clearPanels();
  sessionId = id;
  viewer.tv.session = id;
  viewer.tv.shown += 1;
  connect();
}

/** Asks which game is on air; tunes to it when it is another: at once while the game on screen
 * is live (its turn is over), once its result has been shown `TV_HOLD_MS` when it ended. */
async function tvPoll() {
  try {
    const { session } = await getJSON("/v1/featured");
    const held = !model.end || performance.now() - model.endedAt >= TV_HOLD_MS;
    if (session && session.id !== sessionId && (held || model.error)) tune(session.id);
    else if (!session && !sessionId) {
      setText("status", "no game on air yet: start one in the lobby; this page shows it when it starts");
    }
  } catch (e) {
    setText("status", `cannot ask for the featured game: ${e.message}`);
  }
  setTimeout(tvPoll, TV_POLL_MS);
}

// Drawing ---------------------------------------------------------------------------------

function draw() {
  const t0 = performance.now();
  drawPage();
  const t1 = performance.now();
  viewer.drawMs = viewer.drawMs ? viewer.drawMs + (t1 - t0 - viewer.drawMs) / 20 : t1 - t0;
  const f = model.latest;
  if (f && f.receivedAt !== undefined) {
    viewer.drawLog.push([f.frame, t1]);
    if (viewer.drawLog.length > 1024) viewer.drawLog.shift();
  }
}

function drawPage() {
  ensureGame();
  const hello = model.hello;
  if (hello) {
    drawHeader(hello, tv ? "TV · " : "");
    if (viewer.replay) drawReplayPosition();
  }
  const f = model.latest;
  if (f && game) {
    const st = f.state;
    const L = game.layout(st, view());
    const ctx = sizeCanvas($("board"), L.width, L.height);
    game.draw(ctx, st, L, model.annot, view());
    $("board").dataset.session = hello.session.id; // whose board this is (the TV test reads it)
    viewer.layout = L;
    viewer.state = st;
    viewer.frame = f.frame;
    setText("caption", game.caption(st, model.annot || carryAnnot(null), view(), hello.spec.action_names));
    drawPanels(f);
    drawThinking(f, L);
    if (viewer.replay) drawAnnotation(viewer.replay);
    drawPlayStatus(f);
  }
  drawResult();
  drawAfter();
  drawLegend();
  drawStatus();
  viewer.drawn += 1;
}

let lastRate = { t: performance.now(), received: 0, drawn: 0 };
function loop(now) {
  if (now - lastRate.t >= 1000) {
    const dt = (now - lastRate.t) / 1000;
    viewer.rate = {
      received: Math.round((viewer.received - lastRate.received) / dt),
      drawn: Math.round((viewer.drawn - lastRate.drawn) / dt),
    };
    lastRate = { t: now, received: viewer.received, drawn: viewer.drawn };
  }
  if (viewer.replay) replayTick(now);
  if (model.dirty && !viewer.paused) {
    model.dirty = false;
    draw();
  } else if (viewer.player && model.latest && model.latest.clocks.length && !model.end) {
    drawClocks(model.latest); // the player's clock runs down between frames
  }
  requestAnimationFrame(loop);
}

if (tv) tvPoll();
else if (replay) openReplay(replay);
else connect();
requestAnimationFrame(loop);
