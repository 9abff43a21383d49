// What the arena's two pages share (arena.html: the leaderboard; arena-agent.html: an agent's
// runs): how their numbers read, the links between them and to the env servers' pages, and a
// table sorted by a click on a column's header. Both read the arena's REST API (docs/arena.md).

import { el } from "./api.js";

/** `x` with `digits` decimals, or "—" where the API has no number. */
export function num(x, digits = 2) {
  return x === null || x === undefined ? "—" : Number(x).toFixed(digits);
}

/** "mean ± se"; `signed`: a positive mean with its "+" (a difference). */
export function pm(mean, se, { digits = 2, signed = false } = {}) {
  if (mean === null || mean === undefined) return "—";
  const sign = signed && mean > 0 ? "+" : "";
  return `${sign}${num(mean, digits)} ± ${num(se, digits)}`;
}

/** A share (0 to 1) as a percentage with one decimal. */
export function pct(x) {
  return x === null || x === undefined ? "—" : `${(x * 100).toFixed(1)}%`;
}

/** The agent's page on this arena, at one of its runs when `run` is given. */
export function agentHref(name, run) {
  return `/arena/agents/${encodeURIComponent(name)}${run ? `#run-${run}` : ""}`;
}

/** The leaderboard page of a game, tier and seed set. */
export function boardHref(game, tier, seedSet) {
  return `/arena?${new URLSearchParams({ game, tier, seed_set: seedSet })}`;
}

/** The leaderboard's JSON of a game, tier and seed set. */
export function boardJSON(game, tier, seedSet) {
  return `/v1/leaderboard?${new URLSearchParams({ game, tier, seed_set: seedSet })}`;
}

/** The env server's watch page of an attempt's replay: the API's `replay` is the replay's JSON
 * (`{env_server}/v1/replays/NAME`); a person watches it at `{env_server}/watch?replay=NAME`. */
export function replayPage(e) {
  if (!e.replay || !e.env_server) return null;
  const name = decodeURIComponent(e.replay.slice(e.replay.lastIndexOf("/") + 1));
  return `${e.env_server}/watch?replay=${encodeURIComponent(name)}`;
}

/** The env server's watch page of an attempt being played. */
export function livePage(e) {
  if (!e.session_id || !e.env_server) return null;
  return `${e.env_server}/watch?session=${encodeURIComponent(e.session_id)}`;
}

/** A small "JSON" link to what a page shows. */
export function jsonLink(href, what) {
  return el("a", "JSON", { href, class: "json", title: `the JSON this shows: ${what}` });
}

/** A cell: `content` (text or a node), its sort key `value` (a number, a string, or null: last
 * whichever way the column sorts) and `attrs`. */
export function cell(content, value, attrs = {}) {
  const td = el("td", null, attrs);
  if (content instanceof Node) td.append(content);
  else td.textContent = content;
  if (value !== null && value !== undefined) td.dataset.value = String(value);
  return td;
}

/** Makes `table` sortable by a click on a header that has `data-sort` ("number" or "text"):
 * the first click sorts as its `data-first` says ("descending" by default), a second reverses;
 * rows without a value go last. `aria-sort` on the header tells which way it is sorted. */
export function sortable(table) {
  const heads = [...table.querySelectorAll("thead th")];
  heads.forEach((th, column) => {
    if (!th.dataset.sort) return;
    th.tabIndex = 0;
    const click = () => {
      const was = th.getAttribute("aria-sort");
      const first = th.dataset.first || "descending";
      const dir = was === first ? (first === "ascending" ? "descending" : "ascending") : first;
      for (const h of heads) h.removeAttribute("aria-sort");
      th.setAttribute("aria-sort", dir);
      sortRows(table, column, th.dataset.sort, dir);
    };
    th.addEventListener("click", click);
    th.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" || ev.key === " ") {
        ev.preventDefault();
        click();
      }
    });
  });
}

/** Sorts the body of `table` again by its sorted header, if one is (the rows were replaced). */
export function resort(table) {
  const heads = [...table.querySelectorAll("thead th")];
  const column = heads.findIndex((h) => h.hasAttribute("aria-sort"));
  if (column >= 0) {
    const th = heads[column];
    sortRows(table, column, th.dataset.sort, th.getAttribute("aria-sort"));
  }
}

function sortRows(table, column, kind, dir) {
  const body = table.tBodies[0];
  const key = (tr) => tr.cells[column].dataset.value;
  const sign = dir === "ascending" ? 1 : -1;
  const rows = [...body.rows].sort((a, b) => {
    const x = key(a);
    const y = key(b);
    if (x === undefined || y === undefined) return (x === undefined) - (y === undefined);
    return sign * (kind === "number" ? Number(x) - Number(y) : x.localeCompare(y));
  });
  body.append(...rows);
}
