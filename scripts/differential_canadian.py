#!/usr/bin/env python3
"""Differential test of the engine's canadian move generator against an independent referee (opt-in).

No published program that we could run implements Canadian draughts (pydraughts and Scan do not), so this
script carries its own referee: a small, slow, deliberately plain move generator written from the rule book
(docs/rules.md §12.2: the rules of international draughts, §3 and §3.3, on a 12x12 board), NOT from the
engine's code. It works on (file, rank) coordinates and Python sets, with none of the engine's bit layout,
shifts, precedence keys or path merging:

- the board: 12x12, a1 (file 0, rank 0) dark; the playable squares are those with (file + rank) even;
  PDN numbers 1..72 row by row from White's top-left, six a row (1 = b12, 6 = l12, 67 = a1, 72 = k1);
- White (on ranks 1-5 at the start) moves up, Black down; a man steps one square diagonally forward;
- a man captures an adjacent opponent piece diagonally, forward or backward, landing on the empty square
  just beyond; a king (flying) captures the first piece along a diagonal if every square between is empty
  and lands on any empty square beyond it up to the next piece or the edge;
- captured pieces stay on the board until the end of the move (they block their squares and can't be
  jumped twice); the moving piece's origin square counts as empty during its chain;
- a chain goes on while the piece can capture again; a man passing the last row during a chain stays a man
  and is crowned only if the move ends there;
- capture is mandatory, and only the captures taking the most pieces are legal (a king counts one);
- a move is the triple (from, to, set of captured squares): chains with the same triple are one move
  (docs/rules.md §6.1).

For many random positions the script compares the SET of legal moves of `draughts moves --variant canadian
--json` with the referee's, reports every difference (and any duplicate in the engine's list), and checks
that `draughts play` leaves the position the referee computes (pieces, crowning, side to move). Positions
come from random playouts from the start position and from random placements of men and kings.

Usage:
    python3 scripts/differential_canadian.py --positions 3000 --seed 1 --binary target/release/draughts

Exits 1 if any mismatch (or engine error) was found, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import subprocess
import sys
import time

SIZE = 12
PER_ROW = SIZE // 2
FILES = "abcdefghijkl"
DIAGONALS = [(-1, 1), (1, 1), (1, -1), (-1, -1)]
MAX_MEN = 30

# ------------------------------------------------------------------------------------------------- the board


def number_to_square(n):
    row, c = divmod(n - 1, PER_ROW)  # row from the top as White sees the board
    f = 2 * c + 1 if row % 2 == 0 else 2 * c
    return (f, SIZE - 1 - row)


SQUARES = [number_to_square(n) for n in range(1, SIZE * PER_ROW + 1)]
NUMBER = {sq: n for n, sq in enumerate(SQUARES, start=1)}
assert all((f + r) % 2 == 0 for f, r in SQUARES) and len(set(SQUARES)) == 72


def on_board(f, r):
    return 0 <= f < SIZE and 0 <= r < SIZE


def name(sq):
    return f"{FILES[sq[0]]}{sq[1] + 1}"


def parse_name(text):
    return (FILES.index(text[0]), int(text[1:]) - 1)


def promotion_rank(colour):
    return SIZE - 1 if colour == "W" else 0


# ----------------------------------------------------------------------------------------------- the referee


def referee_moves(side, pieces):
    """Legal moves as {(from, to, frozenset(captured)): crowned}. `pieces`: {square: (colour, king)}."""
    other = "B" if side == "W" else "W"
    captures = []  # (from, to, captured tuple in order)

    def man_chain(origin, at, taken):
        extended = False
        for df, dr in DIAGONALS:
            over = (at[0] + df, at[1] + dr)
            land = (at[0] + 2 * df, at[1] + 2 * dr)
            if not on_board(*land) or over in taken:
                continue
            p = pieces.get(over)
            if p is None or p[0] != other:
                continue
            if land != origin and land in pieces:
                continue
            extended = True
            man_chain(origin, land, taken + (over,))
        if not extended and taken:
            captures.append((origin, at, taken))

    def king_chain(origin, at, taken):
        extended = False
        for df, dr in DIAGONALS:
            f, r = at[0] + df, at[1] + dr
            while on_board(f, r) and ((f, r) == origin or (f, r) not in pieces):
                f, r = f + df, r + dr
            if not on_board(f, r):
                continue
            over = (f, r)
            p = pieces[over]
            if p[0] != other or over in taken:
                continue
            f, r = f + df, r + dr
            while on_board(f, r) and ((f, r) == origin or (f, r) not in pieces):
                extended = True
                king_chain(origin, (f, r), taken + (over,))
                f, r = f + df, r + dr
        if not extended and taken:
            captures.append((origin, at, taken))

    for sq, (colour, king) in pieces.items():
        if colour != side:
            continue
        if king:
            king_chain(sq, sq, ())
        else:
            man_chain(sq, sq, ())

    moves = {}
    if captures:
        most = max(len(t) for _, _, t in captures)
        for origin, to, taken in captures:
            if len(taken) == most:
                king = pieces[origin][1]
                crowned = not king and to[1] == promotion_rank(side)
                moves[(origin, to, frozenset(taken))] = crowned
        return moves
    forward = 1 if side == "W" else -1
    for sq, (colour, king) in pieces.items():
        if colour != side:
            continue
        if king:
            for df, dr in DIAGONALS:
                f, r = sq[0] + df, sq[1] + dr
                while on_board(f, r) and (f, r) not in pieces:
                    moves[(sq, (f, r), frozenset())] = False
                    f, r = f + df, r + dr
        else:
            for df in (-1, 1):
                to = (sq[0] + df, sq[1] + forward)
                if on_board(*to) and to not in pieces:
                    moves[(sq, to, frozenset())] = to[1] == promotion_rank(side)
    return moves


def referee_play(side, pieces, move, crowned):
    origin, to, taken = move
    new = dict(pieces)
    colour, king = new.pop(origin)
    for t in taken:
        del new[t]
    new[to] = (colour, king or crowned)
    return ("B" if side == "W" else "W"), new


# ------------------------------------------------------------------------------------------------ positions


def fen(side, pieces):
    def field(colour):
        out = []
        for sq in sorted((s for s, p in pieces.items() if p[0] == colour), key=NUMBER.get):
            out.append(("K" if pieces[sq][1] else "") + str(NUMBER[sq]))
        return colour + ",".join(out)

    return f"{side}:{field('W')}:{field('B')}"


def parse_fen(text):
    side, *fields = text.strip().split(":")
    pieces = {}
    for fld in fields:
        colour, rest = fld[0], fld[1:]
        for tok in filter(None, rest.split(",")):
            king = tok.startswith("K")
            pieces[number_to_square(int(tok.lstrip("K")))] = (colour, king)
    return side, pieces


def start_position():
    pieces = {number_to_square(n): ("B", False) for n in range(1, 31)}
    pieces.update({number_to_square(n): ("W", False) for n in range(43, 73)})
    return "W", pieces


def random_placement(rng):
    """Men and kings on random squares: no man on its own promotion row, at most 30 pieces a side."""
    pieces = {}
    density = rng.choice([0.15, 0.3, 0.45, 0.6])
    king_share = rng.choice([0.0, 0.1, 0.3, 0.6])
    counts = {"W": 0, "B": 0}
    for sq in SQUARES:
        if rng.random() >= density:
            continue
        colour = rng.choice("WB")
        if counts[colour] >= MAX_MEN:
            continue
        king = rng.random() < king_share or sq[1] == promotion_rank(colour)
        pieces[sq] = (colour, king)
        counts[colour] += 1
    for colour in "WB":  # both sides on the board
        if counts[colour] == 0:
            free = [s for s in SQUARES if s not in pieces]
            pieces[rng.choice(free)] = (colour, True)
    return rng.choice("WB"), pieces


# --------------------------------------------------------------------------------------------------- engine


class EngineError(Exception):
    pass


def run_engine(binary, args):
    proc = subprocess.run([binary] + args, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise EngineError(f"{' '.join(args)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def engine_moves(binary, position_fen):
    out = json.loads(run_engine(binary, ["moves", "--variant", "canadian", "--fen", position_fen, "--json"]))
    triples = [
        (parse_name(m["from"]), parse_name(m["to"]), frozenset(parse_name(c) for c in m["captured"]))
        for m in out
    ]
    return triples, {t: m["notation"] for t, m in zip(triples, out)}


def engine_play(binary, position_fen, notation):
    out = json.loads(
        run_engine(binary, ["play", "--variant", "canadian", "--fen", position_fen, "--json", notation])
    )
    return parse_fen(out["fen"])


def show(t):
    frm, to, taken = t
    return f"{name(frm)}-{name(to)}" + (" x" + ",".join(sorted(name(c) for c in taken)) if taken else "")


def compare(binary, side, pieces, stats, mismatches):
    """Compares one position; returns the referee's moves (with the crowning flags) and the engine's texts."""
    position_fen = fen(side, pieces)
    ref = referee_moves(side, pieces)
    ours, notation = engine_moves(binary, position_fen)
    stats["positions"] += 1
    if any(t[2] for t in ref):
        stats["captures"] += 1
        if max(len(t[2]) for t in ref) >= 2:
            stats["multi"] += 1
        stats["longest"] = max(stats["longest"], max(len(t[2]) for t in ref))
    if any(k for _, k in pieces.values()):
        stats["kings"] += 1
    if any(sq in HIGH for sq in pieces) or any(t[1] in HIGH or t[2] & HIGH for t in ref):
        stats["high"] += 1
    if len(set(ours)) != len(ours):
        mismatches.append({"fen": position_fen, "kind": "engine duplicate",
                           "moves": sorted(show(t) for t in ours if ours.count(t) > 1)})
    only_engine = set(ours) - set(ref)
    only_referee = set(ref) - set(ours)
    if only_engine or only_referee:
        mismatches.append({"fen": position_fen, "kind": "move sets differ",
                           "only_engine": sorted(map(show, only_engine)),
                           "only_referee": sorted(map(show, only_referee))})
    return ref, notation


# The squares of ranks 1 and 2 (PDN 61-72), which the engine keeps above bit 63: counted separately.
HIGH = frozenset(number_to_square(n) for n in range(61, 73))


def work_unit(args):
    binary, kind, seed, budget = args
    rng = random.Random(seed)
    stats = {"positions": 0, "captures": 0, "multi": 0, "kings": 0, "high": 0, "longest": 0, "plays": 0}
    mismatches = []
    try:
        if kind == "placement":
            for _ in range(budget):
                side, pieces = random_placement(rng)
                compare(binary, side, pieces, stats, mismatches)
        else:
            side, pieces = start_position()
            done = 0
            while done < budget:
                ref, notation = compare(binary, side, pieces, stats, mismatches)
                done += 1
                if not ref or not notation:
                    side, pieces = start_position()
                    continue
                # Prefer captures (long chains, kings appear sooner) but keep quiet moves.
                moves = sorted(ref, key=show)
                move = rng.choice(moves)
                if move not in notation:
                    side, pieces = start_position()
                    continue
                want = referee_play(side, pieces, move, ref[move])
                got = engine_play(binary, fen(side, pieces), notation[move])
                stats["plays"] += 1
                if got != want:
                    mismatches.append({"fen": fen(side, pieces), "kind": "play differs", "move": show(move),
                                       "engine": fen(*got), "referee": fen(*want)})
                side, pieces = want
                if len(pieces) < 6 or rng.random() < 0.004:
                    side, pieces = start_position()
    except EngineError as e:
        mismatches.append({"kind": "engine error", "error": str(e)})
    return stats, mismatches


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--positions", type=int, default=1000, help="positions compared (default 1000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--binary", default=os.path.join(os.path.dirname(__file__), "..", "target", "release",
                                                      "draughts"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    ap.add_argument("--placement-share", type=float, default=0.5,
                    help="share of the positions from random placements (the rest from playouts)")
    ap.add_argument("--max-print", type=int, default=30)
    args = ap.parse_args()

    unit = 50
    n_units = max(1, (args.positions + unit - 1) // unit)
    rng = random.Random(args.seed)
    units = []
    for i in range(n_units):
        kind = "placement" if rng.random() < args.placement_share else "playout"
        units.append((args.binary, kind, rng.getrandbits(64), unit))
    t0 = time.time()
    total = {"positions": 0, "captures": 0, "multi": 0, "kings": 0, "high": 0, "longest": 0, "plays": 0}
    mismatches = []
    with multiprocessing.Pool(args.jobs) as pool:
        for i, (stats, mm) in enumerate(pool.imap_unordered(work_unit, units), start=1):
            for k, v in stats.items():
                total[k] = max(total[k], v) if k == "longest" else total[k] + v
            mismatches.extend(mm)
            if i % 10 == 0 or i == len(units):
                print(f"  {i}/{len(units)} units, {total['positions']} positions, {len(mismatches)} mismatches, "
                      f"{time.time() - t0:.0f}s", file=sys.stderr)
    for mm in mismatches[: args.max_print]:
        print(json.dumps(mm))
    print(f"canadian: {total['positions']} positions ({total['captures']} with a capture, {total['multi']} "
          f"multi-captures, longest {total['longest']}, {total['kings']} with kings, {total['high']} touching "
          f"ranks 1-2), {total['plays']} moves played: {len(mismatches)} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
