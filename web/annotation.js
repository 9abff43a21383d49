// The replay page's annotation panel, for an annotated game (`rtplan annotate-games`: a replay
// whose header says what the game is and whose frame lines say, per move, the budget, the
// gate's probabilities, both clocks and the planner's value, with a note on the big spends).
// It shows the move that led to the frame on screen, and the big spends as a list that jumps
// to them. The index's `annotation` and `move_notes` (server/_replay_view.py) are its data.

import { $, el, setText } from "./api.js";

let shown = null; // the frame the panel shows
let listed = null; // the replay whose big spends are listed

const optionName = (k) => (k === 0 ? "policy-only" : k < 0 ? "a random move" : `k=${k}`);
const signed = (v) => `${v >= 0 ? "+" : ""}${v.toFixed(2)}`;

/** The text of one move's annotation, as the panel's rows: [label, text]. */
export function annotationRows(note, sides) {
  if (!note) return [["move", "the opening's random move (free), or the start"]];
  const rows = [["move", `${note.side} played ${optionName(note.k)}${note.cost ? ` (${note.cost} ticks)` : ""}`]];
  if (note.probabilities) {
    const probs = note.probabilities.map((p, i) => `${note.options[i]} ${p.toFixed(2)}`).join(" · ");
    rows.push(["gate", probs]);
  }
  const clock = (p) => `${sides[p]} ${note.clocks_before[p]} → ${note.clocks_after[p]}`;
  rows.push(["clocks", `${clock(0)}; ${clock(1)}`]);
  rows.push(["value", `${signed(note.value)} for ${note.side} (${signed(note.value_for_gate)} for the gate)`]);
  return rows;
}

function listBigSpends(R) {
  const list = $("ann-big");
  const items = [];
  R.index.move_notes.forEach((note, n) => {
    if (!note || !note.note) return;
    const li = el("li", `frame ${n}: ${note.note}`);
    li.dataset.frame = n;
    li.addEventListener("click", () => R.seek(n));
    items.push(li);
  });
  list.replaceChildren(...items);
}

/** Draws the annotation of the frame replay `R` shows (nothing for a plain replay). */
export function drawAnnotation(R) {
  const a = R.index.annotation;
  const panel = $("annotation-panel");
  if (!a || !R.index.move_notes || !R.index.move_notes.length) {
    panel.hidden = true;
    return;
  }
  panel.hidden = false;
  if (listed !== R.name) {
    listed = R.name;
    setText("ann-title", a.title);
    listBigSpends(R);
  }
  if (shown === R.n) return;
  shown = R.n;
  const note = R.index.move_notes[R.n];
  const rows = annotationRows(note, a.sides);
  $("ann-rows").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", k), el("dd", v)]));
  setText("ann-note", note && note.note ? `big spend: ${note.note}` : "");
  for (const li of $("ann-big").children) li.classList.toggle("current", Number(li.dataset.frame) === R.n);
}
