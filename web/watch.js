// The watch page: one session's viewer websocket (hello, frames, end; see server/_messages.py),
// or a recorded replay (?replay=NAME) scrubbed frame by frame. Messages only update the model;
// a requestAnimationFrame loop draws the newest frame, so a fast session never queues drawing
// work behind it. In a human session (agent "human") the session's creator plays: keys or
// clicks are sent as actions for the frame on screen (server/_human.py).

import { actionAt, carryAnnot, loadGame } from "./draw.js";

const HISTORY = 118; // frames in the strip and the charts
const KINDS = {
  reflex: "#8a96a3",
  planned: "#5bd68a",
  agent: "#4fb3ff",
  human: "#f2d600",
  opponent: "#3d4b5c",
  fallback: "#ffb347",
  late: "#ff6b6b",
  invalid: "#c77dff",
};
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const sessionId = params.get("session");
const replayName = params.get("replay");

const model = {
  hello: null,
  latest: null, // the newest frame message
  previous: null, // the frame message before it
  annot: null,
  history: [], // {frame, kind, k, latency}
  end: null,
  error: null,
  dirty: false,
};
// Read by the browser tests and handy in the console.
const viewer = {
  received: 0,
  drawn: 0,
  frame: null, // index of the frame last drawn
  state: null, // its rendered state
  layout: null,
  palette: null, // the drawing module's colours, once it is loaded
  ended: false,
  paused: false, // true: keep the board as drawn (new frames still update the model)
  rate: { received: 0, drawn: 0 }, // per second over the last second
  center: (r, c) => viewer.layout.center(r, c),
  frames: [], // the last RECENT frame messages received (tests, console)
  player: null, // the player hello when this page plays the session
  sent: [], // actions this page sent: {frame, action, at}
  errors: [], // error messages the server sent this page
  replay: null, // replay mode: {name, frames, index, seek(n)}
  drawMs: 0, // a draw's duration, averaged over the last ~20 draws
  drawLog: [], // the last 1024 draws of a frame message: [frame, performance.now() of the draw]
};
const RECENT = 64;
window.rtplanViewer = viewer;

// The game's drawing module (web/games/<module>.js, or the generic grid), named by the game
// description's `view`; loaded once the hello (live or replay) is here.
let game = null;
let gameLoad = null; // the module's promise, once asked for
const view = () => model.hello.spec.view;

/** Loads the drawing module once the hello is here; resolves when it can draw. */
function ensureGame() {
  if (!gameLoad && model.hello) {
    gameLoad = loadGame(view()).then((g) => {
      game = g;
      viewer.palette = g.PALETTE;
      model.dirty = true;
    });
  }
  return gameLoad;
}

/** What frame `f` did since `prev` (a rendered state, or null), by the game's module. */
function annotate(prev, f, prevAnnot) {
  ensureGame();
  return game ? game.annotate(prev, f, prevAnnot, view()) : carryAnnot(prevAnnot);
}

function kindOf(report) {
  return report.provenance === "on_time" ? report.answer_source : report.provenance;
}

function onFrame(msg) {
  msg.receivedAt = performance.now();
  viewer.frames.push(msg);
  if (viewer.frames.length > RECENT) viewer.frames.shift();
  model.annot = annotate(model.latest && model.latest.state, msg.state, model.annot);
  model.previous = model.latest;
  model.latest = msg;
  const rep = msg.previous;
  if (rep) {
    model.history.push({ frame: rep.frame, kind: kindOf(rep), k: rep.k, latency: rep.latency_ms });
    if (model.history.length > HISTORY) model.history.shift();
  }
}

function onMessage(event) {
  const msg = JSON.parse(event.data);
  viewer.received += 1;
  if (msg.type === "hello") {
    model.hello = msg;
    // A player's game starts when it joins: join once the board can be drawn.
    const token = sessionToken();
    ensureGame().then(() => token && socket.send(JSON.stringify({ type: "play", token })));
  } else if (msg.type === "frame") onFrame(msg);
  else if (msg.type === "end") {
    model.end = msg;
    viewer.ended = true;
  } else if (msg.type === "player") startPlaying(msg);
  else if (msg.type === "error") {
    viewer.errors.push(msg);
    setText("play-status", `server: ${msg.message}`);
  }
  model.dirty = true;
}

// Human play ------------------------------------------------------------------------------

let socket = null;

function sessionToken() {
  const hash = new URLSearchParams(location.hash.slice(1)).get("token");
  if (hash) {
    sessionStorage.setItem(`rtplan-token-${sessionId}`, hash);
    history.replaceState(null, "", location.pathname + location.search); // off the address bar
    return hash;
  }
  return sessionStorage.getItem(`rtplan-token-${sessionId}`);
}

function sendAction(action) {
  const f = model.latest;
  if (!viewer.player || !f || f.done || model.end) return;
  // The frame on screen: an answer the server gets after its deadline plays the fallback.
  socket.send(JSON.stringify({ type: "action", frame: f.frame, action }));
  viewer.sent.push({ frame: f.frame, action, at: performance.now() });
}

const KEY_LABELS = { ArrowUp: "↑", ArrowDown: "↓", ArrowLeft: "←", ArrowRight: "→", " ": "space" };

function startPlaying(msg) {
  viewer.player = msg;
  $("play").hidden = false;
  const names = model.hello.spec.action_names;
  if (msg.input === "keys") {
    const byAction = {};
    for (const [key, a] of Object.entries(msg.keys)) (byAction[a] ||= []).push(KEY_LABELS[key] || key);
    const help = Object.entries(byAction).map(([a, keys]) => `${names[a]}: ${keys.join(" ")}`);
    setText("play-help", `You play. Keys — ${help.join(" · ")}. A frame with no key by its deadline plays the fallback (${model.hello.spec.fallback}).`);
    window.addEventListener("keydown", (event) => {
      if (event.repeat || !(event.key in msg.keys)) return;
      event.preventDefault();
      sendAction(msg.keys[event.key]);
    });
  } else {
    const onBoard = new Set(view().board.actions.flat());
    const last = names.findIndex((_, a) => !onBoard.has(a)); // pass or swap: a button
    const c = model.hello.config;
    const against = c.opponent === "planner"
      ? `the planner (k=${c.opponent_k}), whose search runs its own clock`
      : `the ${c.opponent}`;
    setText("play-help", `You play ${view().colour_names[0]} against ${against}: click a cell on your turn; your clock runs until you do.`);
    const special = $("special");
    special.hidden = last < 0;
    special.textContent = names[last];
    special.addEventListener("click", () => sendAction(last));
    const canvas = $("board");
    canvas.classList.add("clickable");
    canvas.addEventListener("click", (event) => {
      const st = viewer.state;
      if (!st || st.to_play !== msg.player) return;
      const box = canvas.getBoundingClientRect();
      const at = (game && game.actionAt) || actionAt;
      const action = at(event.clientX - box.left, event.clientY - box.top, st, viewer.layout, view());
      if (action >= 0) sendAction(action);
    });
  }
}

/** One line saying what the last frame did with this page's input. */
function playLine(rep) {
  const names = model.hello.spec.action_names;
  const name = (a) => names[a] ?? a;
  if (rep.answer_source === "opponent") {
    if (rep.provenance !== "on_time") {
      return ["fallback", `frame ${rep.frame}: the opponent missed its clock: the fallback played (${name(rep.action)})`];
    }
    const ms = rep.latency_ms != null ? `, ${rep.latency_ms.toFixed(0)} ms` : "";
    const how = rep.k != null ? ` (planner k=${rep.k}${ms})` : "";
    return ["on_time", `opponent played ${name(rep.action)}${how}`];
  }
  const kind = rep.provenance;
  const said = {
    on_time: `your ${name(rep.action)} on time (${rep.slack_ms.toFixed(0)} ms to spare)`,
    fallback: `no input by the deadline: the fallback played (${name(rep.action)})`,
    late: `your ${name(rep.received_action)} came ${(-rep.slack_ms).toFixed(0)} ms late: the fallback played (${name(rep.action)})`,
    invalid: `${name(rep.received_action)} is not legal here: the fallback played (${name(rep.action)})`,
  }[kind];
  return [kind, `frame ${rep.frame}: ${said}`];
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

function sizeCanvas(canvas, width, height) {
  const dpr = window.devicePixelRatio || 1;
  if (canvas.width !== Math.round(width * dpr) || canvas.height !== Math.round(height * dpr)) {
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}

function chartContext(id) {
  const canvas = $(id);
  const w = Number(canvas.getAttribute("width"));
  const h = Number(canvas.getAttribute("height"));
  canvas.dataset.w = canvas.dataset.w || w;
  canvas.dataset.h = canvas.dataset.h || h;
  const W = Number(canvas.dataset.w);
  const H = Number(canvas.dataset.h);
  const ctx = sizeCanvas(canvas, W, H);
  ctx.clearRect(0, 0, W, H);
  return [ctx, W, H];
}

function drawStrip() {
  const [ctx, W, H] = chartContext("strip");
  const step = W / HISTORY;
  model.history.forEach((h, i) => {
    ctx.fillStyle = KINDS[h.kind] || "#444";
    ctx.fillRect(i * step, 0, Math.max(1, step - 1), H);
  });
}

function drawKChart() {
  const [ctx, W, H] = chartContext("kchart");
  const budgets = (model.hello && model.hello.spec.budgets) || [];
  const kmax = Math.max(1, ...budgets, ...model.history.map((h) => h.k || 0));
  const step = W / HISTORY;
  ctx.fillStyle = "#4fb3ff";
  model.history.forEach((h, i) => {
    if (h.k == null) return;
    const y = H - 4 - ((H - 8) * h.k) / kmax;
    ctx.fillRect(i * step, y, Math.max(1, step), H - y);
  });
  ctx.fillStyle = "#8a96a3";
  ctx.font = "10px system-ui, sans-serif";
  ctx.fillText(`k ≤ ${kmax}`, 3, 11);
}

function drawLatencyChart(period) {
  const [ctx, W, H] = chartContext("latchart");
  const lat = model.history.map((h) => h.latency).filter((x) => x != null);
  const top = Math.max(period * 2, ...lat, 1);
  const yOf = (ms) => H - 2 - ((H - 4) * ms) / top;
  if (period > 0) {
    ctx.strokeStyle = "#ffb347";
    ctx.setLineDash([4, 3]);
    ctx.beginPath();
    ctx.moveTo(0, yOf(period));
    ctx.lineTo(W, yOf(period));
    ctx.stroke();
    ctx.setLineDash([]);
  }
  const step = W / HISTORY;
  model.history.forEach((h, i) => {
    if (h.latency == null) return;
    ctx.fillStyle = h.latency > period && period > 0 ? "#ff6b6b" : "#5bd68a";
    ctx.fillRect(i * step, yOf(h.latency) - 1.5, 3, 3);
  });
  ctx.fillStyle = "#8a96a3";
  ctx.font = "10px system-ui, sans-serif";
  ctx.fillText(`${top.toFixed(0)} ms`, 3, 11);
}

function setText(id, text) {
  const node = $(id);
  if (node.textContent !== text) node.textContent = text;
}

function statsList(entries) {
  const nodes = [];
  for (const [k, v] of entries) {
    nodes.push(Object.assign(document.createElement("dt"), { textContent: k }));
    nodes.push(Object.assign(document.createElement("dd"), { textContent: String(v) }));
  }
  $("stats").replaceChildren(...nodes);
}

function drawClocks(f) {
  const st = f.state;
  $("clocks").hidden = false;
  const names = view().colour_names;
  const rows = [];
  for (const p of [0, 1]) {
    const colour = st.to_play === p ? st.to_play_colour : 1 - st.to_play_colour;
    let left = f.clocks[p];
    const onClock = viewer.player && (p === viewer.player.player || model.hello.config.opponent === "planner");
    if (onClock && st.to_play === p && !f.done && !model.end) {
      // The mover's clock runs from the frame's arrival until its move (the player's click, or
      // the planner opponent's answer).
      left = Math.max(0, left - Math.floor((performance.now() - f.receivedAt) / viewer.player.tick_ms));
    }
    const label = document.createElement("span");
    label.textContent = `${p === 0 ? "agent" : "opponent"} (${names[colour]})`;
    if (st.to_play === p && !f.done) label.className = "turn";
    const bar = document.createElement("div");
    bar.className = "bar";
    const fill = document.createElement("div");
    fill.style.width = `${Math.max(0, (100 * left) / st.initial_time)}%`;
    bar.append(fill);
    const num = document.createElement("span");
    num.textContent = String(left);
    rows.push(label, bar, num);
  }
  $("clock-rows").replaceChildren(...rows);
  const a = model.annot;
  setText(
    "move-cost",
    a && a.moveCost != null
      ? `last move cost ${a.moveCost} ticks (${a.mover === 0 ? "agent" : "opponent"})`
      : "clock ticks left",
  );
}

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
    const s = hello.session;
    setText("title", `${s.game} · ${s.id}`);
    const c = hello.config;
    const agent = c.agent === "planner" ? `planner, k ${c.ks.length ? c.ks.join(",") : "gate"}` : c.agent;
    const opponent = !s.opponent ? "" : ` vs ${s.opponent === "planner" ? `planner, k ${s.opponent_k}` : s.opponent}`;
    setText("agent", `${agent}${opponent} · ${c.fps} FPS · ${c.clock.replace("_", " ")}`);
    if (viewer.replay) setText("replay-pos", `frame ${viewer.replay.n} / ${viewer.replay.frames - 1}`);
  }
  const f = model.latest;
  if (f && game) {
    const st = f.state;
    const canvas = $("board");
    const L = game.layout(st, view());
    const ctx = sizeCanvas(canvas, L.width, L.height);
    game.draw(ctx, st, L, model.annot, view());
    viewer.layout = L;
    viewer.state = st;
    viewer.frame = f.frame;
    setText("caption", game.caption(st, model.annot || carryAnnot(null), view(), hello.spec.action_names));
    setText("frame", String(f.frame));
    setText("return", Number(f.episode_return).toFixed(1));
    const last = model.history[model.history.length - 1];
    const ks = model.history.filter((h) => h.k != null);
    setText("k", ks.length ? `${ks[ks.length - 1].k} (frame ${ks[ks.length - 1].frame})` : "– (no planner)");
    const lat = model.history.filter((h) => h.latency != null);
    const period = f.period_ms;
    const latText = lat.length ? `${lat[lat.length - 1].latency.toFixed(1)} ms` : "–";
    setText("latency", `${latText} · frame period ${period ? period.toFixed(1) + " ms" : "simulated"}`);
    drawStrip();
    drawKChart();
    drawLatencyChart(period);
    if (f.clocks.length) drawClocks(f);
    const b = f.stats;
    const rows = [
      ["last action", last ? `${last.kind}` : "–"],
      ["on time / late / fallback / invalid", `${b.on_time} / ${b.late} / ${b.fallback} / ${b.invalid}`],
    ];
    if (viewer.replay) rows.push(["replay", `${viewer.replay.name}`]);
    else {
      rows.push(
        ["planner misses / errors", `${b.planner_misses} / ${b.planner_errors}`],
        ["late ticks (max lag)", `${b.late_ticks} (${b.max_tick_lag_ms} ms)`],
        ["viewer drops", b.viewer_drops],
        ["page", `${viewer.rate.received} msgs/s · ${viewer.rate.drawn} draws/s`],
      );
    }
    statsList(rows);
    if (viewer.player && f.previous) {
      const [kind, text] = playLine(f.previous);
      setText("play-status", text);
      $("play-status").className = kind;
    }
  }
  const legend = $("legend");
  if (!legend.childElementCount) {
    for (const [k, colour] of Object.entries(KINDS)) {
      const span = document.createElement("span");
      const i = document.createElement("i");
      i.style.background = colour;
      span.append(i, k);
      legend.append(span);
    }
  }
  if (model.end) {
    const e = model.end;
    setText("status", `${e.status}${e.reason ? ": " + e.reason : ""} · return ${e.episode_return}`);
  } else if (model.error) {
    setText("status", model.error);
    $("status").className = "error";
  } else if (viewer.replay) {
    const end = viewer.replay.index.end;
    setText("status", `replay${end ? ` · ${end.reason} · return ${end.episode_return}` : " (no end line)"}`);
  } else if (f) {
    setText("status", f.done ? "game over" : "live");
  } else if (hello && hello.session.status === "waiting") {
    setText("status", hello.config.agent === "human" ? "waiting for the player's page" : "waiting for the agent");
  }
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

// Replays ---------------------------------------------------------------------------------

const CHUNK = 32; // boards fetched per request
const boards = new Map(); // frame -> rendered board
const pending = new Set(); // chunk starts being fetched

async function getJSON(path) {
  const r = await fetch(path);
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.detail || `${r.status} ${r.statusText}`);
  return body;
}

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
    .map((g) => ({ frame: g.previous.frame, kind: kindOf(g.previous), k: g.previous.k, latency: g.previous.latency_ms }));
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

function replayTick(now) {
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

async function openReplay(name) {
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

if (replayName) openReplay(replayName);
else connect();
requestAnimationFrame(loop);
