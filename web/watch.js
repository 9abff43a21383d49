// The watch page: one session's viewer websocket (hello, frames, end; see server/_messages.py),
// or a recorded replay (?replay=NAME, replay.js) scrubbed frame by frame. Messages only update
// the model (model.js); a requestAnimationFrame loop draws the newest frame, so a fast session
// never queues drawing work behind it. In a human session the page that holds the session's
// token plays it (play.js). The side panels are panels.js.

import { $, setText } from "./api.js";
import { carryAnnot } from "./draw.js";
import { HISTORY, RECENT, annotate, ensureGame, game, historyEntry, model, view, viewer } from "./model.js";
import { drawClocks, drawHeader, drawLegend, drawPanels, drawStatus, sizeCanvas } from "./panels.js";
import { drawPlayStatus, sessionToken, startPlaying } from "./play.js";
import { drawReplayPosition, openReplay, replayTick } from "./replay.js";

const params = new URLSearchParams(location.search);
const sessionId = params.get("session");
const replayName = params.get("replay");

// Live sessions ----------------------------------------------------------------------------

let socket = null;
const send = (msg) => socket.send(JSON.stringify(msg));

function onFrame(msg) {
  msg.receivedAt = performance.now();
  viewer.frames.push(msg);
  if (viewer.frames.length > RECENT) viewer.frames.shift();
  model.annot = annotate(model.latest && model.latest.state, msg.state, model.annot);
  model.previous = model.latest;
  model.latest = msg;
  if (msg.previous) {
    model.history.push(historyEntry(msg.previous));
    if (model.history.length > HISTORY) model.history.shift();
  }
}

function onMessage(event) {
  const msg = JSON.parse(event.data);
  viewer.received += 1;
  if (msg.type === "hello") {
    model.hello = msg;
    // A player's game starts when it joins: join once the board can be drawn.
    const token = sessionToken(sessionId);
    ensureGame().then(() => token && send({ type: "play", token }));
  } else if (msg.type === "frame") onFrame(msg);
  else if (msg.type === "end") {
    model.end = msg;
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
  ws.onmessage = onMessage;
  ws.onclose = (event) => {
    if (!model.end) {
      model.error = event.code === 4404 ? `no session ${sessionId}` : `connection closed (${event.code})`;
    }
    model.dirty = true;
  };
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
    drawHeader(hello);
    if (viewer.replay) drawReplayPosition();
  }
  const f = model.latest;
  if (f && game) {
    const st = f.state;
    const L = game.layout(st, view());
    const ctx = sizeCanvas($("board"), L.width, L.height);
    game.draw(ctx, st, L, model.annot, view());
    viewer.layout = L;
    viewer.state = st;
    viewer.frame = f.frame;
    setText("caption", game.caption(st, model.annot || carryAnnot(null), view(), hello.spec.action_names));
    drawPanels(f);
    drawPlayStatus(f);
  }
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

if (replayName) openReplay(replayName);
else connect();
requestAnimationFrame(loop);
