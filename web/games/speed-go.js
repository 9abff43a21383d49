// Speed Go (speed-go-v0): lines, star points, the GTP coordinates of the game description on
// the edges, stones, the last move marked. A person plays by clicking a point (or pass).

import { STONE_CHARS, stoneMoveLabel, disc, markLastMoves, rect, stoneAnnotate, stoneCaption } from "../draw.js";

export const PALETTE = { board: "#dcb35c", line: "#3a2c10", stones: ["#111111", "#f2f2f2"], mark: "#e0303a" };

/** The board's geometry, and its coordinates (`labels`: [text, x, y] of each column's letter
 * above the top line and each row's number left of its first point, the GTP vertex names of the
 * game description: columns A-J without I, rows counted from the bottom). */
export function layout(f, view) {
  const n = f.board.length;
  const cell = Math.floor(480 / (n + 1));
  const m = cell;
  const center = (r, c) => [m + c * cell, m + r * cell];
  const labels = [];
  const board = view && view.board;
  if (board && board.columns && board.rows) {
    for (let i = 0; i < n; i++) {
      labels.push([board.columns[i], center(0, i)[0], 0.45 * cell]);
      labels.push([board.rows[i], 0.45 * cell, center(i, 0)[1]]);
    }
  }
  return {
    width: 2 * m + (n - 1) * cell,
    height: 2 * m + (n - 1) * cell,
    cell,
    center,
    labels,
  };
}

export function draw(ctx, f, L, annot, view) {
  const P = PALETTE;
  const n = f.board.length;
  const s = L.cell;
  rect(ctx, 0, 0, L.width, L.height, P.board);
  ctx.strokeStyle = P.line;
  ctx.lineWidth = 1.2;
  for (let i = 0; i < n; i++) {
    const [x0, y0] = L.center(i, 0);
    const [x1, y1] = L.center(i, n - 1);
    ctx.beginPath();
    ctx.moveTo(x0, y0);
    ctx.lineTo(x1, y1);
    ctx.stroke();
    const [u0, v0] = L.center(0, i);
    const [u1, v1] = L.center(n - 1, i);
    ctx.beginPath();
    ctx.moveTo(u0, v0);
    ctx.lineTo(u1, v1);
    ctx.stroke();
  }
  if (n === 9) {
    for (const [r, c] of [[2, 2], [2, 6], [6, 2], [6, 6], [4, 4]]) {
      disc(ctx, ...L.center(r, c), 0.08 * s, P.line);
    }
  }
  ctx.fillStyle = P.line;
  ctx.font = `${Math.round(0.28 * s)}px system-ui, sans-serif`;
  ctx.textAlign = "center";
  ctx.textBaseline = "middle";
  for (const [text, x, y] of L.labels) ctx.fillText(text, x, y);
  for (let r = 0; r < n; r++) {
    for (let c = 0; c < n; c++) {
      const k = STONE_CHARS.indexOf(f.board[r][c]);
      if (k < 0) continue;
      const [x, y] = L.center(r, c);
      disc(ctx, x, y, 0.46 * s, P.stones[k]);
      ctx.lineWidth = 1;
      ctx.strokeStyle = "#000000";
      ctx.stroke();
    }
  }
  markLastMoves(ctx, L, annot, 0.2 * s, P.mark);
}

/** The last move or a pass, and captures (stones taken from the board). */
export function annotate(prev, f, prevAnnot) {
  return stoneAnnotate(prev, f, prevAnnot);
}

export function caption(f, annot, view, names) {
  return stoneCaption(f, annot, view, names, { captures: true });
}

/** A move in the move list (web/thinking.js): the action's name. */
export const moveLabel = stoneMoveLabel;
