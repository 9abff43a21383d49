// The watch page's side panels and header: the frame's numbers, the k chart, the provenance
// strip and its legend, the latency chart, the clocks of a clock game, the session's counters
// and the status line. Each draws from the model (model.js).

import { $, agentLabel, el, setText } from "./api.js";
import { HISTORY, model, view, viewer } from "./model.js";

// The colour of each action's provenance (the strip and its legend).
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

/** Sizes `canvas` to width x height CSS pixels at the screen's pixel ratio; its 2D context,
 * drawing in CSS pixels. */
export function sizeCanvas(canvas, width, height) {
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

function statsList(entries) {
  const nodes = [];
  for (const [k, v] of entries) nodes.push(el("dt", k), el("dd", String(v)));
  $("stats").replaceChildren(...nodes);
}

/** The two clocks of a clock game's frame `f`; the mover's runs down between frames while
 * this page plays (the player's, or the planner opponent's own clock). */
export function drawClocks(f) {
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
    const label = el("span", `${p === 0 ? "agent" : "opponent"} (${names[colour]})`);
    if (st.to_play === p && !f.done) label.className = "turn";
    const bar = el("div", null, { class: "bar" });
    const fill = document.createElement("div");
    fill.style.width = `${Math.max(0, (100 * left) / st.initial_time)}%`;
    bar.append(fill);
    rows.push(label, bar, el("span", String(left)));
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

/** The title and the agent line, from the hello. */
export function drawHeader(hello) {
  const s = hello.session;
  setText("title", `${s.game} · ${s.id}`);
  const c = hello.config;
  const who = agentLabel(s);
  setText("agent", `${who} · ${c.fps} FPS · ${c.clock.replace("_", " ")}`);
}

/** The panels of frame message `f`: its numbers, the charts, the clocks, the counters. */
export function drawPanels(f) {
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
    );
    // Why the planner failed, as the service said it (e.g. a game it does not serve).
    if (b.last_planner_error) rows.push(["last planner error", b.last_planner_error]);
    rows.push(
      ["late ticks (max lag)", `${b.late_ticks} (${b.max_tick_lag_ms} ms)`],
      ["viewer drops", b.viewer_drops],
      ["page", `${viewer.rate.received} msgs/s · ${viewer.rate.drawn} draws/s`],
    );
  }
  statsList(rows);
}

/** The provenance strip's legend, drawn once. */
export function drawLegend() {
  const legend = $("legend");
  if (legend.childElementCount) return;
  for (const [k, colour] of Object.entries(KINDS)) {
    const i = document.createElement("i");
    i.style.background = colour;
    const span = el("span");
    span.append(i, k);
    legend.append(span);
  }
}

/** The status line: the end, an error, the replay, live or over, or who the session waits for. */
export function drawStatus() {
  const f = model.latest;
  const hello = model.hello;
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
}
