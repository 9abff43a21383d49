// Shared board drawing: canvas helpers, the helpers of board games played by clicking cells,
// and the generic grid renderer. Each game's own drawing is web/games/<module>.js, named by
// the game description (`spec.view.module`, from the game's registry record); a game without
// a module is drawn by GRID. A game module exports PALETTE, layout(f, view) (canvas size and
// cell centres in CSS pixels), draw(ctx, f, L, annot, view), annotate(prev, f, prevAnnot,
// view) (what one frame alone does not say: a heading, the last move, captures, a pass) and
// caption(f, annot, view); `f` is a frame's rendered state (games/render.py). A click on a
// board game's canvas plays the action of the nearest cell (actionAt below, web/play.js).

// The board characters of the two colours (games/render.py STONE), and of an empty point.
export const STONE_CHARS = ["x", "o"];
const EMPTY_POINT = ".";

export function rect(ctx, x, y, w, h, colour) {
  ctx.fillStyle = colour;
  ctx.fillRect(x, y, w, h);
}

export function disc(ctx, x, y, r, colour) {
  ctx.beginPath();
  ctx.arc(x, y, r, 0, 2 * Math.PI);
  ctx.fillStyle = colour;
  ctx.fill();
}

/** Square cells of at most `maxCell` pixels, the longer side at most `maxSide`. */
export function gridLayout(rows, cols, maxCell, maxSide = 560) {
  const cell = Math.max(6, Math.min(maxCell, Math.floor(maxSide / Math.max(rows, cols))));
  return {
    width: cols * cell,
    height: rows * cell,
    cell,
    center: (r, c) => [(c + 0.5) * cell, (r + 0.5) * cell],
  };
}

/** The annotation of a frame with nothing new: the previous one's, or the empty one. */
export function carryAnnot(prevAnnot) {
  const annot = { heading: "right", lastMoves: [], captures: [0, 0], event: null, moveCost: null };
  if (prevAnnot) {
    annot.heading = prevAnnot.heading;
    annot.captures = prevAnnot.captures.slice();
    annot.lastMoves = prevAnnot.lastMoves;
    annot.event = prevAnnot.event;
    annot.moveCost = prevAnnot.moveCost;
    annot.mover = prevAnnot.mover;
  }
  return annot;
}

/** True when `f` is a later frame of the same game than `prev` (something to annotate). */
export function advanced(prev, f) {
  return Boolean(prev) && prev.game === f.game && f.frame > prev.frame;
}

// Board games played by clicking cells (the description's `view.board`) ---------------------

/** The name of cell (r, c): the action it plays, named as the game names its actions. */
export function cellName(view, names, [r, c]) {
  return names[view.board.actions[r][c]];
}

/** The action of the cell nearest (x, y) (CSS pixels on the board), or -1 if none is near. */
export function actionAt(x, y, f, L, view) {
  if (!view.board) return -1;
  let best = -1;
  let bestD = (0.6 * L.cell) ** 2;
  view.board.actions.forEach((row, r) => {
    row.forEach((action, c) => {
      const [cx, cy] = L.center(r, c);
      const d = (cx - x) ** 2 + (cy - y) ** 2;
      if (d < bestD) [best, bestD] = [action, d];
    });
  });
  return best;
}

/** A ring of `radius` pixels in `colour` on each cell of the last move (`annot.lastMoves`). */
export function markLastMoves(ctx, L, annot, radius, colour) {
  for (const [r, c] of (annot && annot.lastMoves) || []) {
    const [x, y] = L.center(r, c);
    ctx.beginPath();
    ctx.arc(x, y, radius, 0, 2 * Math.PI);
    ctx.strokeStyle = colour;
    ctx.lineWidth = 2.5;
    ctx.stroke();
  }
}

/** Stones placed and taken since `prev`, and what the move cost its mover's clock. `swapped`:
 * a move that adds stones without changing their count is a swap (Hex), else nothing. */
export function stoneAnnotate(prev, f, prevAnnot, { swaps = false } = {}) {
  const annot = carryAnnot(prevAnnot);
  if (!advanced(prev, f)) return annot;
  const added = [];
  const removed = [0, 0];
  let changed = false;
  f.board.forEach((row, r) => {
    for (let c = 0; c < row.length; c++) {
      const was = prev.board[r][c];
      const now = row[c];
      if (was === now) continue;
      changed = true;
      if (now !== EMPTY_POINT) added.push([r, c]);
      if (was !== EMPTY_POINT && now === EMPTY_POINT) removed[STONE_CHARS.indexOf(was)] += 1;
    }
  });
  annot.lastMoves = added;
  annot.captures[0] += removed[1]; // stones a colour took are the other colour's
  annot.captures[1] += removed[0];
  const stones = (b) => b.join("").replaceAll(EMPTY_POINT, "").length;
  if (!changed) annot.event = "pass";
  else if (swaps && added.length && stones(f.board) === stones(prev.board)) annot.event = "swap";
  else annot.event = null;
  if (f.clocks) {
    const mover = prev.to_play;
    annot.moveCost = prev.clocks[mover] - f.clocks[mover];
    annot.mover = mover;
  }
  return annot;
}

/** A stone game's move in the move list: the action's name ("c3", "pass", "swap"). */
export function stoneMoveLabel(action, names) {
  return names[action] ?? String(action);
}

/** The colour of budget `i` of `count` (index order): blue for the smallest, red for the largest,
 * so that a game with 7 budgets (Hex: 2 to 128) reads as well as one with 2. */
export function budgetColour(i, count) {
  const t = count > 1 ? i / (count - 1) : 0;
  return `hsl(${Math.round(210 - 200 * t)}, 70%, ${Math.round(58 - 6 * t)}%)`;
}

/** Who is to play, the last move by its cell names, captures if asked, a loss on time. */
export function stoneCaption(f, annot, view, names, { captures = false } = {}) {
  const colours = view.colour_names;
  const parts = [`${colours[f.to_play_colour]} to play`];
  if (annot.event) parts.push(`last move: ${annot.event}`);
  else if (annot.lastMoves.length) {
    parts.push(`last move ${annot.lastMoves.map((cell) => cellName(view, names, cell)).join(" ")}`);
  }
  if (captures) {
    parts.push(`captures ${colours[0]} ${annot.captures[0]} · ${colours[1]} ${annot.captures[1]}`);
  }
  if (f.timed_out) parts.push("time out");
  return parts.join(" · ");
}

// The generic grid renderer ---------------------------------------------------------------

// Each character other than an empty one gets the next of these colours, in order of first
// appearance on the page (so a character keeps its colour for the whole session).
const GRID_COLOURS = ["#4fb3ff", "#f2d600", "#5bd68a", "#ff6b6b", "#c77dff", "#ffb347", "#e9dfc7"];
const GRID_EMPTY = [" ", "."];

/** Draws any game whose rendered frame has a `board` of equal-length strings: one square
 * cell per character, empty (" " or ".") cells blank. */
export function makeGrid() {
  const cells = {};
  const colourOf = (ch) => (cells[ch] ||= GRID_COLOURS[Object.keys(cells).length % GRID_COLOURS.length]);
  return {
    PALETTE: { background: "#0c1014", grid: "#1c242c", cells },
    layout: (f) => gridLayout(f.board.length, f.board[0].length, 40),
    draw(ctx, f, L) {
      const s = L.cell;
      rect(ctx, 0, 0, L.width, L.height, "#0c1014");
      f.board.forEach((row, r) => {
        for (let c = 0; c < row.length; c++) {
          rect(ctx, c * s + 0.5, r * s + 0.5, s - 1, s - 1, "#1c242c");
          if (!GRID_EMPTY.includes(row[c])) rect(ctx, c * s + 2, r * s + 2, s - 4, s - 4, colourOf(row[c]));
        }
      });
    },
    annotate: (prev, f, prevAnnot) => carryAnnot(prevAnnot),
    caption: (f) => (f.score !== undefined ? `score ${f.score}` : `frame ${f.frame}`),
    colourOf,
  };
}

/** The drawing module the game description names (`view.module`), or a generic grid. */
export async function loadGame(view) {
  if (view && view.module) {
    try {
      return await import(`./games/${encodeURIComponent(view.module)}.js`);
    } catch (e) {
      console.warn(`no drawing module ${view.module}: the generic grid draws it`, e);
    }
  }
  return makeGrid();
}
