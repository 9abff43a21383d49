// The results page: every figure and table the server lists (GET /v1/results), by folder;
// CSV tables are shown as HTML tables, JSON as text.

import { el, getJSON } from "./api.js";

const MAX_ROWS = 200; // rows of a table shown (the file link has them all)

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

/** Fills `details` with the table of `entry`: CSV as an HTML table, anything else as text. */
async function fillTable(details, entry) {
  const text = await (await fetch(entry.url)).text();
  if (entry.name.endsWith(".csv")) {
    const rows = parseCSV(text);
    const table = el("table");
    rows.slice(0, MAX_ROWS + 1).forEach((row, i) => {
      const tr = el("tr");
      for (const cell of row) tr.append(el(i === 0 ? "th" : "td", cell));
      table.append(tr);
    });
    details.append(table);
    if (rows.length > MAX_ROWS + 1) details.append(el("p", `… ${rows.length - 1} rows in all`, { class: "muted" }));
  } else {
    details.append(el("pre", text.slice(0, 20000)));
  }
}

/** A table's <details>: CSV tables are fetched and shown open; JSON records (per-episode data,
 * often large) are fetched when a reader opens them. */
async function tableOf(entry) {
  const details = el("details", null, { class: "table" });
  details.dataset.file = entry.name;
  const summary = el("summary");
  summary.append(el("a", entry.name, { href: entry.url }));
  details.append(summary);
  if (entry.name.endsWith(".csv")) {
    await fillTable(details, entry);
    details.open = true;
  } else {
    let filled = false;
    details.addEventListener("toggle", () => {
      if (details.open && !filled) {
        filled = true;
        fillTable(details, entry);
      }
    });
  }
  return details;
}

async function init() {
  const status = document.getElementById("status");
  try {
    const body = await getJSON("/v1/results");
    if (!body.groups.length) {
      status.textContent = "No figures yet: `rtplan calibrate --game GAME` and `rtplan report` write them.";
      return;
    }
    status.remove();
    for (const g of body.groups) {
      const section = el("section");
      section.dataset.group = g.title;
      section.append(el("h2", g.title), el("p", g.folder, { class: "muted" }));
      const figures = el("div", null, { class: "figures" });
      for (const f of g.figures) {
        const fig = el("figure");
        fig.append(el("img", null, { src: f.url, alt: f.name, class: "figure", loading: "lazy" }));
        fig.append(el("figcaption", f.name));
        figures.append(fig);
      }
      section.append(figures);
      for (const t of g.tables) section.append(await tableOf(t));
      document.getElementById("groups").append(section);
    }
  } catch (e) {
    status.textContent = `cannot list the results: ${e.message}`;
    status.className = "error";
  }
}

init();
