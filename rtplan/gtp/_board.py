"""Go board judgements the engine makes on the host: own eyes, dead stones, the area count."""

from __future__ import annotations

import numpy as np

from rtplan.games.go import SIZE


def neighbours(point: int) -> list[int]:
    """The on-board orthogonal neighbours of a point (row * 9 + col)."""
    r, c = divmod(point, SIZE)
    out = []
    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        if 0 <= r + dr < SIZE and 0 <= c + dc < SIZE:
            out.append((r + dr) * SIZE + c + dc)
    return out


def own_eye(board: np.ndarray, point: int) -> bool:
    """Whether `point` is an eye of the player whose stones are +1 on `board` `[81]` (-1 the
    opponent's, 0 empty): empty, every orthogonal neighbour ours, and at most one diagonal the
    opponent's (none on the edge), the usual rule of thumb for an eye that is not false.
    Filling one is never a useful move under area scoring."""
    if board[point] != 0 or any(board[n] != 1 for n in neighbours(point)):
        return False
    r, c = divmod(point, SIZE)
    diagonals = [
        (r + dr) * SIZE + c + dc
        for dr in (-1, 1)
        for dc in (-1, 1)
        if 0 <= r + dr < SIZE and 0 <= c + dc < SIZE
    ]
    theirs = sum(board[d] == -1 for d in diagonals)
    return theirs == 0 if len(diagonals) < 4 else theirs <= 1


#: `dead_stones` judges a region only up to this many points (five of the nine columns): in a
#: larger one the enclosed side may still live, or the game is far from over.
MAX_REGION = 45
#: An eye space of at least this many points counts as two eyes (room to make them).
BIG_EYE = 7


def _components(points: set[int]) -> list[set[int]]:
    """The orthogonally connected components of a set of points."""
    left, out = set(points), []
    while left:
        todo, comp = [left.pop()], set()
        while todo:
            p = todo.pop()
            comp.add(p)
            for n in neighbours(p):
                if n in left:
                    left.discard(n)
                    todo.append(n)
        out.append(comp)
    return out


def _enclosed(board: np.ndarray, sign: int, fixed: np.ndarray) -> list[set[int]]:
    """The regions (as point sets) where colour `sign`'s stones enclose stones of -`sign`
    without two eyes (see `dead_stones`); stones marked in `fixed` `[81]` (seki) never die."""
    out = []
    for region in _components({p for p in range(SIZE * SIZE) if board[p] != sign}):
        if len(region) > MAX_REGION or not any(board[p] == -sign and not fixed[p] for p in region):
            continue
        eyes = 0
        for space in _components({p for p in region if board[p] == 0}):
            if all(board[n] != sign for p in space for n in neighbours(p)):
                eyes += 2 if len(space) >= BIG_EYE else 1
        if eyes < 2:
            out.append(region)
    return out


def dead_stones(board: np.ndarray) -> np.ndarray:
    """`[81]` bool: the stones estimated dead on `board` `[81]` (+1 black, -1 white, 0 empty).

    A region is a connected set of points that are not colour c's stones (empty points and
    the other colour's stones), bounded by c's stones and the edge. The other colour's stones
    in a region of at most `MAX_REGION` points are dead when they have fewer than two eyes
    there (an eye: a pocket of empty points of the region touching none of c's stones; one of
    `BIG_EYE` points or more counts as two). Regions are judged smallest first, each time on
    the board with the stones found dead so far removed, so a dead stone inside an area does
    not spoil the eyes of the area's owner. Stones in `seki_stones` are never dead.
    """
    board = np.array(board)
    seki = seki_stones(board)
    dead = np.zeros(SIZE * SIZE, bool)
    while True:
        regions = [r for sign in (1, -1) for r in _enclosed(board, sign, seki)]
        if not regions:
            return dead
        region = min(regions, key=len)
        stones = [p for p in region if board[p] != 0 and not seki[p]]
        dead[stones] = True
        board[stones] = 0


def seki_stones(board: np.ndarray) -> np.ndarray:
    """`[81]` bool: the stones estimated to live in seki on `board` `[81]` (+1 black, -1
    white, 0 empty).

    Two adjacent groups of opposite colours are in seki when they share liberties and filling
    any shared liberty would be a `self_atari` for either colour (neither side can approach:
    the group that fills is taken next), and neither group has two eyes: an empty point
    touching only its stones, or one such pocket of `BIG_EYE` points (a group with two eyes is
    alive, and the other can then be filled in). A capturing race where one side has an outside
    liberty more is not a seki: that side fills without putting itself in atari.
    """
    board = np.asarray(board)
    groups: dict[int, frozenset[int]] = {}
    for p in np.flatnonzero(board):
        if int(p) not in groups:
            group = frozenset(_group(board, int(p)))
            groups.update(dict.fromkeys(group, group))
    seki = np.zeros(SIZE * SIZE, bool)
    # Filling a liberty of a group with 3+ liberties leaves it 2+: no self-atari, no seki.
    libs = {g: _liberties(board, set(g)) for g in set(groups.values())}
    short = {g for g, lib in libs.items() if len(lib) <= 2}
    for group in short:
        colour = board[next(iter(group))]
        if _eyes(board, group) >= 2:
            continue
        for other in {groups[n] for p in group for n in neighbours(p) if board[n] == -colour}:
            shared = libs[group] & libs[other]
            if other not in short or not shared or _eyes(board, other) >= 2:
                continue
            if all(self_atari(board * s, p) > 0 for p in shared for s in (1, -1)):
                seki[list(group)] = seki[list(other)] = True
    return seki


def _eyes(board: np.ndarray, group: frozenset[int]) -> int:
    """Eyes of `group`: pockets of empty points next to it that touch only its colour's stones
    (a pocket of `BIG_EYE` points or more counts as two)."""
    colour = board[next(iter(group))]
    eyes, seen = 0, set()
    for lib in _liberties(board, set(group)):
        if lib in seen:
            continue
        pocket = _pocket(board, lib)
        seen |= pocket
        if all(board[n] in (0, colour) for p in pocket for n in neighbours(p)):
            eyes += 2 if len(pocket) >= BIG_EYE else 1
    return eyes


def _pocket(board: np.ndarray, point: int) -> set[int]:
    """The connected empty points around the empty `point`."""
    pocket, todo = {point}, [point]
    while todo:
        for n in neighbours(todo.pop()):
            if board[n] == 0 and n not in pocket:
                pocket.add(n)
                todo.append(n)
    return pocket


#: `stone_status` codes.
EMPTY, ALIVE, DEAD, SEKI = 0, 1, 2, 3


def stone_status(board: np.ndarray) -> np.ndarray:
    """`[81]` int: `ALIVE`, `DEAD` (`dead_stones`) or `SEKI` (`seki_stones`) per stone of
    `board` `[81]` (+1 black, -1 white, 0 empty), `EMPTY` elsewhere: GTP's
    `final_status_list` and the stones `final_score` removes."""
    status = np.where(board != 0, ALIVE, EMPTY)
    status[seki_stones(board)] = SEKI
    status[dead_stones(board)] = DEAD
    return status


def groups_of(board: np.ndarray, points: np.ndarray) -> list[list[int]]:
    """The stones of `points` `[81]` bool split into their groups on `board` `[81]` (each
    sorted; groups in order of their first point)."""
    out, seen = [], set()
    for p in np.flatnonzero(points):
        if int(p) in seen:
            continue
        group = sorted(q for q in _group(board, int(p)) if points[q])
        seen |= set(group)
        out.append(group)
    return out


def area_score(board: np.ndarray) -> tuple[int, int]:
    """(black, white) area: stones plus empty regions that reach only that colour (pgx's
    count) on `board` `[81]` (+1 black, -1 white, 0 empty)."""
    score = {1: int((board == 1).sum()), -1: int((board == -1).sum())}
    for space in _components({p for p in range(SIZE * SIZE) if board[p] == 0}):
        reach = {int(board[n]) for p in space for n in neighbours(p)} - {0}
        if len(reach) == 1:
            score[reach.pop()] += len(space)
    return score[1], score[-1]


def _group(board: np.ndarray, point: int) -> set[int]:
    """The stones connected to the stone at `point` (same colour, orthogonally)."""
    colour, group, todo = board[point], {point}, [point]
    while todo:
        for n in neighbours(todo.pop()):
            if board[n] == colour and n not in group:
                group.add(n)
                todo.append(n)
    return group


def _liberties(board: np.ndarray, group: set[int]) -> set[int]:
    return {n for p in group for n in neighbours(p) if board[n] == 0}


def self_atari(board: np.ndarray, point: int) -> int:
    """How many of the mover's stones its stone at empty `point` puts in atari: when the group
    it joins is left with one liberty or none (after removing the opponent's stones it
    captures), the new stone plus the stones of the groups it joins that had two liberties or
    more (a group already in atari loses nothing by trying to run); else 0. `board` `[81]` is
    the mover's view (+1 its stones, -1 the opponent's). Such a move fills the last shared
    liberty of a seki or a capturing race: the opponent takes the group next."""
    after = board.copy()
    after[point] = 1
    for n in neighbours(point):
        if after[n] == -1:
            group = _group(after, n)
            if not _liberties(after, group):
                after[list(group)] = 0
    if len(_liberties(after, _group(after, point))) >= 2:
        return 0
    joined = {frozenset(_group(board, n)) for n in neighbours(point) if board[n] == 1}
    return 1 + sum(len(g) for g in joined if len(_liberties(board, set(g))) >= 2)


def mover_margin(board: np.ndarray, black_to_move: bool, komi: float) -> float:
    """The area count's margin (black - white - komi) from the mover's side, on `board` `[81]`
    (+1 black, -1 white, 0 empty): positive, the mover wins by that count."""
    black, white = area_score(board)
    margin = black - white - komi
    return margin if black_to_move else -margin


def capture_move(board: np.ndarray, legal: np.ndarray) -> int | None:
    """A move that takes a liberty of the opponent's stones estimated dead (`dead_stones`), or
    None when there is none to take safely. `board` `[81]` is the mover's view (+1 the mover's
    stones, -1 the opponent's); `legal` `[>= 81]` the legal points.

    The move is a liberty of the dead group with the fewest liberties (a capture when it has one
    left), never one of the mover's own eyes, and never a `self_atari`. Under area scoring
    filling one's own area costs nothing, so these moves only turn stones that the game's own
    count would call alive into captures.
    """
    dead = dead_stones(board) & (board == -1)
    best: tuple[int, int] | None = None
    seen: set[int] = set()
    for stone in np.flatnonzero(dead):
        if stone in seen:
            continue
        group = _group(board, int(stone))
        seen |= group
        libs = _liberties(board, group)
        for point in sorted(libs):
            if not legal[point] or own_eye(board, point):
                continue
            if self_atari(board, point) > 0:
                continue  # the opponent could punish it
            if best is None or len(libs) < best[0]:
                best = (len(libs), point)
    return None if best is None else best[1]
