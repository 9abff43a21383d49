// The arena's leaderboard page (/arena?game=&tier=&seed_set=): the choices from GET /v1/ranked,
// the table from GET /v1/leaderboard (linked beside it, polled), one row per finished run, each
// linking to its agent's page; a click on a header sorts by that column. With no finished run
// it says how to enter one.

import { $, el, getJSON } from "./api.js";
import { agentHref, boardJSON, cell, num, pct, pm, resort, sortable } from "./arena.js";

const REFRESH_MS = 5000;
const params = new URLSearchParams(location.search);
let rules = null;
let shown = "";
let asked = 0;

/** Selects `value` in `select` when it offers it. */
function choose(select, value) {
  if (value && [...select.options].some((o) => o.value === value)) select.value = value;
}

const picked = () => ({ game: $("game").value, tier: $("tier").value, seedSet: $("seed-set").value });

/** A row of the board: what GET /v1/leaderboard says of one finished run. */
function row(r, rank, best) {
  const tr = el("tr");
  tr.dataset.run = r.run;
  tr.dataset.agent = r.agent;
  const reference = r.kind === "reference";
  if (reference) tr.classList.add("reference");
  const kind = el("span", r.kind, reference ? { class: "tag" } : {});
  const isBest = reference && best === `${r.agent} ${r.version}`;
  const vs = isBest ? el("span", "best reference", { class: "muted" }) : pm(r.vs_best_reference, r.vs_best_reference_se, { signed: true });
  const n = { class: "num" };
  tr.append(
    cell(String(rank), rank, n),
    cell(el("a", r.agent, { href: agentHref(r.agent, r.run) }), r.agent),
    cell(r.version, r.version),
    cell(kind, r.kind),
    cell(String(r.episodes), r.episodes, n),
    cell(pm(r.mean_return, r.se_return), r.mean_return, n),
    cell(vs, r.vs_best_reference, n),
    cell(pct(r.on_time), r.on_time, n),
    cell(pct(r.late), r.late, n),
    cell(pct(r.fallback), r.fallback, n),
    cell(pct(r.invalid), r.invalid, n),
    cell(num(r.slack_median_ms, 1), r.slack_median_ms, n),
    cell(num(r.slack_p5_ms, 1), r.slack_p5_ms, n),
    cell(pct(r.frame_share_mean), r.frame_share_mean, n),
  );
  return tr;
}

/** The commands that enter an agent in the board shown. */
function commands({ game, tier }) {
  const arena = location.origin;
  return [
    `export RTPLAN_ARENA_TOKEN=$(rtplan arena register my-agent --version 1 --arena ${arena})`,
    `python -m rtplan.examples.random_agent --ranked --arena ${arena} --game ${game} --tier ${tier}`,
  ].join("\n");
}

function render(board, choice) {
  const rows = board.rows;
  const best = (rows.find((r) => r.best_reference) || {}).best_reference || null;
  const references = rows.filter((r) => r.kind === "reference");
  $("best").hidden = !rows.length;
  if (best) $("best").textContent = `best reference: ${best}; each difference is paired by seed with it`;
  else if (references.length) $("best").textContent = "no run here plays the best reference's seeds";
  else $("best").textContent = `no reference row yet (rtplan arena references --game ${choice.game} --tier ${choice.tier})`;
  $("board-box").hidden = !rows.length;
  $("empty").hidden = rows.length > 0;
  $("board").tBodies[0].replaceChildren(...rows.map((r, i) => row(r, i + 1, best)));
  resort($("board"));
  if (!rows.length) {
    $("empty-what").textContent =
      `No finished run of ${choice.game} at the ${choice.tier} tier on the ${choice.seedSet} seed set yet.` +
      (choice.seedSet === rules.seed_set ? "" : ` (New runs on this arena play the ${rules.seed_set} set.)`);
    $("commands").textContent = commands(choice);
  }
}

async function load() {
  const choice = picked();
  const json = boardJSON(choice.game, choice.tier, choice.seedSet);
  $("json").href = json;
  const set = rules.seed_sets.find((s) => s.name === choice.seedSet);
  const last = set.first_seed + set.episodes - 1;
  $("seeds").textContent = `${set.episodes} episodes of at most ${set.max_frames} frames (seeds ${set.first_seed} to ${last})`;
  const mine = ++asked;
  try {
    const board = await getJSON(json);
    if (mine !== asked) return; // another choice was made meanwhile
    $("error").hidden = true;
    const key = JSON.stringify(board);
    if (key === shown) return; // the rows as they are (and a hovered link)
    shown = key;
    render(board, choice);
  } catch (e) {
    if (mine !== asked) return;
    $("error").textContent = `cannot read the leaderboard: ${e.message}`;
    $("error").hidden = false;
  }
}

/** The address follows the choice, so a copied link opens this board. */
function follow() {
  const { game, tier, seedSet } = picked();
  history.replaceState(null, "", `/arena?${new URLSearchParams({ game, tier, seed_set: seedSet })}`);
  load();
}

async function init() {
  try {
    const [health, ranked] = await Promise.all([getJSON("/healthz"), getJSON("/v1/ranked")]);
    rules = ranked;
    $("server").textContent = `rtplan ${health.version}`;
    if (ranked.env_servers.length) {
      $("lobbies").append("ranked episodes live: ");
      ranked.env_servers.forEach((url, i) => {
        if (i) $("lobbies").append(", ");
        $("lobbies").append(el("a", new URL(url).host, { href: `${url}/`, title: "this env server's lobby" }));
      });
    }
    $("game").replaceChildren(...ranked.games.map((g) => el("option", g, { value: g })));
    $("tier").replaceChildren(...ranked.tiers.map((t) => el("option", `${t.name} (${t.fps} FPS)`, { value: t.name })));
    $("seed-set").replaceChildren(
      ...ranked.seed_sets.map((s) => el("option", s.name + (s.name === ranked.seed_set ? " (new runs here)" : ""), { value: s.name })),
    );
    $("seed-set").value = ranked.seed_set;
    choose($("game"), params.get("game"));
    choose($("tier"), params.get("tier"));
    choose($("seed-set"), params.get("seed_set"));
  } catch (e) {
    $("error").textContent = `cannot reach the arena: ${e.message}`;
    $("error").hidden = false;
    return;
  }
  for (const id of ["game", "tier", "seed-set"]) $(id).addEventListener("change", follow);
  sortable($("board"));
  await load();
  setInterval(load, REFRESH_MS);
}

init();
