// The results page, a report of what GET /v1/results lists: the pre-registered results first
// (the committed games' holdout, from holdout-summary.json; the clock games' gates on the eval
// split, from their clock-eval/eval-scores.json; Speed Hex's replication on the holdout split,
// from clock-eval/holdout-scores.json), then the evaluation seeds' headline (summary.json), then
// a folded section per game whose folders fold too (#game/folder opens one). Each figure and
// table says what it shows and the command that made it; a figure shows at up to its natural
// size and a click opens it full size; numbers are rounded; CSV tables and raw JSON fold away.

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

/** The clock games' pre-registered evaluation (docs/preregistration.md, "Clock games"): per
 * game, from its `clock-eval/eval-scores.json` (`rtplan report`; the eval split), the gate's
 * expected score against the pool averaged over T0, against the best fixed budget and the best
 * heuristic, paired; null without one. */
async function clockHeadline(entries) {
  const out = [["game", "gate", "best fixed budget", "best heuristic", "gate − best fixed", "gate − best heuristic", "games per player"]];
  for (const [game, entry] of entries) {
    const rows = await clockRows(entry);
    const gate = rows && rows.find((r) => r.player === "gate");
    if (!gate) continue;
    const fixed = rows.find((r) => r.best_fixed);
    const heur = rows.find((r) => r.best_heuristic);
    out.push([game, pm({ mean: gate.score, se: gate.se }), named(fixed, gate.best_fixed_name),
      named(heur, gate.best_heuristic_name), minus(gate, "minus_best_fixed"),
      minus(gate, "minus_best_heuristic"), String(gate.games)]);
  }
  if (out.length === 1) return null;
  const section = el("section", null, { class: "headline" });
  section.dataset.headline = "clock";
  section.append(el("h2", "Pre-registered, eval split: the clock games' gates against the pool"));
  const p = el("p", null, { class: "muted" });
  p.append("The clock games' pre-registered evaluation (", el("code", "docs/preregistration.md"),
    ", \"Clock games\"): the eval split's first 50 openings, both colours, at five clocks T0 ",
    "against the pool (policy-only, always-k, random option): 3,000 games per player. Expected ",
    "score ± SE averaged over T0; the differences are paired. Made by ", el("code", "rtplan report"),
    " from ", el("code", "rtplan eval"), "'s cells; the file: ",
    el("code", "results/<game>/clock-eval/eval-scores.json"), ".");
  section.append(p, tableBox(out.map((r) => r.map(String))));
  return section;
}

const named = (r, name) => (r ? `${name}: ${pm({ mean: r.score, se: r.se })}` : "–");
const minus = (r, key) => (r && r[key] != null ? pm({ mean: r[key], se: r[`${key}_se`] }) : "–");

/** The rows averaged over T0 (`t0: "mean"`) of a clock evaluation's scores file, else null. */
async function clockRows(entry) {
  let players;
  try {
    players = (await (await fetch(entry.url)).json()).players;
  } catch {
    return null;
  }
  return Array.isArray(players) ? players.filter((r) => r.t0 === "mean") : null;
}

/** The pre-registered replication on the holdout openings (docs/preregistration.md, amendment
 * 2026-11-26: Speed Hex's gates against bars fixed on the eval split): per game with a
 * `clock-eval/holdout-scores.json`, every gate played there against those bars; null without. */
async function clockHoldout(entries) {
  const out = [["game", "gate", "score", "− best fixed budget (bar)", "− best heuristic (bar)", "games"]];
  for (const [game, entry] of entries) {
    const rows = await clockRows(entry);
    for (const r of (rows || []).filter((r) => r.player.startsWith("gate"))) {
      out.push([game, r.player, pm({ mean: r.score, se: r.se }),
        `${r.best_fixed_name}: ${minus(r, "minus_best_fixed")}`,
        `${r.best_heuristic_name}: ${minus(r, "minus_best_heuristic")}`, String(r.games)]);
    }
  }
  if (out.length === 1) return null;
  const section = el("section", null, { class: "headline" });
  section.dataset.headline = "clock-holdout";
  section.append(el("h2", "Pre-registered replication, holdout split: Speed Hex's gates on openings no one had seen"));
  const p = el("p", null, { class: "muted" });
  p.append("The amendment of 2026-11-26 (", el("code", "docs/preregistration.md"),
    "): the holdout split's first 50 openings, both colours, the same clocks and pool: 3,000 ",
    "games per player; each gate minus the bars fixed from the eval split, paired. Made by ",
    el("code", "rtplan report"), " from ", el("code", "rtplan eval --split holdout"),
    "'s cells; the file: ", el("code", "results/<game>/clock-eval/holdout-scores.json"), ".");
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
  const scores = (name) => groups
    .filter((g) => g.folder.endsWith("/clock-eval"))
    .flatMap((g) => g.tables.filter((t) => t.name === name).map((t) => [g.folder.split("/")[1], t]));
  const clock = await clockHeadline(scores("eval-scores.json"));
  if (clock) out.push(clock);
  const replication = await clockHoldout(scores("holdout-scores.json"));
  if (replication) out.push(replication);
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

/** A figure is never drawn below this share of its natural width where the screen allows:
 * rtplan's figures draw 10-pt text at 100-110 dpi (14-15 px), so their axis text stays >= 9 px. */
export const MIN_SCALE = 0.6;

/** Sizes a figure's box from its image's natural width `w`: it may shrink to MIN_SCALE of it
 * beside another figure and grows to its natural size, never wider (nor wider than the page). */
function sizeFigure(fig, w) {
  fig.style.flex = `1 1 ${Math.round(MIN_SCALE * w)}px`;
  fig.style.maxWidth = `min(100%, ${w}px)`;
}

let viewer = null; // the one <dialog> that shows a figure at its natural size

/** Opens figure `f` at its natural size in a dialog (it scrolls where the screen is smaller). */
function openFull(f) {
  if (!viewer) {
    viewer = el("dialog", null, { class: "figure-full" });
    viewer.addEventListener("click", (e) => e.target === viewer && viewer.close());
    document.body.append(viewer);
  }
  const close = el("button", "close", { type: "button" });
  close.addEventListener("click", () => viewer.close());
  const cap = el("p");
  caption(f, cap);
  cap.append(" ", el("a", "(file)", { href: f.url }));
  viewer.replaceChildren(close, cap, el("img", null, { src: f.url, alt: f.shows || f.name }));
  viewer.showModal();
}

/** A figure with its caption: shown at up to its natural size, a click opens it full size. */
function figureOf(f) {
  const fig = el("figure");
  fig.dataset.file = f.name;
  const img = el("img", null, { src: f.url, alt: f.shows || f.name, class: "figure", loading: "lazy" });
  if (f.width && f.height) {
    img.width = f.width; // the box is reserved before the lazy image loads
    img.height = f.height;
    sizeFigure(fig, f.width);
  } else img.addEventListener("load", () => sizeFigure(fig, img.naturalWidth), { once: true });
  const link = el("a", null, { href: f.url, title: "open at full size" });
  link.addEventListener("click", (e) => {
    if (e.button || e.ctrlKey || e.metaKey || e.shiftKey) return; // a new tab: the file itself
    e.preventDefault();
    openFull(f);
  });
  link.append(img);
  fig.append(link);
  const cap = el("figcaption");
  caption(f, cap);
  fig.append(cap);
  return fig;
}

const plural = (n, what) => `${n} ${what}${n > 1 ? "s" : ""}`;

/** What a group holds, for its summary line: "2 figures, 3 files, 4 annotated games". */
function holds(g) {
  const what = [];
  if (g.figures.length) what.push(plural(g.figures.length, "figure"));
  if (g.tables.length) what.push(plural(g.tables.length, "file"));
  const games = (g.replays || []).length;
  if (games) what.push(plural(games, "annotated game"));
  return what.join(", ");
}

/** A group's figures, annotated games and files (each file folded, a short headline or
 * strength CSV open), appended to `into`. */
async function fillGroup(into, g) {
  if (g.figures.length) {
    const figures = el("div", null, { class: "figures" });
    for (const f of g.figures) figures.append(figureOf(f));
    into.append(figures);
  }
  if (g.replays && g.replays.length) into.append(replayList(g.replays));
  for (const t of g.tables) into.append(await tableOf(t));
}

/** The folder of a group relative to results/ ("tetris-rt-v0/deploy"; "results" the root): the
 * page's deep link to it is `#` and this. */
const folderKey = (g) => (g.folder === "results" ? "results" : g.folder.slice("results/".length));

/** A folded folder: its summary names it, its rank and what it holds; its body the files. */
function folderDetails(name, rank, what, key, title) {
  const body = el("details", null, { class: "group folder" });
  body.dataset.folder = key;
  if (title) body.dataset.group = title;
  const summary = el("summary");
  summary.append(el("b", name), " ", el("span", RANKS[rank] || "other", { class: `rank rank${rank}` }));
  if (what) summary.append(" ", el("span", what, { class: "muted" }));
  body.append(summary);
  return body;
}

/** The listing's groups by game (the first folder) and topic (the second): per game its own
 * folder (the gate's headline figures), then its topics by rank, each topic's deeper folders
 * (a player's cells of a clock evaluation, a forced budget's deployment) inside it. */
function byGame(groups) {
  const games = new Map();
  for (const g of groups) {
    const parts = folderKey(g).split("/");
    if (!games.has(parts[0])) games.set(parts[0], { name: parts[0], own: null, topics: new Map() });
    const game = games.get(parts[0]);
    if (parts.length === 1) {
      game.own = g;
      continue;
    }
    if (!game.topics.has(parts[1])) game.topics.set(parts[1], { name: parts[1], group: null, members: [], rank: 9 });
    const topic = game.topics.get(parts[1]);
    if (parts.length === 2) topic.group = g;
    else topic.members.push({ ...g, sub: parts.slice(2).join("/") });
    topic.rank = Math.min(topic.rank, g.rank);
  }
  for (const game of games.values()) {
    game.topics = [...game.topics.values()].sort((a, b) => a.rank - b.rank); // stable: by name within a rank
    game.rank = Math.min(game.own ? game.own.rank : 9, ...game.topics.map((t) => t.rank));
  }
  return [...games.values()];
}

/** A game's section: folded, its summary naming its folders; opened, the game's own figures
 * and one folded line per topic. */
async function gameSection(game) {
  const section = el("section", null, { class: "game" });
  section.dataset.game = game.name;
  const body = el("details", null, { class: "group" });
  body.dataset.folder = game.name;
  if (game.own) body.dataset.group = game.own.title;
  const summary = el("summary");
  const h2 = el("h2", game.name);
  h2.append(" ", el("span", RANKS[game.rank] || "other", { class: `rank rank${game.rank}` }));
  summary.append(h2);
  const what = [];
  if (game.own) what.push(holds(game.own));
  if (game.topics.length) what.push(`${plural(game.topics.length, "folder")}: ${game.topics.map((t) => t.name).join(", ")}`);
  summary.append(el("span", what.join("; "), { class: "muted" }));
  body.append(summary);
  if (game.own) await fillGroup(body, game.own);
  for (const topic of game.topics) {
    const g = topic.group;
    const what = [g ? holds(g) : "", topic.members.length ? plural(topic.members.length, "folder") : ""];
    const key = `${game.name}/${topic.name}`;
    const details = folderDetails(topic.name, topic.rank, what.filter(Boolean).join(", "), key, g && g.title);
    if (g) {
      details.append(el("p", g.folder, { class: "muted folder" }));
      await fillGroup(details, g);
    }
    for (const m of topic.members) {
      const inner = folderDetails(m.sub, m.rank, holds(m), folderKey(m), m.title);
      inner.append(el("p", m.folder, { class: "muted folder" }));
      await fillGroup(inner, m);
      details.append(inner);
    }
    body.append(details);
  }
  section.append(body);
  return section;
}

/** Opens the folder the URL's hash names (`#tetris-rt-v0/deploy/k1`, or its nearest listed
 * parent) and every section around it, and scrolls to it. */
function openHash() {
  let key = decodeURIComponent(location.hash.slice(1));
  while (key) {
    const target = document.querySelector(`details[data-folder="${CSS.escape(key)}"]`);
    if (target) {
      const chain = [];
      for (let d = target; d; d = d.parentElement && d.parentElement.closest("details")) chain.push(d);
      for (const d of chain.reverse()) d.open = true; // the target last: its toggle sets the address
      target.scrollIntoView();
      return;
    }
    key = key.includes("/") ? key.slice(0, key.lastIndexOf("/")) : "";
  }
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
    status.textContent = "What results/ holds, the pre-registered results first; then each game's folders, folded (a click opens one; the address's #game/folder opens it too). Each figure says what it shows and the command that made it; a click shows it full size.";
    for (const section of await headlines(body.groups)) main.append(section);
    for (const game of byGame(body.groups)) main.append(await gameSection(game));
    // An opened folder's address is its deep link (replaceState: no jump, no history entry).
    main.addEventListener("toggle", (e) => {
      const d = e.target;
      if (d.open && d.dataset && d.dataset.folder) history.replaceState(null, "", `#${d.dataset.folder}`);
    }, true);
    addEventListener("hashchange", openHash);
    openHash();
    main.dataset.ready = "true"; // every group is on the page
  } catch (e) {
    status.textContent = `cannot list the results: ${e.message}`;
    status.className = "error";
  }
}

init();
