// Tetris (tetris-rt-v0): the well's grid, locked cells, and the falling piece in its colour.

import { carryAnnot, gridLayout, rect } from "../draw.js";

export const PALETTE = {
  background: "#0c1014",
  grid: "#1c242c",
  locked: "#7d8796",
  pieces: {
    I: "#00d0e8", O: "#f2d600", T: "#b04de0", S: "#34c759",
    Z: "#f0413c", J: "#3566f0", L: "#ff9500",
  },
};

export function layout(f) {
  return gridLayout(f.board.length, f.board[0].length, 24);
}

function block(ctx, x, y, s, colour) {
  rect(ctx, x + 1, y + 1, s - 2, s - 2, colour);
  ctx.fillStyle = "rgba(255,255,255,0.25)";
  ctx.fillRect(x + 1, y + 1, s - 2, 3);
  ctx.fillStyle = "rgba(0,0,0,0.25)";
  ctx.fillRect(x + 1, y + s - 4, s - 2, 3);
}

export function draw(ctx, f, L) {
  const P = PALETTE;
  const s = L.cell;
  rect(ctx, 0, 0, L.width, L.height, P.background);
  ctx.strokeStyle = P.grid;
  ctx.lineWidth = 1;
  for (let c = 1; c < f.board[0].length; c++) {
    ctx.beginPath();
    ctx.moveTo(c * s + 0.5, 0);
    ctx.lineTo(c * s + 0.5, L.height);
    ctx.stroke();
  }
  for (let r = 1; r < f.board.length; r++) {
    ctx.beginPath();
    ctx.moveTo(0, r * s + 0.5);
    ctx.lineTo(L.width, r * s + 0.5);
    ctx.stroke();
  }
  f.board.forEach((row, r) => {
    for (let c = 0; c < row.length; c++) if (row[c] !== " ") block(ctx, c * s, r * s, s, P.locked);
  });
  const colour = P.pieces[f.piece] || "#ffffff";
  for (const [r, c] of f.piece_cells) block(ctx, c * s, r * s, s, colour);
}

export function annotate(prev, f, prevAnnot) {
  return carryAnnot(prevAnnot);
}

export function caption(f) {
  return `score ${f.score} · lines ${f.lines} · piece ${f.piece}`;
}
