// Speed Hex (speed-hex-v0): an n x n rhombus of pointy-top hexagons; cell (r, c) neighbours
// (r, c +- 1), (r - 1, c), (r - 1, c + 1), (r + 1, c - 1), (r + 1, c) as in pgx hex. The goal
// edges are the game's (`view.goal_edges`, from games/hex.py): colour 0 ("x", red, the first to
// move) joins rows 0 and n-1 (the top and bottom edges), colour 1 ("o", blue) columns 0 and n-1
// (left and right). Columns are lettered above the board, rows numbered on its left, as the move
// list names cells (f6). A person plays by clicking a cell (or the swap button).

import { STONE_CHARS, stoneMoveLabel, markLastMoves, rect, stoneAnnotate, stoneCaption } from "../draw.js";

export const PALETTE = {
  background: "#1a2027", empty: "#e9dfc7", line: "#6b6254", stones: ["#d8383b", "#2f6fd6"],
  mark: "#ffffff", label: "#c9d1d9",
};

const LABELS = 16; // the band of the coordinates, above the board and left of it (CSS pixels)

/** The board's geometry, and its coordinates (`labels`: [text, x, y] of each column's letter
 * above the top row and each row's number left of its first cell, as the move list names cells). */
export function layout(f, view) {
  const n = f.board.length;
  const R = Math.floor(470 / (Math.sqrt(3) * (1.5 * n - 0.5)));
  const w = Math.sqrt(3) * R;
  const m = R + 6;
  const center = (r, c) => [LABELS + m + w / 2 + (c + r / 2) * w, LABELS + m + R + 1.5 * R * r];
  const labels = [];
  const board = view && view.board;
  if (board && board.columns && board.rows) {
    for (let i = 0; i < n; i++) {
      const [x, y] = center(0, i);
      labels.push([board.columns[i], x, y - R - LABELS / 2 - 8]);
      const [u, v] = center(i, 0);
      labels.push([board.rows[i], u - w / 2 - LABELS / 2 - 9, v]);
    }
  }
  return {
    width: Math.ceil(LABELS + 2 * m + w * (1.5 * n - 0.5)),
    height: Math.ceil(LABELS + 2 * m + R * (1.5 * n + 0.5)),
    cell: w,
    radius: R,
    center,
    labels,
  };
}

function hexPath(ctx, x, y, R) {
  ctx.beginPath();
  for (let i = 0; i < 6; i++) {
    const a = Math.PI / 6 + (i * Math.PI) / 3;
    ctx.lineTo(x + R * Math.cos(a), y + R * Math.sin(a));
  }
  ctx.closePath();
}

/** The four goal edges as [from, to, colour]: each colour's two edges in its stones' colour,
 * as the game's `goal_edges` say ("rows": the top and bottom edges, "columns": left and right). */
export function goalEdges(L, n, view) {
  const R = L.radius;
  const corner = (r, c, dx, dy) => {
    const [x, y] = L.center(r, c);
    return [x + dx, y + dy];
  };
  const tl = corner(0, 0, -L.cell / 2 - 4, -R - 4);
  const tr = corner(0, n - 1, L.cell / 2 + 4, -R - 4);
  const br = corner(n - 1, n - 1, L.cell / 2 + 4, R + 4);
  const bl = corner(n - 1, 0, -L.cell / 2 - 4, R + 4);
  const sides = { rows: [[tl, tr], [bl, br]], columns: [[tl, bl], [tr, br]] };
  // A replay recorded before the description carried them: pgx's rule (games/hex.py).
  const goals = view && view.goal_edges && view.goal_edges.length === 2
    ? view.goal_edges : ["rows", "columns"];
  return goals.flatMap((which, colour) => sides[which].map(([a, b]) => [a, b, colour]));
}

export function draw(ctx, f, L, annot, view) {
  const P = PALETTE;
  const n = f.board.length;
  const R = L.radius;
  rect(ctx, 0, 0, L.width, L.height, P.background);
  // The goal edges, drawn under the outer hexagons.
  ctx.lineWidth = 8;
  for (const [a, b, k] of goalEdges(L, n, view)) {
    const colour = P.stones[k];
    ctx.beginPath();
    ctx.moveTo(...a);
    ctx.lineTo(...b);
    ctx.strokeStyle = colour;
    ctx.stroke();
  }
  ctx.lineWidth = 1.5;
  ctx.strokeStyle = P.line;
  for (let r = 0; r < n; r++) {
    for (let c = 0; c < n; c++) {
      const [x, y] = L.center(r, c);
      const k = STONE_CHARS.indexOf(f.board[r][c]);
      hexPath(ctx, x, y, R);
      ctx.fillStyle = k >= 0 ? P.stones[k] : P.empty;
      ctx.fill();
      ctx.stroke();
    }
  }
  markLastMoves(ctx, L, annot, 0.3 * R, P.mark);
  ctx.fillStyle = P.label;
  ctx.font = "11px system-ui, sans-serif";
  ctx.textAlign = "center";
  ctx.textBaseline = "middle";
  for (const [text, x, y] of L.labels) ctx.fillText(text, x, y);
}

/** The last move, or a swap (stones recoloured, none added). */
export function annotate(prev, f, prevAnnot) {
  return stoneAnnotate(prev, f, prevAnnot, { swaps: true });
}

export function caption(f, annot, view, names) {
  return stoneCaption(f, annot, view, names);
}

/** A move in the move list (web/thinking.js): the action's name. */
export const moveLabel = stoneMoveLabel;
