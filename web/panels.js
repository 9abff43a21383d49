// The watch page's side panels and header: the frame's numbers, the k chart, the provenance
// strip and its legend, the latency chart, the clocks of a clock game, the session's counters
// and the status line. Each draws from the model (model.js).

import { $, agentLabel, el, setText } from "./api.js";
import { HISTORY, agentColour, agentName, game, model, plannerPlays, view, viewer } from "./model.js";

// The colour of each action's provenance (the strip and its legend).
const KINDS = {
  reflex: "#8a96a3",
  plan: "#2e9e8f",
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

/** Width in CSS pixels of the k chart's label column, left of its bars. */
export const KCHART_GUTTER = 40;

/** The budget of each frame's option on an index scale: one row per budget of the game, so
 * Hex's 2 .. 128 read as well as Tetris' 1, 2 (a k outside the budgets goes on a log scale).
 * The labels sit in a column of their own, each on its row's line, so no bar covers them. */
function drawKChart() {
  const [ctx, W, H] = chartContext("kchart");
  const budgets = ((model.hello && model.hello.spec.budgets) || []).slice().sort((a, b) => a - b);
  const ks = model.history.map((h) => h.k).filter((k) => k != null);
  const rows = budgets.length ? budgets : [...new Set(ks)].sort((a, b) => a - b);
  if (ks.includes(0) && !rows.includes(0)) rows.unshift(0); // a clock gate's policy-only
  const n = Math.max(1, rows.length);
  const top = 6;
  const rowY = (i) => H - 4 - ((H - 4 - top) * (i + 1)) / n;
  const yOf = (k) => {
    const i = rows.indexOf(k);
    if (i >= 0) return rowY(i);
    const [lo, hi] = [Math.min(...rows, k), Math.max(...rows, k)];
    return rowY(((n - 1) * Math.log(k / lo)) / Math.log(Math.max(hi / lo, 1.0001)));
  };
  const left = KCHART_GUTTER;
  // Rows closer than a label's height: label every other one, always the first and last.
  const every = Math.ceil(11 / Math.max(1, (H - 4 - top) / n));
  const labelled = rows.filter((_, i) => i % every === 0 || i === n - 1);
  ctx.fillStyle = "#1c242c";
  rows.forEach((k, i) => ctx.fillRect(left, Math.round(rowY(i)), W - left, 1));
  const step = (W - left) / HISTORY;
  ctx.fillStyle = "#4fb3ff";
  model.history.forEach((h, i) => {
    if (h.k == null) return;
    const y = yOf(h.k);
    ctx.fillRect(left + i * step, y, Math.max(1, step), H - y);
  });
  ctx.font = "9px system-ui, sans-serif";
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  ctx.fillStyle = "#dde3ea";
  rows.forEach((k, i) => {
    if (labelled.includes(k)) ctx.fillText(k === 0 ? "policy" : `k=${k}`, left - 4, rowY(i));
  });
  ctx.textAlign = "left";
  ctx.textBaseline = "alphabetic";
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

/** Milliseconds per clock tick, when the session's clock is a time control in seconds (the
 * player's hello says it; spectators and replays derive it from `time_s` over the start's
 * ticks); null: the game's clock in ticks. */
function tickMs(st) {
  const c = model.hello && model.hello.config;
  if (!c || !c.time_s) return null;
  if (viewer.player) return viewer.player.tick_ms;
  return st.initial_time ? (1e3 * c.time_s) / st.initial_time : null;
}

/** A clock's `ticks` as m:ss (m:ss.t under 20 s, as chess sites show it), or the raw ticks. */
export function clockText(ticks, ms) {
  if (!ms) return String(ticks);
  const s = Math.max(0, (ticks * ms) / 1e3);
  if (s < 20) return `0:${s.toFixed(1).padStart(4, "0")}`;
  const whole = Math.floor(s);
  return `${Math.floor(whole / 60)}:${String(whole % 60).padStart(2, "0")}`;
}

/** The two clocks of a clock game's frame `f`; the mover's runs down between frames while
 * this page plays (the player's, or the planner opponent's own clock). Each side's bar has its
 * stones' colour; a person sees "you". */
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
      // The mover's clock runs from the frame's arrival (or the countdown's end) until its
      // move (the player's click, or the planner opponent's answer).
      const since = Math.max(f.receivedAt, model.startsAt || 0);
      left = Math.max(0, left - Math.floor(Math.max(0, performance.now() - since) / viewer.player.tick_ms));
    }
    // An annotated game names its sides (the gate and its opponent), by player.
    const sides = viewer.replay && viewer.replay.index.annotation && viewer.replay.index.annotation.sides;
    const who = sides ? sides[p] : p === 0 ? agentName().replace("the ", "") : "opponent";
    const label = el("span", `${who} (${names[colour]})`);
    if (st.to_play === p && !f.done) label.className = "turn";
    const bar = el("div", null, { class: `bar side${p}` });
    const fill = document.createElement("div");
    fill.style.background = stoneColour(colour); // the bar in its own player's colour
    fill.style.width = `${Math.max(0, (100 * left) / st.initial_time)}%`;
    bar.append(fill);
    const time = el("span", clockText(left, tickMs(st)), { class: "time" });
    time.dataset.ticks = left;
    rows.push(label, bar, time);
  }
  $("clock-rows").replaceChildren(...rows);
  const ms = tickMs(st);
  const c = model.hello.config;
  // What the last move took: the ticks charged to its mover (the report's cost), before the
  // increment gave some back (a clock's change nets the increment in, and can go negative).
  const rep = f.previous;
  const cost = rep ? (ms ? `${((rep.cost * ms) / 1e3).toFixed(1)} s` : `${rep.cost} ticks`) : null;
  const control = ms ? `${c.time_s / 60}+${c.increment_s}: minutes a side + seconds back per move` : "clock ticks left";
  setText("move-cost", cost ? `last move took ${cost} (${moverName(rep)}) · ${control}` : control);
}

/** Who made the move of report `rep`: "you" (a person), the player, agent or opponent. */
function moverName(rep) {
  if (rep.answer_source === "opponent") return "opponent";
  return agentName().replace("the ", "");
}

/** The colour of a clock game's colour index `colour` (the game's stones), for its clock. */
function stoneColour(colour) {
  const stones = game && game.PALETTE && game.PALETTE.stones;
  return stones ? stones[colour] : colour === 0 ? "#4fb3ff" : "#ff9f43";
}

/** The title and the agent line, from the hello. */
export function drawHeader(hello, prefix = "") {
  const s = hello.session;
  setText("title", `${prefix}${s.game} · ${s.id}`);
  const c = hello.config;
  const who = agentLabel(s);
  setText("agent", `${who} · ${c.fps} FPS · ${c.clock.replace("_", " ")}`);
}

/** Blanks the header, the board and the side panels (the TV page's next game): nothing of
 * the game shown before stays on screen until the next one's hello and first frame. */
export function clearPanels() {
  setText("title", "TV · tuning in…");
  setText("agent", "–");
  for (const id of ["frame", "return", "k", "latency"]) setText(id, "–");
  delete $("frame").dataset.session;
  for (const id of ["strip", "kchart", "latchart"]) chartContext(id);
  $("clocks").hidden = true;
  $("clock-rows").replaceChildren();
  setText("move-cost", "");
  $("stats").replaceChildren();
  setText("caption", "");
  const board = $("board");
  board.getContext("2d").clearRect(0, 0, board.width, board.height);
  delete board.dataset.session;
}

/** The panels of frame message `f`: its numbers, the charts, the clocks, the counters. */
export function drawPanels(f) {
  // With no planner in the session (a person's or an agent's game) its panels would stay
  // empty: the section keeps the frames' provenance only.
  const planned = plannerPlays();
  $("thinking").hidden = !planned;
  for (const node of document.querySelectorAll(".planner-only")) node.hidden = !planned;
  setText("planner-title", planned ? "Planner" : "Frames");
  setText("frame", String(f.frame));
  if (model.hello) $("frame").dataset.session = model.hello.session.id; // whose numbers these are
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
    // Nothing to show: the heading says so, not "connecting…" forever.
    if (!hello) setText("title", model.error.split(":")[0]);
  } else if (viewer.replay) {
    const end = viewer.replay.index.end;
    setText("status", `replay${end ? ` · ${end.reason} · return ${end.episode_return}` : " (no end line)"}`);
  } else if (f) {
    setText("status", f.done ? "game over" : "live");
  } else if (hello && hello.session.status === "waiting") {
    setText("status", hello.config.agent === "human" ? "waiting for the player's page" : "waiting for the agent");
  }
}

/** Who won (a clock game) or what the agent (you, the player) scored, once the game shown is over: the live
 * session's end (or its last frame), or a replay's last frame; "" before. */
export function resultText() {
  const f = model.latest;
  if (!f || !model.hello) return "";
  const R = viewer.replay;
  const end = R ? R.index.end : model.end;
  const over = R ? R.n === R.frames - 1 && Boolean(end || f.done) : Boolean(end || f.done);
  if (!over) return "";
  const ret = end ? end.episode_return : f.episode_return;
  // How a game ends by its rules or its frame limit; any other reason (stopped, failed) is said.
  const natural = { terminated: "", truncated: " at the horizon", max_frames: " (max frames)" };
  if (end && !(end.reason in natural)) {
    return `${end.status}: ${end.reason} · return ${Number(ret).toFixed(1)}`;
  }
  const why = end ? natural[end.reason] : "";
  if (model.hello.spec.num_players === 2) {
    const names = view().colour_names;
    const me = agentColour(f.state);
    const onTime = f.state && f.state.timed_out ? " on time" : "";
    const who = agentName();
    if (ret > 0) return `${who.replace("the ", "")} (${names[me]}) won${onTime}${why}`;
    if (ret < 0) {
      const lost = who === "you" ? "you lost: the " : "";
      return `${lost}opponent (${names[1 - me]}) won${onTime}${why}`;
    }
    return why ? `no winner${why}` : "a draw";
  }
  return `${agentName()} scored ${Number(ret).toFixed(ret % 1 ? 1 : 0)}${why}`;
}

/** The countdown before frame 0's clock (a person's game), from the server's `starts_in_ms`
 * (the hello's, fresh, or a frame's, as published: the earliest end is the truest); "" once
 * the game runs. */
export function countdownText() {
  if (!model.startsAt || model.end) return "";
  const left = model.startsAt - performance.now();
  if (left <= 0) return "";
  const you = viewer.player ? "you play" : "the game starts";
  return `${you} in ${Math.ceil(left / 1000)}…`;
}

/** The banner over the board: the countdown before the game, then nothing, then the result
 * (a person reads "you (red) won" / "you lost: ..." / "you scored 3"). */
export function drawResult() {
  const countdown = countdownText();
  const text = countdown || resultText();
  const banner = $("result");
  banner.hidden = !text;
  banner.classList.toggle("countdown", Boolean(countdown));
  setText("result", text);
  if (countdown) model.dirty = true; // redraw each animation frame until it ends
}
