// The results page, a report of what GET /v1/results lists: the pre-registered results first
// (the committed games' holdout, from holdout-summary.json, and the clock games' gates, from
// their clock-eval/eval-scores.json), then the evaluation seeds' headline (summary.json) and
// each game's gate figures, then the
// planners' strength, then the details and training logs. Each figure and table says what it
// shows and the command that made it; numbers are rounded; CSV tables and raw JSON fold away.

import { el, getJSON } from "./api.js";

const MAX_ROWS = 200; // rows of a table shown (the file link has them all)
const OPEN_ROWS = 12; // a headline or strength table this short is shown open
const RANKS = ["the gate: headline", "strength", "detail", "training log"];

/** A number rounded for reading: 3400.1, 41.42, 0.00260; anything else as it is. */
export function rounded(text) {
  if (!/^-?\d+\.\d+(e-?\d+)?$/i.test(text)) return text;
  const n = Number(text);
  const a = Math.abs(n);
  if (a >= 100) return n.toFixed(1);
  if (a >= 1) return n.toFixed(2);
  return a === 0 ? "0" : String(Number(n.toPrecision(3)));
}

/** A small CSV reader: commas, double-quoted fields with "" escapes, one record per line. */
function parseCSV(text) {
  const rows = [];
  for (const line of text.split(/\r?\n/)) {
    if (!line) continue;
    const row = [];
    let field = "";
    let quoted = false;
    for (let i = 0; i < line.length; i++) {
      const ch = line[i];
      if (quoted) {
        if (ch === '"' && line[i + 1] === '"') field += '"', i++;
        else if (ch === '"') quoted = false;
        else field += ch;
      } else if (ch === '"') quoted = true;
      else if (ch === ",") row.push(field), (field = "");
      else field += ch;
    }
    row.push(field);
    rows.push(row);
  }
  return rows;
}

/** An HTML table of `rows` (the first is the header) in a box that scrolls sideways on its
 * own, so a wide log never widens the page. */
function tableBox(rows) {
  const table = el("table");
  rows.forEach((row, i) => {
    const tr = el("tr");
    for (const cell of row) {
      const shown = i === 0 ? cell : rounded(cell);
      tr.append(el(i === 0 ? "th" : "td", shown, shown !== cell ? { title: cell } : undefined));
    }
    table.append(tr);
  });
  const box = el("div", null, { class: "scroll" });
  box.append(table);
  return box;
}

/** Fills `details` with the file of `entry`: CSV as a table, JSON as rounded text. */
async function fillTable(details, entry) {
  const text = await (await fetch(entry.url)).text();
  if (entry.name.endsWith(".csv")) {
    const rows = parseCSV(text);
    details.append(tableBox(rows.slice(0, MAX_ROWS + 1)));
    if (rows.length > MAX_ROWS + 1) details.append(el("p", `… ${rows.length - 1} rows in all`, { class: "muted" }));
  } else {
    const shown = text.slice(0, 20000).replace(/-?\d+\.\d{4,}(e-?\d+)?/gi, (m) => rounded(m));
    details.append(el("pre", shown + (text.length > 20000 ? "\n…" : "")));
  }
}

/** What a file shows and the command that made it, as a caption. */
function caption(entry, into) {
  into.append(el("b", entry.name));
  if (entry.shows) into.append(`: ${entry.shows}`);
  if (entry.command) {
    into.append(el("br"), el("span", "made by ", { class: "muted" }), el("code", entry.command));
  }
}

/** A table's <details>: closed, filled when opened; a short headline or strength CSV open. */
async function tableOf(entry) {
  const details = el("details", null, { class: "table" });
  details.dataset.file = entry.name;
  const summary = el("summary");
  caption(entry, summary);
  summary.append(" ", el("a", "(file)", { href: entry.url }));
  details.append(summary);
  let filled = false;
  const fill = async () => {
    if (!filled) {
      filled = true;
      await fillTable(details, entry);
    }
  };
  details.addEventListener("toggle", () => details.open && fill());
  if (entry.name.endsWith(".csv") && entry.rank <= 1) {
    const text = await (await fetch(entry.url)).text();
    if (parseCSV(text).length <= OPEN_ROWS + 1) {
      await fill();
      details.open = true;
    }
  }
  return details;
}

const pm = (r) => (r ? `${rounded(String(r.mean))} ± ${rounded(String(r.se))}` : "–");

/** The headline table from summary.json's rows (`rtplan report`), or holdout-summary.json's:
 * per game, the gate against the best fixed k on the same seeds; null when the file holds no
 * such rows. `title` and `note` head the section. */
async function headline(entry, title = "Headline: the gate against the best fixed budget",
  note = "Mean return ± SE per game over paired evaluation seeds; the difference is paired, seed by seed.") {
  let rows;
  try {
    rows = await (await fetch(entry.url)).json();
  } catch {
    return null;
  }
  if (!Array.isArray(rows) || !rows.every((r) => r && r.game && r.condition && "mean" in r)) return null;
  const out = [["game", "gate", "best fixed k", "gate − best (paired)", "gate's mean k", "episodes"]];
  for (const game of [...new Set(rows.map((r) => r.game))]) {
    const of = rows.filter((r) => r.game === game);
    const gate = of.find((r) => r.condition === "gate");
    const best = of.find((r) => r.best_fixed);
    const diff = best && best.gate_minus != null ? `${rounded(String(best.gate_minus))} ± ${rounded(String(best.gate_minus_se))}` : "–";
    out.push([game, pm(gate), best ? `${best.condition}: ${pm(best)}` : "–", diff,
      gate ? rounded(String(gate.mean_k)) : "–", String((gate || of[0]).episodes)]);
  }
  const section = el("section", null, { class: "headline" });
  section.append(el("h2", title));
  const p = el("p", null, { class: "muted" });
  p.append(`${note} Made by `, el("code", "rtplan report"), " from ", el("code", "rtplan eval"), "'s files.");
  section.append(p, tableBox(out.map((r) => r.map(String))));
  return section;
}

/** The clock games' headline (pre-registered): per game, from its clock evaluation's
 * `eval-scores.json` (`rtplan report`), the gate's expected score against the pool averaged
 * over T0, against the best fixed budget and the best heuristic, paired; null without one. */
async function clockHeadline(entries) {
  const out = [["game", "gate", "best fixed budget", "best heuristic", "gate − best fixed", "gate − best heuristic", "games per player"]];
  const named = (r, name) => (r ? `${name}: ${pm({ mean: r.score, se: r.se })}` : "–");
  const minus = (r, key) => (r && r[key] != null ? pm({ mean: r[key], se: r[`${key}_se`] }) : "–");
  for (const [game, entry] of entries) {
    let players;
    try {
      players = (await (await fetch(entry.url)).json()).players;
    } catch {
      continue;
    }
    if (!Array.isArray(players)) continue;
    const mean = players.filter((r) => r.t0 === "mean");
    const gate = mean.find((r) => r.player === "gate");
    if (!gate) continue;
    const fixed = mean.find((r) => r.best_fixed);
    const heur = mean.find((r) => r.best_heuristic);
    out.push([game, pm({ mean: gate.score, se: gate.se }), named(fixed, gate.best_fixed_name),
      named(heur, gate.best_heuristic_name), minus(gate, "minus_best_fixed"),
      minus(gate, "minus_best_heuristic"), String(gate.games)]);
  }
  if (out.length === 1) return null;
  const section = el("section", null, { class: "headline" });
  section.dataset.headline = "clock";
  section.append(el("h2", "Pre-registered: the clock games' gates against the pool"));
  const p = el("p", null, { class: "muted" });
  p.append("Expected score ± SE against the pool (policy-only, always-k, random option), averaged over T0, ",
    "both colours; the differences are paired. Made by ", el("code", "rtplan report"), " from ",
    el("code", "rtplan eval"), "'s clock evaluation (", el("code", "clock-eval/eval-scores.json"), ").");
  section.append(p, tableBox(out.map((r) => r.map(String))));
  return section;
}

/** The pre-registered results first (the committed games' holdout, the clock games), then the
 * evaluation seeds' table: the sections that lead the page. */
async function headlines(groups) {
  const summary = groups.find((g) => g.folder === "results");
  const file = (name) => summary && summary.tables.find((t) => t.name === name);
  const out = [];
  const holdout = file("holdout-summary.json");
  const pre = holdout && (await headline(holdout, "Pre-registered holdout: the gate against the best fixed budget",
    "Mean return ± SE per game over the 400 holdout seeds no run had seen, the best fixed k chosen on the tuning seeds; the difference is paired, seed by seed."));
  if (pre) {
    pre.dataset.headline = "holdout";
    out.push(pre);
  }
  const clocks = groups
    .filter((g) => g.folder.endsWith("/clock-eval"))
    .flatMap((g) => g.tables.filter((t) => t.name === "eval-scores.json").map((t) => [g.folder.split("/")[1], t]));
  const clock = await clockHeadline(clocks);
  if (clock) out.push(clock);
  const json = file("summary.json");
  const evals = json && (await headline(json, pre ? "Evaluation seeds: the gate against the best fixed budget" : undefined,
    pre ? "Mean return ± SE per game over the evaluation seeds (not pre-registered: the holdout above is the test); the difference is paired, seed by seed." : undefined));
  if (evals) {
    evals.dataset.headline = "eval";
    out.push(evals);
  }
  return out;
}

/** The group's replays (annotated games): what they show and the command that made them, once,
 * then each as a link to the replay page (its title) and to its file. */
function replayList(replays) {
  const box = el("div", null, { class: "replays" });
  const cap = el("p", null, { class: "muted" });
  caption({ ...replays[0], name: `${replays.length} game${replays.length > 1 ? "s" : ""}` }, cap);
  const list = el("ul", null, { class: "replays" });
  for (const r of replays) {
    const li = el("li");
    li.dataset.file = r.name;
    li.append(el("a", r.title || r.name, { href: r.watch, class: "watch" }), " ");
    li.append(el("a", "(file)", { href: r.url }));
    list.append(li);
  }
  box.append(cap, list);
  return box;
}

/** A figure with its caption, linking to the image. */
function figureOf(f) {
  const fig = el("figure");
  const link = el("a", null, { href: f.url });
  link.append(el("img", null, { src: f.url, alt: f.shows || f.name, class: "figure", loading: "lazy" }));
  fig.append(link);
  const cap = el("figcaption");
  caption(f, cap);
  fig.append(cap);
  return fig;
}

/** A closed <details> for a detail or training-log group, its summary counting what it holds. */
function folded(g) {
  const body = el("details", null, { class: "group" });
  const what = [];
  if (g.figures.length) what.push(`${g.figures.length} figure${g.figures.length > 1 ? "s" : ""}`);
  if (g.tables.length) what.push(`${g.tables.length} file${g.tables.length > 1 ? "s" : ""}`);
  const games = (g.replays || []).length;
  if (games) what.push(`${games} annotated game${games > 1 ? "s" : ""}`);
  body.append(el("summary", `show ${what.join(", ")}`));
  return body;
}

/** Detail groups three or more folders deep (a player's cells of a clock evaluation, a forced
 * budget's deployment) gather under one section per game and topic, at the place of the first:
 * the page lists each topic once, and a sub-folder opens inside it. */
function nestDeep(groups) {
  const out = [];
  const nests = new Map();
  for (const g of groups) {
    const parts = g.title.split(" · ");
    if (parts.length < 3 || g.rank < 2) {
      out.push(g);
      continue;
    }
    const key = parts.slice(0, 2).join(" · ");
    if (!nests.has(key)) {
      const nest = { nested: true, title: key, rank: g.rank, members: [] };
      nests.set(key, nest);
      out.push(nest);
    }
    nests.get(key).members.push({ ...g, sub: parts.slice(2).join(" · ") });
  }
  return out;
}

/** A section's heading: the group's title and its rank. */
function heading(title, rank) {
  const h = el("h2", title);
  h.append(" ", el("span", RANKS[rank] || "other", { class: `rank rank${rank}` }));
  return h;
}

/** The folded <details> of a detail group, holding its figures, annotated games and files. */
async function foldedGroup(g) {
  const body = folded(g);
  if (g.figures.length) {
    const figures = el("div", null, { class: "figures" });
    for (const f of g.figures) figures.append(figureOf(f));
    body.append(figures);
  }
  if (g.replays && g.replays.length) body.append(replayList(g.replays));
  for (const t of g.tables) body.append(await tableOf(t));
  return body;
}

/** The section of a nest: one folded group holding a folded group per sub-folder. */
async function nestSection(nest) {
  const section = el("section");
  section.dataset.nest = nest.title;
  section.append(heading(`${nest.title} · ${nest.members.length} folders`, nest.rank));
  const outer = el("details", null, { class: "group" });
  outer.append(el("summary", `show ${nest.members.map((m) => m.sub).join(", ")}`));
  for (const m of nest.members) {
    const inner = await foldedGroup(m);
    inner.querySelector("summary").prepend(`${m.sub}: `);
    outer.append(inner);
  }
  section.append(outer);
  return section;
}

async function init() {
  const status = document.getElementById("status");
  const main = document.getElementById("groups");
  try {
    const body = await getJSON("/v1/results");
    if (!body.groups.length) {
      status.textContent = "No figures yet: `rtplan calibrate --game GAME` and `rtplan report` write them.";
      return;
    }
    status.textContent = "What results/ holds, the headline first: the gate against fixed budgets, then the planners' strength, then details and training logs. Each figure says what it shows and the command that made it.";
    for (const section of await headlines(body.groups)) main.append(section);
    for (const g of nestDeep(body.groups)) {
      if (g.nested) {
        main.append(await nestSection(g));
        continue;
      }
      const section = el("section");
      section.dataset.group = g.title;
      section.append(heading(g.title, g.rank), el("p", g.folder, { class: "muted folder" }));
      // Details and training logs fold away (the page reads as a report); the headline and
      // the strength figures stay open, and an open group folds its own detail files.
      if (g.rank >= 2) {
        section.append(await foldedGroup(g));
        main.append(section);
        continue;
      }
      const open = g.figures.filter((f) => f.rank < 2);
      const figures = el("div", null, { class: "figures" });
      for (const f of open) figures.append(figureOf(f));
      if (open.length) section.append(figures);
      if (g.replays && g.replays.length) section.append(replayList(g.replays));
      const detail = { figures: g.figures.filter((f) => !open.includes(f)), tables: [] };
      for (const t of g.tables) {
        if (t.rank >= 2) detail.tables.push(t);
        else section.append(await tableOf(t));
      }
      if (detail.figures.length || detail.tables.length) section.append(await foldedGroup(detail));
      main.append(section);
    }
    main.dataset.ready = "true"; // every group is on the page
  } catch (e) {
    status.textContent = `cannot list the results: ${e.message}`;
    status.className = "error";
  }
}

init();
