// The watch page's thinking panels: what the planner decided and how sure it was. The gate's
// probabilities over the budgets (a stacked strip, a column per frame, budgets in index order
// so that 2 budgets or 7 read alike), the planner's value as an evaluation bar beside the board
// and as a graph over the whole game, and a clock game's move list (in a replay a click on a
// move jumps to it). Each draws from the model (model.js); colours of the budgets and the move
// names come from draw.js and the game's module.

import { $, el, setText } from "./api.js";
import { budgetColour } from "./draw.js";
import { HISTORY, agentColour, agentName, agentValue, game, model, view, viewer } from "./model.js";
import { sizeCanvas } from "./panels.js";

const BAR_WIDTH = 14; // the evaluation bar's width, CSS pixels

/** What the thinking panels show, for the tests and the console. */
export const thinking = { value: null, share: null, probabilities: null, k: null, moves: 0, decisions: [] };
viewer.thinking = thinking;

function budgets() {
  return (model.hello && model.hello.spec.budgets) || [];
}

/** The options a decision's probabilities are over: the budgets, and for a clock gate (one
 * probability more) policy-only first, as k = 0. */
function optionsOf(d) {
  const K = budgets();
  return d && d.probabilities && d.probabilities.length === K.length + 1 ? [0, ...K] : K;
}

const optionName = (k) => (k === 0 ? "policy-only" : `k=${k}`);

const twoPlayer = () => Boolean(model.hello && model.hello.spec.num_players === 2);

/** The newest history entry the planner decided (its option's value and probabilities). */
function currentDecision() {
  for (let i = model.history.length - 1; i >= 0; i--) {
    if (model.history[i].value != null) return model.history[i];
  }
  return null;
}

/** The value range the bar and the graph share: a clock game's [-1, 1] (player 0 loses or
 * wins), else the game's returns to come, from 0 to the largest value seen. */
function valueRange() {
  if (twoPlayer()) return [-1, 1];
  const values = model.decisions.map(agentValue);
  const lo = Math.min(0, ...values);
  const hi = Math.max(lo + 1e-6, ...values);
  return [lo, hi + 0.05 * (hi - lo)];
}

function chartContext(id) {
  const canvas = $(id);
  canvas.dataset.w = canvas.dataset.w || canvas.getAttribute("width");
  canvas.dataset.h = canvas.dataset.h || canvas.getAttribute("height");
  const W = Number(canvas.dataset.w);
  const H = Number(canvas.dataset.h);
  const ctx = sizeCanvas(canvas, W, H);
  ctx.clearRect(0, 0, W, H);
  return [ctx, W, H];
}

/** The gate's probabilities: a column per frame of the recent history, each stacked by budget
 * (smallest at the bottom); frames without a gated decision stay blank. */
function drawGateChart() {
  const [ctx, W, H] = chartContext("gatechart");
  const step = W / HISTORY;
  let any = false;
  model.history.forEach((h, i) => {
    const p = h.probabilities;
    if (!p || !p.length) return;
    any = true;
    let y = H;
    p.forEach((q, j) => {
      const h2 = q * H;
      ctx.fillStyle = budgetColour(j, p.length);
      ctx.fillRect(i * step, y - h2, Math.max(1, step), h2);
      y -= h2;
    });
  });
  if (!any) {
    ctx.fillStyle = "#8a96a3";
    ctx.font = "11px system-ui, sans-serif";
    const forced = model.history.some((h) => h.value != null);
    ctx.fillText(forced ? "k forced: no gate decides here" : "no planner decisions yet", 6, H / 2 + 4);
  }
}

/** The budgets' legend, their colours in index order (drawn once per game). */
function drawGateLegend() {
  const legend = $("gate-legend");
  const K = optionsOf(currentDecision());
  const key = K.join(",");
  if (legend.dataset.key === key) return;
  legend.dataset.key = key;
  legend.replaceChildren(
    ...K.map((k, j) => {
      const i = document.createElement("i");
      i.style.background = budgetColour(j, K.length);
      const span = el("span");
      span.append(i, optionName(k));
      return span;
    }),
  );
}

/** The evaluation bar beside the board: the agent's share (bottom) of the value range. */
function drawEvalBar(f, L) {
  const canvas = $("evalbar");
  const H = $("board").clientHeight || L.height; // the board as shown (scaled down on a phone)
  const ctx = sizeCanvas(canvas, BAR_WIDTH, H);
  ctx.clearRect(0, 0, BAR_WIDTH, H);
  const d = currentDecision();
  const [lo, hi] = valueRange();
  const two = twoPlayer();
  const stones = (game && game.PALETTE && game.PALETTE.stones) || ["#111111", "#f2f2f2"];
  const me = agentColour(f.state);
  const top = two ? stones[1 - me] : "#0c1014";
  const bottom = two ? stones[me] : "#5bd68a";
  if (d == null) { // no planner here (yet): an empty bar, neither side's colour
    ctx.fillStyle = "#0c1014";
    ctx.fillRect(0, 0, BAR_WIDTH, H);
    thinking.value = thinking.share = null;
    canvas.title = "no planner value yet";
    return;
  }
  ctx.fillStyle = top;
  ctx.fillRect(0, 0, BAR_WIDTH, H);
  const v = agentValue(d);
  const share = Math.max(0, Math.min(1, (v - lo) / (hi - lo)));
  ctx.fillStyle = bottom;
  ctx.fillRect(0, H - share * H, BAR_WIDTH, share * H);
  if (two) {
    ctx.fillStyle = "#e0303a"; // the even line
    ctx.fillRect(0, H / 2 - 0.5, BAR_WIDTH, 1);
  }
  thinking.value = v;
  thinking.share = share;
  canvas.title = two ? `value ${v.toFixed(2)} for ${agentName()} (-1 loses, +1 wins)` : `value ${v.toFixed(1)}`;
}

/** The planner's value at each decision over the whole game, the frame shown marked. */
function drawValueChart(f) {
  const [ctx, W, H] = chartContext("valuechart");
  const ds = model.decisions;
  const last = viewer.replay ? viewer.replay.frames - 1 : Math.max(f.frame, ...ds.map((d) => d.frame));
  const span = Math.max(1, last);
  const [lo, hi] = valueRange();
  const xOf = (frame) => 2 + ((W - 4) * frame) / span;
  const yOf = (v) => H - 3 - ((H - 6) * (v - lo)) / (hi - lo);
  if (twoPlayer() || lo < 0) {
    ctx.strokeStyle = "#3d4b5c";
    ctx.beginPath();
    ctx.moveTo(0, yOf(0));
    ctx.lineTo(W, yOf(0));
    ctx.stroke();
  }
  if (ds.length) {
    ctx.strokeStyle = "#4fb3ff";
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    ds.forEach((d, i) => (i ? ctx.lineTo(xOf(d.frame), yOf(agentValue(d))) : ctx.moveTo(xOf(d.frame), yOf(agentValue(d)))));
    ctx.stroke();
    ctx.lineWidth = 1;
  }
  ctx.fillStyle = "#ffb347";
  ctx.fillRect(xOf(f.frame) - 0.5, 0, 1, H);
  ctx.fillStyle = "#8a96a3";
  ctx.font = "10px system-ui, sans-serif";
  const wins = agentName() === "you" ? "+1 you win" : `+1 ${agentName().replace("the ", "")} wins`;
  ctx.fillText(twoPlayer() ? wins : hi.toFixed(hi < 10 ? 1 : 0), 3, 11);
  ctx.fillText(twoPlayer() ? "-1" : lo.toFixed(lo > -10 ? 1 : 0), 3, H - 3);
}

let movesShown = ""; // what the list shows: moves, and the one marked
/** A clock game's move list, numbered, the last move shown marked; in a replay a click on a
 * move shows the board after it. */
function drawMoves(f) {
  const panel = $("moves-panel");
  const label = game && game.moveLabel;
  panel.hidden = !label || !twoPlayer();
  if (panel.hidden) return;
  const moves = model.moves;
  thinking.moves = moves.length;
  const key = `${moves.length}:${moves.length && moves[moves.length - 1].frame}:${f.frame}`;
  if (key === movesShown) return;
  const fresh = !movesShown.startsWith(`${moves.length}:`);
  movesShown = key;
  const names = model.hello.spec.action_names;
  const colours = view().colour_names;
  const list = $("moves");
  if (fresh) {
    list.replaceChildren(
      ...moves.map((m) => {
        const who = m.source === "opponent" ? "opponent" : agentName();
        const li = el("li", `${colours[m.frame % 2]} ${label(m.action, names)}`, { title: `frame ${m.frame} · ${who}` });
        li.dataset.frame = m.frame;
        if (viewer.replay) li.addEventListener("click", () => viewer.replay.seek(m.frame + 1));
        return li;
      }),
    );
    list.classList.toggle("clickable", Boolean(viewer.replay));
  }
  let current = null;
  for (const li of list.children) {
    const on = Number(li.dataset.frame) === f.frame - 1;
    li.classList.toggle("current", on);
    if (on) current = li;
  }
  // Only the list's own box scrolls: `scrollIntoView` would scroll the page too, and on a phone
  // (the list under the board) take the board off the screen after every move.
  if (current && fresh) scrollWithin(list, current);
  else if (!viewer.replay && fresh) list.scrollTop = list.scrollHeight;
}

/** Scrolls box `list` (not the page) just enough that its child `item` is in view. */
function scrollWithin(list, item) {
  const box = list.getBoundingClientRect();
  const at = item.getBoundingClientRect();
  if (at.top < box.top) list.scrollTop -= box.top - at.top;
  else if (at.bottom > box.bottom) list.scrollTop += at.bottom - box.bottom;
}

/** Forgets what the move list shows (a new game on the TV page). */
export function resetThinking() {
  movesShown = "";
  $("moves").replaceChildren();
  // Blank until the next game's first frame: nothing of the last game's thinking shows.
  setText("gate", "–");
  setText("value", "–");
  chartContext("gatechart");
  chartContext("valuechart");
  const bar = $("evalbar");
  bar.getContext("2d").clearRect(0, 0, bar.width, bar.height);
}

/** The thinking panels of frame message `f`, its board drawn at layout `L`. */
export function drawThinking(f, L) {
  drawGateLegend();
  drawGateChart();
  drawEvalBar(f, L);
  drawValueChart(f);
  drawMoves(f);
  const d = currentDecision();
  const K = optionsOf(d);
  let gate = "–";
  if (d && d.probabilities && d.probabilities.length && d.k != null) {
    const j = K.indexOf(d.k);
    gate = optionName(d.k) + (j >= 0 ? ` at p ${d.probabilities[j].toFixed(2)}` : "");
  } else if (d && d.k != null) gate = `k=${d.k} (forced)`;
  setText("gate", gate);
  thinking.probabilities = d ? d.probabilities : null;
  thinking.decisions = model.decisions.map((x) => x.frame);
  thinking.k = d ? d.k : null;
  const v = d == null ? null : agentValue(d);
  const value = d == null ? "–" : twoPlayer() ? `${v >= 0 ? "+" : ""}${v.toFixed(2)} for ${agentName()}` : v.toFixed(1);
  setText("value", value);
}
