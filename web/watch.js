// The watch page: one session's viewer websocket (hello, frames, end; see server/_messages.py).
// Messages only update the model; a requestAnimationFrame loop draws the newest frame, so a
// fast session never queues drawing work behind it.

import { PALETTE, COLOUR_NAMES, annotate, caption, drawBoard, layoutFor } from "./draw.js";

const HISTORY = 118; // frames in the strip and the charts
const KINDS = {
  reflex: "#8a96a3",
  planned: "#5bd68a",
  agent: "#4fb3ff",
  opponent: "#3d4b5c",
  fallback: "#ffb347",
  late: "#ff6b6b",
  invalid: "#c77dff",
};
const $ = (id) => document.getElementById(id);
const sessionId = new URLSearchParams(location.search).get("session");

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
  palette: PALETTE,
  ended: false,
  paused: false, // true: keep the board as drawn (new frames still update the model)
  rate: { received: 0, drawn: 0 }, // per second over the last second
  center: (r, c) => viewer.layout.center(r, c),
};
window.rtplanViewer = viewer;

function kindOf(report) {
  return report.provenance === "on_time" ? report.answer_source : report.provenance;
}

function onFrame(msg) {
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
  if (msg.type === "hello") model.hello = msg;
  else if (msg.type === "frame") onFrame(msg);
  else if (msg.type === "end") {
    model.end = msg;
    viewer.ended = true;
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
  const names = COLOUR_NAMES[st.game];
  const rows = [];
  for (const p of [0, 1]) {
    const colour = st.to_play === p ? st.to_play_colour : 1 - st.to_play_colour;
    const left = f.clocks[p];
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
  const hello = model.hello;
  if (hello) {
    const s = hello.session;
    setText("title", `${s.game} · ${s.id}`);
    const c = hello.config;
    const agent = c.agent === "planner" ? `planner, k ${c.ks.length ? c.ks.join(",") : "gate"}` : c.agent;
    setText("agent", `${agent} · ${c.fps} FPS · ${c.clock.replace("_", " ")}`);
  }
  const f = model.latest;
  if (f) {
    const st = f.state;
    const canvas = $("board");
    const L = layoutFor(st);
    const ctx = sizeCanvas(canvas, L.width, L.height);
    drawBoard(ctx, st, L, model.annot);
    viewer.layout = L;
    viewer.state = st;
    viewer.frame = f.frame;
    setText("caption", caption(st, model.annot));
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
    statsList([
      ["last action", last ? `${last.kind}` : "–"],
      ["on time / late / fallback / invalid", `${b.on_time} / ${b.late} / ${b.fallback} / ${b.invalid}`],
      ["planner misses / errors", `${b.planner_misses} / ${b.planner_errors}`],
      ["late ticks (max lag)", `${b.late_ticks} (${b.max_tick_lag_ms} ms)`],
      ["viewer drops", b.viewer_drops],
      ["page", `${viewer.rate.received} msgs/s · ${viewer.rate.drawn} draws/s`],
    ]);
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
  } else if (f) {
    setText("status", f.done ? "game over" : "live");
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
  if (model.dirty && !viewer.paused) {
    model.dirty = false;
    draw();
  }
  requestAnimationFrame(loop);
}

connect();
requestAnimationFrame(loop);
