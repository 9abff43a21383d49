// An agent's page on the arena (/arena/agents/NAME): its versions (GET /v1/agents/NAME) and its
// runs (GET /v1/runs?agent=NAME), both linked beside it; per run its status, mean return and
// the timing profile as a figure, and a table of every episode attempt, each finished one
// linked to its replay on the env server's watch page, one being played to its live view.
// Polled while a run is running.

import { $, el, getJSON } from "./api.js";
import { boardHref, cell, jsonLink, livePage, num, pm, replayPage } from "./arena.js";

const REFRESH_MS = 3000;
const name = decodeURIComponent(location.pathname.replace(/\/+$/, "").split("/").pop());
const agentURL = `/v1/agents/${encodeURIComponent(name)}`;
const runsURL = `/v1/runs?agent=${encodeURIComponent(name)}`;
/** The share histogram's bins over [0, 1); one more holds the answers at or past the deadline. */
const BINS = 20;

/** A time of the API (ISO 8601) as "YYYY-MM-DD HH:MM:SS", or "—". */
const when = (iso) => (iso ? iso.replace("T", " ").slice(0, 19) : "—");

function versionRow(v) {
  const token = v.revoked ? `revoked ${when(v.revoked_at)}` : `issued ${when(v.token_created_at)}`;
  const tr = el("tr");
  tr.append(el("td", v.version), el("td", when(v.created_at)), el("td", token, v.revoked ? { class: "muted" } : {}));
  return tr;
}

// The figure ------------------------------------------------------------------------------------

const SVG = "http://www.w3.org/2000/svg";

/** A new SVG element with attributes and, when given, text. */
function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = String(text);
  return node;
}

/** `node` with a tooltip. */
function titled(node, text) {
  node.append(svg("title", {}, text));
  return node;
}

/** The run's frames by the share of the frame period their answer used: its finished
 * episodes' histograms summed (BINS equal bins over [0, 1), then the late bin), as bars. */
function histogram(played) {
  const counts = new Array(BINS + 1).fill(0);
  for (const e of played) (e.timing.frame_share_hist || []).forEach((c, i) => (counts[i] += c));
  const W = 440, H = 180, L = 40, R = 8, T = 16, B = 36;
  const bw = (W - L - R) / (BINS + 1.5); // a half-bar gap before the late bin
  const top = Math.max(1, ...counts);
  const y = (c) => T + (H - T - B) * (1 - c / top);
  const root = svg("svg", { class: "timing hist", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img" });
  root.append(titled(svg("g"), "frames by the share of the frame period the answer used"));
  counts.forEach((c, i) => {
    const late = i === BINS;
    const x = L + (late ? BINS + 0.5 : i) * bw;
    const what = late ? "at or after the deadline" : `${i * 5}–${(i + 1) * 5}% of the frame`;
    const bar = svg("rect", {
      class: late ? "bar late" : "bar", x: x + 0.5, y: y(c), width: bw - 1, height: y(0) - y(c),
      "data-bin": i, "data-count": c,
    });
    root.append(titled(bar, `${what}: ${c} frame${c === 1 ? "" : "s"}`));
  });
  const base = y(0);
  root.append(svg("line", { class: "axis", x1: L, x2: W - R, y1: base, y2: base }));
  for (const q of [0, 0.25, 0.5, 0.75]) {
    root.append(svg("text", { x: L + q * BINS * bw, y: base + 13, "text-anchor": "middle" }, `${q * 100}%`));
  }
  const deadline = L + (BINS + 0.25) * bw;
  root.append(svg("line", { class: "deadline", x1: deadline, x2: deadline, y1: T - 4, y2: base }));
  root.append(svg("text", { x: deadline, y: T - 6, "text-anchor": "middle" }, "deadline"));
  root.append(svg("text", { x: L + (BINS + 1) * bw, y: base + 13, "text-anchor": "middle" }, "late"));
  root.append(svg("text", { x: L + (BINS / 2) * bw, y: H - 6, "text-anchor": "middle" }, "share of the frame used"));
  root.append(svg("text", { x: L - 4, y: T + 4, "text-anchor": "end" }, top));
  root.append(svg("text", { x: L - 4, y: base, "text-anchor": "end" }, 0));
  root.append(svg("text", { x: 10, y: (T + base) / 2, "text-anchor": "middle", transform: `rotate(-90 10 ${(T + base) / 2})` }, "frames"));
  return root;
}

/** Each finished episode's return against the mean share of the frame its answers used. */
function scatter(played) {
  const W = 280, H = 180, L = 44, R = 18, T = 16, B = 36;
  const shares = played.map((e) => e.timing.frame_share_mean).filter((s) => s !== null);
  const returns = played.map((e) => e.episode_return || 0);
  const xmax = Math.max(1, ...shares);
  let lo = Math.min(0, ...returns);
  let hi = Math.max(...returns);
  if (hi <= lo) hi = lo + 1;
  const x = (s) => L + (W - L - R) * (s / xmax);
  const y = (r) => T + (H - T - B) * (1 - (r - lo) / (hi - lo));
  const root = svg("svg", { class: "timing scatter", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img" });
  root.append(titled(svg("g"), "each episode's return against its mean share of the frame used"));
  root.append(svg("line", { class: "axis", x1: L, x2: W - R, y1: y(lo), y2: y(lo) }));
  root.append(svg("line", { class: "axis", x1: L, x2: L, y1: T, y2: y(lo) }));
  root.append(svg("line", { class: "deadline", x1: x(1), x2: x(1), y1: T - 4, y2: y(lo) }));
  root.append(svg("text", { x: x(1), y: T - 6, "text-anchor": "end" }, "deadline"));
  for (const q of [0, 0.5, 1]) root.append(svg("text", { x: x(q), y: y(lo) + 13, "text-anchor": "middle" }, `${q * 100}%`));
  root.append(svg("text", { x: L - 4, y: y(hi) + 4, "text-anchor": "end" }, num(hi, hi % 1 ? 1 : 0)));
  root.append(svg("text", { x: L - 4, y: y(lo), "text-anchor": "end" }, num(lo, lo % 1 ? 1 : 0)));
  root.append(svg("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" }, "mean share of the frame used"));
  root.append(svg("text", { x: 10, y: (T + y(lo)) / 2, "text-anchor": "middle", transform: `rotate(-90 10 ${(T + y(lo)) / 2})` }, "return"));
  for (const e of played) {
    const s = e.timing.frame_share_mean;
    if (s === null) continue;
    const r = e.episode_return || 0;
    const dot = svg("circle", {
      class: "dot", cx: x(s), cy: y(r), r: 4,
      "data-episode": e.episode, "data-return": r, "data-share": s,
    });
    root.append(titled(dot, `episode ${e.episode} (seed ${e.seed}): return ${num(r)}, ${(s * 100).toFixed(1)}% of the frame used`));
  }
  return root;
}

/** The run's timing profile: the histogram and the scatter, with what they show. */
function figure(run) {
  const played = run.episodes.filter((e) => e.status === "finished" && e.timing);
  const fig = el("figure", null, { class: "timing" });
  if (!played.length) {
    fig.append(el("figcaption", "The timing profile shows once an episode has been played.", { class: "muted" }));
    return fig;
  }
  const judged = played.reduce((n, e) => n + e.timing.on_time + e.timing.late + e.timing.invalid, 0);
  const charts = el("div", null, { class: "charts" });
  charts.append(histogram(played), scatter(played));
  fig.append(
    charts,
    el(
      "figcaption",
      `Bars: the ${judged} answered frames of ${played.length} played episode${played.length === 1 ? "" : "s"} by the share ` +
        "of the frame period the answer used (5% bins; the last bar: at or after the deadline, late); frames " +
        "with no answer (the fallback played) are not in it. Dots: each episode's return against the mean share of " +
        "the frame its answers used.",
    ),
  );
  return fig;
}

// A run ---------------------------------------------------------------------------------------

const EPISODE_HEAD = [
  "episode", "attempt", "status", "seed", "outcome", "return", "frames",
  "on time", "late", "fallback", "invalid", "slack p50 ms", "",
];
const NUMERIC = new Set(["episode", "attempt", "seed", "return", "frames", "on time", "late", "fallback", "invalid", "slack p50 ms"]);

function episodeRow(e) {
  const tr = el("tr");
  Object.assign(tr.dataset, { episode: e.episode, attempt: e.attempt, status: e.status });
  const t = e.timing;
  const n = { class: "num" };
  const count = (k) => cell(t ? String(t[k]) : "—", t ? t[k] : null, n);
  const link = el("span");
  const replay = e.status === "finished" ? replayPage(e) : null;
  const live = e.status === "playing" ? livePage(e) : null;
  if (replay) link.append(el("a", "replay", { href: replay, class: "replay", title: "watch it on its env server" }));
  if (live) link.append(el("a", "watch live", { href: live, class: "live", title: "its env server's live view" }));
  const outcome = e.outcome || e.note || "";
  tr.append(
    cell(String(e.episode), e.episode, n),
    cell(String(e.attempt), e.attempt, n),
    cell(e.status, e.status, { class: e.status === "finished" ? "" : e.status === "playing" ? "ok" : "muted" }),
    cell(e.seed === null ? "hidden" : String(e.seed), e.seed, e.seed === null ? { class: "num muted", title: "shown once the episode has been played" } : n),
    cell(outcome, outcome, e.note ? { title: e.note } : {}),
    cell(num(e.episode_return), e.episode_return, n),
    cell(String(e.frames), e.frames, n),
    count("on_time"),
    count("late"),
    count("fallback"),
    count("invalid"),
    cell(num(t && t.slack_median_ms, 1), t && t.slack_median_ms, n),
    cell(link, null),
  );
  return tr;
}

function runSection(run) {
  const section = el("section", null, { id: `run-${run.id}`, class: "run" });
  section.dataset.run = run.id;
  section.append(el("h2", `${run.game} · ${run.tier} (${run.fps} FPS) · ${run.seed_set} · version ${run.version} · run ${run.id}`));
  const line = el("p");
  line.append(
    el("span", run.status, { class: run.status === "running" ? "ok" : run.status === "finished" ? "" : "muted", "data-field": "status" }),
    ` · ${run.episodes_finished} of ${run.episodes_planned} episodes played · return `,
    el("span", pm(run.mean_return, run.se_return), { "data-field": "mean" }),
    " · ",
    el("a", "leaderboard", { href: boardHref(run.game, run.tier, run.seed_set) }),
    " · ",
    jsonLink(`/v1/runs/${run.id}`, `GET /v1/runs/${run.id}`),
  );
  section.append(line, figure(run));
  const table = el("table", null, { class: "episodes" });
  const head = el("tr");
  for (const h of EPISODE_HEAD) head.append(el("th", h, NUMERIC.has(h) ? { class: "num" } : {}));
  table.append(el("thead"), el("tbody"));
  table.tHead.append(head);
  table.tBodies[0].append(...run.episodes.map(episodeRow));
  const box = el("div", null, { class: "scroll" });
  box.append(table);
  section.append(box);
  return section;
}

// The page ------------------------------------------------------------------------------------

let shown = "";

async function load() {
  const [agent, { runs }] = await Promise.all([getJSON(agentURL), getJSON(runsURL)]);
  const key = JSON.stringify([agent, runs]);
  if (key !== shown) {
    const first = !shown;
    shown = key;
    $("kind").textContent = agent.kind === "reference" ? "a reference player the arena enters itself" : `registered ${when(agent.created_at)}`;
    $("versions").tBodies[0].replaceChildren(...agent.versions.map(versionRow));
    $("agent").hidden = false;
    $("no-runs").hidden = runs.length > 0;
    $("no-runs").textContent = `${name} has entered no run yet.`;
    $("runs").replaceChildren(...runs.slice().reverse().map(runSection)); // newest first
    if (first && location.hash) {
      const target = document.getElementById(location.hash.slice(1));
      if (target) target.scrollIntoView();
    }
  }
  return runs.some((r) => r.status === "running");
}

async function init() {
  document.title = `rtplan · arena · ${name}`;
  $("title").textContent = name;
  $("agent-json").href = agentURL;
  $("runs-json").href = runsURL;
  let running = false;
  try {
    running = await load();
  } catch (e) {
    $("error").textContent = `cannot show ${name}: ${e.message}`;
    $("error").hidden = false;
    return;
  }
  // While a run plays, its episodes arrive: follow them (a poll that fails tries again).
  const poll = async () => {
    try {
      running = await load();
    } catch (e) {
      running = true;
    }
    if (running) setTimeout(poll, REFRESH_MS);
  };
  if (running) setTimeout(poll, REFRESH_MS);
}

init();
