// Snake (snake-rt-v0): a checkered field, the body, the head with its eyes, the fruit.

import { carryAnnot, disc, gridLayout, rect } from "../draw.js";

export const PALETTE = {
  background: "#0f1a12", grid: "#16261a", body: "#49c46a", head: "#1d7a38", fruit: "#f0384f",
};

export function layout(f) {
  return gridLayout(f.board.length, f.board[0].length, 40, 480);
}

export function draw(ctx, f, L) {
  const P = PALETTE;
  const s = L.cell;
  rect(ctx, 0, 0, L.width, L.height, P.background);
  f.board.forEach((row, r) => {
    for (let c = 0; c < row.length; c++) {
      if ((r + c) % 2) rect(ctx, c * s, r * s, s, s, P.grid);
      if (row[c] === "s") rect(ctx, c * s + 2, r * s + 2, s - 4, s - 4, P.body);
    }
  });
  const [fx, fy] = L.center(f.fruit[0], f.fruit[1]);
  disc(ctx, fx, fy, 0.36 * s, P.fruit);
  const [hr, hc] = f.head;
  if (hr >= 0 && hr < f.board.length && hc >= 0 && hc < f.board[0].length) {
    const [x, y] = L.center(hr, hc);
    rect(ctx, hc * s + 1, hr * s + 1, s - 2, s - 2, P.head);
    disc(ctx, x - 0.2 * s, y - 0.2 * s, 0.08 * s, "#ffffff");
    disc(ctx, x + 0.2 * s, y - 0.2 * s, 0.08 * s, "#ffffff");
  }
}

export function annotate(prev, f, prevAnnot) {
  return carryAnnot(prevAnnot);
}

export function caption(f) {
  return `length ${f.length} · score ${f.score}`;
}
