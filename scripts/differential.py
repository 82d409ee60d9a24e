#!/usr/bin/env python3
"""Differential test of the engine's move generator against the `pydraughts` package (opt-in).

pydraughts (PyPI, `pip install pydraughts`) is an independent, slow, pure-Python implementation of several
rule sets. For many random positions this script compares the SET of legal moves, each reduced to
(from, to, set of captured squares), between `draughts moves --json` and pydraughts, and reports every position
where the sets differ.

Positions come from random playouts from the start position (the engine's `play` command gives the next
position; the script also applies each move itself and reports any disagreement) and from random placements
with kings.

pydraughts conventions handled here (read from its source, version 0.6.7):
- variant names: international is `standard`, frysk is `frysk!`; english, italian, russian, brazilian, turkish,
  antidraughts, breakthrough, frisian as ours; it has no spanish, czech, killer, pool or portuguese.
  Breakthrough placements have no kings (a king ends the game).
- Frisian's king-move limit (docs/rules.md §11.5) depends on the game's history: pydraughts reads it from its
  own move stack, the engine from the FEN's `+` field. So for frisian and frysk a playout keeps ONE pydraughts
  board for the whole game and pushes every move into it, and the engine gets the FEN that `draughts play`
  printed (with the count); playouts start from the start position or from a random placement with kings
  and men (where the limit comes into play much sooner; 85% of the playouts), favouring quiet king moves.
- known pydraughts bug (0.6.7, game.py legal_moves, frisian): it sums the capture values as floats (a king
  1.501) in capture ORDER, so two captures of the same pieces in different orders can differ in the last bit
  (1.501+1+1+1+1.501+1 != 1.501+1+1+1.501+1+1) and the "smaller" one is dropped. A move only the engine lists
  is counted as this bug (and dropped, unless --raw-pydraughts) when pydraughts' own pseudo-legal generator
  has it and its exact value (Fraction 1501/1000 per king) equals that of pydraughts' legal captures; a
  playout whose chosen move pydraughts lost this way pushes it from the pseudo-legal list.
- pydraughts counts a Frisian king as 1.501 men in the capture precedence; the federation's rule (and the
  engine, lidraughts, DCTL) counts n kings above 2n-1 men (docs/rules.md §11.3). The two differ only when a
  capture of 3+ kings competes with one of 2n-1 men; such positions are reported as mismatches (none was met
  in the runs recorded in docs/engine.md).
- FEN: its parser takes the SECOND field of `W:..:..` as White's pieces and the THIRD as Black's, whatever
  letter they start with, so we always write `W:W...:B...`.
- square numbers (its "variant" numbering, what `Board(variant, fen)` reads and `legal_moves()` returns):
  standard 1..50 as PDN (1 = b10); english 1 = b8 .. 32 = g1 (Black on 1-12); italian 1 = a8 .. 32 = h1;
  russian and brazilian 1 = a1, 2 = c1, .. 32 = h8 (rank by rank from White's side); turkish 1 = a1 .. 64 = h8.
- a flying king's capture lists every landing square of a straight pass as its own path, so a later capture
  reached from two landing squares of the same line appears twice: we compare sets, which removes those.
- known pydraughts bug: a Turkish king's quiet move may pass over pieces; such moves are dropped and counted
  (see `blocked`), unless --raw-pydraughts.
- the engine's own duplicates (two JSON moves with the same from, to and captured set) are reported too: the
  rules make them ONE move.

Usage:
    python3 scripts/differential.py --variant all --positions 2000 --seed 1 --binary target/release/draughts

Exits 1 if any mismatch (or engine error) was found, 0 otherwise.
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import random
import subprocess
import sys
import time

try:
    from draughts import Board as PyBoard  # pydraughts
    from draughts.core.variant import Move as PyMove
    from draughts.convert import move_to_variant as py_move_to_variant
except ImportError:  # pragma: no cover
    sys.exit("pydraughts is not installed: pip install pydraughts")
from fractions import Fraction

FILES = "abcdefghij"

# our variant -> (pydraughts name, board size, geometry)
#   geometry: "dark" (a1 dark), "mirrored" (a1 light), "all" (turkish, 64 squares)
VARIANTS = {
    "international": ("standard", 10, "dark"),
    "english": ("english", 8, "dark"),
    "italian": ("italian", 8, "mirrored"),
    "russian": ("russian", 8, "dark"),
    "brazilian": ("brazilian", 8, "dark"),
    "turkish": ("turkish", 8, "all"),
    "antidraughts": ("antidraughts", 10, "dark"),
    "breakthrough": ("breakthrough", 10, "dark"),
    "frisian": ("frisian", 10, "dark"),
    "frysk": ("frysk!", 10, "dark"),
}
NOT_IN_PYDRAUGHTS = ("spanish", "czech", "killer", "pool", "portuguese")
# Variants whose legal moves depend on the game's history (the Frisian king-move limit): compared on a
# pydraughts board that has played the whole playout.
HISTORY_VARIANTS = ("frisian", "frysk")


# ---------------------------------------------------------------------------------------------- squares
# A square is (file, rank), both 0-based, (0, 0) = a1 = White's bottom-left.


def sq_name(sq):
    return f"{FILES[sq[0]]}{sq[1] + 1}"


def parse_sq(text):
    return (FILES.index(text[0].lower()), int(text[1:]) - 1)


def pdn_number_map(size, geometry):
    """PDN numbering: 1 at the top-left playable square as White sees the board, row by row downwards."""
    per_row = size // 2
    out = {}
    for n in range(1, size * per_row + 1):
        r, c = divmod(n - 1, per_row)  # r = row from the top
        if geometry == "mirrored":
            f = 2 * c if r % 2 == 0 else 2 * c + 1
        else:
            f = 2 * c + 1 if r % 2 == 0 else 2 * c
        out[n] = (f, size - 1 - r)
    return out


def playable_squares(variant):
    _, size, geometry = VARIANTS[variant]
    if geometry == "all":
        return [(f, r) for r in range(size) for f in range(size)]
    return sorted(pdn_number_map(size, geometry).values())


def engine_num_map(variant):
    _, size, geometry = VARIANTS[variant]
    return pdn_number_map(size, geometry)


def py_num_map(variant):
    """pydraughts' variant numbering -> square."""
    py_name, size, geometry = VARIANTS[variant]
    if py_name in ("standard", "english", "italian", "antidraughts", "breakthrough", "frisian", "frysk!"):
        return pdn_number_map(size, geometry)
    if py_name in ("russian", "brazilian"):  # rank by rank from White's side, a1 = 1
        return {n: (2 * ((n - 1) % 4) + (((n - 1) // 4) % 2), (n - 1) // 4) for n in range(1, 33)}
    if py_name == "turkish":
        return {n: ((n - 1) % 8, (n - 1) // 8) for n in range(1, 65)}
    raise ValueError(variant)


# ---------------------------------------------------------------------------------------------- positions
# A position is (side, pieces) with side "W"/"B" and pieces {square: (colour "W"/"B", king bool)}.


def fen_fields(side, pieces, name_of):
    fields = {"W": [], "B": []}
    for sq in sorted(pieces, key=lambda s: (-s[1], s[0])):
        colour, king = pieces[sq]
        fields[colour].append(("K" if king else "") + name_of(sq))
    return f"{side}:W{','.join(fields['W'])}:B{','.join(fields['B'])}"


def engine_fen(variant, side, pieces):
    if VARIANTS[variant][2] == "all":
        return fen_fields(side, pieces, sq_name)
    inv = {sq: n for n, sq in engine_num_map(variant).items()}
    return fen_fields(side, pieces, lambda sq: str(inv[sq]))


def py_fen(variant, side, pieces):
    # Always White's field first: pydraughts reads the second field as White's whatever its letter.
    inv = {sq: n for n, sq in py_num_map(variant).items()}
    return fen_fields(side, pieces, lambda sq: str(inv[sq]))


def parse_engine_fen(variant, fen):
    nums = engine_num_map(variant)
    parts = fen.strip().split(":")
    side = parts[0].strip().upper()
    pieces = {}

    def square(tok):
        return parse_sq(tok) if tok[0].isalpha() else nums[int(tok)]

    for field in parts[1:]:
        if not field or field[0] not in "WB":
            continue  # counters such as H0, F1
        colour = field[0]
        for tok in filter(None, field[1:].split(",")):
            king = tok.startswith("K")
            tok = tok.lstrip("K")
            if "-" in tok:
                a, b = tok.split("-")
                for n in range(int(a), int(b) + 1):
                    pieces[nums[n]] = (colour, king)
            else:
                pieces[square(tok)] = (colour, king)
    return side, pieces


def start_position(variant):
    pieces = {}
    if VARIANTS[variant][2] == "all":
        for f in range(8):
            for r in (1, 2):
                pieces[(f, r)] = ("W", False)
            for r in (5, 6):
                pieces[(f, r)] = ("B", False)
        return "W", pieces
    size = VARIANTS[variant][1]
    rows = 4 if size == 10 else 3
    if variant == "frysk":
        rows = 1  # five men a side on the first row (docs/rules.md §11.8)
    for sq in playable_squares(variant):
        if sq[1] < rows:
            pieces[sq] = ("W", False)
        elif sq[1] >= size - rows:
            pieces[sq] = ("B", False)
    return ("B" if variant == "english" else "W"), pieces


def random_placement(variant, rng):
    size = VARIANTS[variant][1]
    squares = playable_squares(variant)
    max_side = 12 if size == 10 else (10 if variant == "turkish" else 8)
    if variant == "frysk":
        max_side = 5
    king_p = rng.choice([0.15, 0.35, 0.6])
    if variant == "breakthrough":
        king_p = 0.0  # a king ends the game (docs/rules.md §8.5)
    nw, nb = rng.randint(1, max_side), rng.randint(1, max_side)
    rng.shuffle(squares)
    pieces = {}
    for colour, count in (("W", nw), ("B", nb)):
        placed = 0
        for sq in squares:
            if placed == count:
                break
            if sq in pieces:
                continue
            king = rng.random() < king_p
            if not king:
                promo = size - 1 if colour == "W" else 0
                if sq[1] == promo:
                    continue
                if variant == "turkish" and sq[1] == (0 if colour == "W" else size - 1):
                    continue  # turkish men never go back to their own first rank
            pieces[sq] = (colour, king)
            placed += 1
    return rng.choice("WB"), pieces


def apply_move(variant, side, pieces, mv):
    """Our own application of a JSON move, to cross-check the engine's `play`."""
    size = VARIANTS[variant][1]
    new = dict(pieces)
    src, dst = parse_sq(mv["from"]), parse_sq(mv["to"])
    colour, king = new.pop(src)
    for c in mv["captured"]:
        new.pop(parse_sq(c), None)
    promo = size - 1 if colour == "W" else 0
    if not king:
        if variant == "russian":
            king = any(parse_sq(s)[1] == promo for s in mv["path"][1:])
        else:
            king = dst[1] == promo
    new[dst] = (colour, king)
    return ("B" if side == "W" else "W"), new


# ---------------------------------------------------------------------------------------------- the two sides


class EngineError(Exception):
    pass


def run_engine(binary, args):
    proc = subprocess.run([binary] + args, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise EngineError(f"{' '.join(args)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def engine_moves(binary, variant, fen):
    out = run_engine(binary, ["moves", "--variant", variant, "--fen", fen, "--json"])
    return json.loads(out)


def triple(frm, to, captured):
    return (frm, to, frozenset(captured))


def py_board(variant, side, pieces):
    return PyBoard(VARIANTS[variant][0], py_fen(variant, side, pieces))


def py_triple(variant, mv):
    nums = py_num_map(variant)
    steps = mv.steps_move
    caps = [c for c in (mv.captures or []) if c is not None]
    return triple(sq_name(nums[steps[0]]), sq_name(nums[steps[-1]]), (sq_name(nums[c]) for c in caps))


def py_pseudo_moves(board):
    """pydraughts' pseudo-legal moves (its generator, before its precedence filters), as Move objects."""
    moves, caps = board._game.get_moves()
    conv = lambda sq: int(py_move_to_variant(str(sq), variant=board.variant, to_algebraic=False))
    moves = [[[conv(sq) for sq in step] for step in m] for m in moves]
    caps = [[None if c is None else conv(c) for c in cs] for cs in caps]
    return [PyMove(board_move=m, possible_moves=moves, possible_captures=caps) for m in moves]


def py_push(variant, board, mv):
    """Plays the engine's JSON move on a pydraughts board (any of its paths: they give one position)."""
    want = triple(mv["from"], mv["to"], mv["captured"])
    for m in board.legal_moves():
        if py_triple(variant, m) == want:
            board.push(m)
            return True
    if variant in HISTORY_VARIANTS and FILTER_KNOWN_PYDRAUGHTS_BUGS:
        # A move pydraughts lost to its float bug (see the module doc): push it from the pseudo-legal list.
        for m in py_pseudo_moves(board):
            if py_triple(variant, m) == want:
                board.push(m)
                return True
    return False


def exact_value(t, pieces):
    """The exact pydraughts value of a capture (a man 1, a king 1501/1000)."""
    return sum(Fraction(1501, 1000) if pieces[parse_sq(c)][1] else Fraction(1) for c in t[2])


def float_bug_moves(variant, board, pieces, ours_only, theirs):
    """The engine-only moves that pydraughts dropped by its float summation (see the module doc)."""
    caps = [t for t in theirs if t[2]]
    if not caps or variant not in HISTORY_VARIANTS:
        return set()
    best = exact_value(caps[0], pieces)
    kings_move = pieces[parse_sq(caps[0][0])][1]
    pseudo = {py_triple(variant, m) for m in py_pseudo_moves(board)}
    return {t for t in ours_only if t[2] and t in pseudo and exact_value(t, pieces) == best
            and pieces[parse_sq(t[0])][1] == kings_move}


def py_moves(variant, side, pieces, board=None):
    nums = py_num_map(variant)
    if board is None:
        board = py_board(variant, side, pieces)
    out = set()
    filtered = []
    for mv in board.legal_moves():
        steps = mv.steps_move
        caps = [c for c in (mv.captures or []) if c is not None]
        frm, to = nums[steps[0]], nums[steps[-1]]
        if not caps and FILTER_KNOWN_PYDRAUGHTS_BUGS and blocked(frm, to, pieces):
            filtered.append(f"{sq_name(frm)}-{sq_name(to)}")
            continue
        out.add(triple(sq_name(frm), sq_name(to), (sq_name(nums[c]) for c in caps)))
    return out, filtered


# Known pydraughts bug (0.6.7, piece.py get_directional_orthogonal_multiple_squares_adjacent_positions): a
# Turkish king's QUIET move may jump over any piece, its own or the opponent's (it lists every empty square of
# the row and the file). Such moves break "a flying king moves any distance along a FREE line", so they are
# dropped (and counted) unless --raw-pydraughts is given.
FILTER_KNOWN_PYDRAUGHTS_BUGS = True


def blocked(frm, to, pieces):
    """True if a straight quiet move from frm to to passes over an occupied square."""
    df, dr = to[0] - frm[0], to[1] - frm[1]
    if not (df == 0 or dr == 0 or abs(df) == abs(dr)):
        return False
    n = max(abs(df), abs(dr))
    sf, sr = (df > 0) - (df < 0), (dr > 0) - (dr < 0)
    return any((frm[0] + k * sf, frm[1] + k * sr) in pieces for k in range(1, n))


LAST_COVERAGE = collections.Counter()  # what kind of position the last compare() saw
FILTERED_POSITIONS = []  # per worker: (fen, pydraughts moves dropped as known bugs)


def compare(binary, variant, side, pieces, fen=None, board=None):
    """Returns (engine json moves, mismatch dict or None). `fen` (the engine's, with a Frisian king-move
    count) and `board` (a pydraughts board that played the game) are given for the history variants."""
    if fen is None:
        fen = engine_fen(variant, side, pieces)
    ours = engine_moves(binary, variant, fen)
    ours_set = set()
    dups = []
    for mv in ours:
        t = triple(mv["from"], mv["to"], mv["captured"])
        if t in ours_set:
            dups.append(mv["notation"])
        ours_set.add(t)
    if board is None and variant in HISTORY_VARIANTS:
        board = py_board(variant, side, pieces)
    theirs, filtered = py_moves(variant, side, pieces, board)
    if FILTER_KNOWN_PYDRAUGHTS_BUGS and ours_set != theirs:
        lost = float_bug_moves(variant, board, pieces, ours_set - theirs, theirs)
        if lost:
            theirs |= lost
            filtered = filtered + [fmt(t) + " (float value bug)" for t in sorted(lost)]
    if filtered:
        FILTERED_POSITIONS.append((fen, filtered))
    LAST_COVERAGE.clear()
    if ours:
        caps = [len(mv["captured"]) for mv in ours]
        ends = [(mv["from"], mv["to"]) for mv in ours if mv["captured"]]
        LAST_COVERAGE.update({
            "capture": max(caps) > 0,
            "multi-capture": max(caps) > 1,
            "king capture": any(mv["captured"] and pieces[parse_sq(mv["from"])][1] for mv in ours),
            "same ends, other pieces": len(ends) != len(set(ends)),
        })
    LAST_COVERAGE["king"] = any(k for _, k in pieces.values())
    if ":+" in fen:
        LAST_COVERAGE["king-move count"] = True
        counts = fen.split(":+", 1)[1].split("+")
        side_count = counts[1] if side == "W" else counts[0]
        LAST_COVERAGE["king held"] = side_count[:1] == "3" and any(
            c == side and not k for c, k in pieces.values())
    if ours_set == theirs and not dups:
        return ours, None
    return ours, {
        "variant": variant,
        "fen": fen,
        "pydraughts_fen": py_fen(variant, side, pieces),
        "engine_only": sorted(fmt(t) for t in ours_set - theirs),
        "pydraughts_only": sorted(fmt(t) for t in theirs - ours_set),
        "engine_duplicates": dups,
    }


def fmt(t):
    frm, to, caps = t
    if not caps:
        return f"{frm}-{to}"
    return f"{frm}x{to} [{','.join(sorted(caps, key=lambda s: (int(s[1:]), s[0])))}]"


def minimize(binary, variant, side, pieces, budget=200):
    """Greedily drop pieces (then demote kings) while some mismatch remains."""
    current = dict(pieces)
    changed = True
    while changed and budget > 0:
        changed = False
        for sq in sorted(current, key=lambda s: (s[1], s[0])):
            for trial in ("drop", "demote"):
                cand = dict(current)
                if trial == "drop":
                    del cand[sq]
                    if not any(c == "W" for c, _ in cand.values()) or not any(c == "B" for c, _ in cand.values()):
                        continue
                else:
                    colour, king = cand[sq]
                    promo = 7 if colour == "W" else 0
                    if not king or (VARIANTS[variant][1] == 8 and sq[1] == promo) or \
                            (VARIANTS[variant][1] == 10 and sq[1] == (9 if colour == "W" else 0)):
                        continue
                    cand[sq] = (colour, False)
                budget -= 1
                try:
                    _, mm = compare(binary, variant, side, cand)
                except EngineError:
                    mm = None
                if mm:
                    current = cand
                    changed = True
                    break
            if changed or budget <= 0:
                break
    return engine_fen(variant, side, current), compare(binary, variant, side, current)[1]


# ---------------------------------------------------------------------------------------------- work units


def work_unit(args):
    """One playout (kind "playout") or a batch of random placements (kind "random")."""
    binary, variant, kind, seed, max_plies, sample_p = args
    rng = random.Random(seed)
    results = []  # (kind, payload)
    FILTERED_POSITIONS.clear()
    try:
        return _work_unit(binary, variant, kind, rng, max_plies, sample_p, results)
    finally:
        for fen, moves in FILTERED_POSITIONS:
            results.append(("filtered", {"fen": fen, "moves": moves}))


def _work_unit(binary, variant, kind, rng, max_plies, sample_p, results):
    side, pieces = start_position(variant)
    history = variant in HISTORY_VARIANTS
    source = "playout"
    try:
        if history and kind == "random":
            # A playout from a random placement: kings and men, so the king-move limit comes into play
            # (counted as "random" in the summary).
            side, pieces = random_placement(variant, rng)
            kind, source, sample_p = "playout", "random", 1.0
        if kind == "random":
            for _ in range(20):
                side, pieces = random_placement(variant, rng)
                _, mm = compare(binary, variant, side, pieces)
                results.append(("pos", ("random", mm, dict(LAST_COVERAGE))))
            return results
        board = py_board(variant, side, pieces) if history else None
        fen = engine_fen(variant, side, pieces)
        last_king = {}  # per side: where its king's last quiet move ended
        for ply in range(max_plies):
            if (ply >= 2 or history) and rng.random() < sample_p:
                ours, mm = compare(binary, variant, side, pieces, fen, board)
                results.append(("pos", (source, mm, dict(LAST_COVERAGE))))
                if mm and history:
                    break  # the two boards no longer play the same game
            else:
                ours = engine_moves(binary, variant, fen)
            if not ours:
                break
            mv = rng.choice(ours)
            if history and rng.random() < 0.85:
                # Favour quiet king moves, the same king again where it can, so that the king-move limit
                # (three in a row) is reached often.
                quiet_kings = [m for m in ours if not m["captured"] and pieces[parse_sq(m["from"])][1]]
                again = [m for m in quiet_kings if m["from"] == last_king.get(side)]
                if again or quiet_kings:
                    mv = rng.choice(again or quiet_kings)
            last_king[side] = mv["to"] if not mv["captured"] and pieces[parse_sq(mv["from"])][1] else None
            out = run_engine(binary, ["play", "--variant", variant, "--fen", fen, mv["notation"]])
            if history and not py_push(variant, board, mv):
                results.append(("play", {"variant": variant, "fen": fen, "move": mv["notation"],
                                         "error": "pydraughts has no such legal move"}))
                break
            nfen = out.splitlines()[0]
            nside, npieces = parse_engine_fen(variant, nfen)
            mside, mpieces = apply_move(variant, side, pieces, mv)
            if (nside, npieces) != (mside, mpieces):
                results.append(("play", {
                    "variant": variant, "fen": fen, "move": mv["notation"],
                    "engine_play": out.splitlines()[0], "expected": engine_fen(variant, mside, mpieces)}))
            side, pieces = nside, npieces
            fen = nfen if history else engine_fen(variant, side, pieces)
            if "wins" in out or "draw" in out:
                break
    except EngineError as e:
        results.append(("error", {"variant": variant, "error": str(e)}))
    except Exception as e:  # a crash inside pydraughts on some position
        results.append(("error", {"variant": variant, "error": f"{type(e).__name__}: {e}",
                                  "fen": engine_fen(variant, side, pieces)}))
    return results


def units(binary, variant, seed, random_share):
    size = VARIANTS[variant][1]
    max_plies = 220 if size == 10 else 160
    base = random.Random(f"{seed}-{variant}")
    if variant in HISTORY_VARIANTS:
        # Playouts from random placements (kings and men) are short and meet the king-move limit; the ones
        # from the start position are long and rarely do: weigh the first kind up.
        random_share = max(random_share, 0.85)
    while True:
        kind = "random" if base.random() < random_share else "playout"
        yield (binary, variant, kind, base.getrandbits(48), base.randint(10, max_plies), 0.5)


# ---------------------------------------------------------------------------------------------- main


def print_mismatch(mm, stream=sys.stdout):
    print(f"MISMATCH {mm['variant']}  fen {mm['fen']}  (pydraughts fen {mm['pydraughts_fen']})", file=stream)
    if mm["engine_only"]:
        print(f"    only engine:     {'  '.join(mm['engine_only'])}", file=stream)
    if mm["pydraughts_only"]:
        print(f"    only pydraughts: {'  '.join(mm['pydraughts_only'])}", file=stream)
    if mm["engine_duplicates"]:
        print(f"    engine lists the same (from, to, captured) twice: {mm['engine_duplicates']}", file=stream)
    if mm.get("minimal_fen"):
        m = mm["minimal"]
        print(f"    minimal: {mm['minimal_fen']}  only engine: {m['engine_only']}  "
              f"only pydraughts: {m['pydraughts_only']}", file=stream)
    stream.flush()


def run_variant(args, variant, pool):
    print(f"== {variant}: {args.positions} positions, seed {args.seed}", flush=True)
    sanity_side, sanity_pieces = start_position(variant)
    _, mm = compare(args.binary, variant, sanity_side, sanity_pieces)
    if mm:
        print_mismatch(mm)
        print(f"{variant}: start position differs: the square mapping is probably wrong; skipping")
        return {"positions": 1, "mismatches": [mm], "errors": [], "play": [], "filtered": 0,
                "coverage": collections.Counter()}
    stats = {"positions": 0, "playout": 0, "random": 0, "mismatches": [], "errors": [], "play": [],
             "filtered": 0, "coverage": collections.Counter()}
    t0 = time.time()
    last = t0
    # a bounded window of outstanding work units (Pool.imap would drain the endless generator)
    gen = units(args.binary, variant, args.seed, args.random_share)
    pending = collections.deque(pool.apply_async(work_unit, (next(gen),)) for _ in range(3 * args.jobs))
    while pending:
        results = pending.popleft().get()
        pending.append(pool.apply_async(work_unit, (next(gen),)))
        for kind, payload in results:
            if kind == "pos":
                if stats["positions"] >= args.positions:
                    continue
                source, mm, cov = payload
                stats["coverage"].update(cov)
                stats["positions"] += 1
                stats[source] += 1
                if mm:
                    mm["source"] = source
                    stats["mismatches"].append(mm)
                    if args.minimize and len(stats["mismatches"]) <= args.minimize:
                        side, pieces = parse_engine_fen(variant, mm["fen"])
                        mfen, mmm = minimize(args.binary, variant, side, pieces)
                        if mmm:
                            mm["minimal_fen"], mm["minimal"] = mfen, mmm
                    if len(stats["mismatches"]) <= args.max_print:
                        print_mismatch(mm)
                    if args.report:
                        with open(args.report, "a") as fh:
                            fh.write(json.dumps(mm) + "\n")
            elif kind == "filtered":
                stats["filtered"] += 1
                if stats["filtered"] == 1:
                    print(f"   note: corrected a known pydraughts bug at {payload['fen']}: "
                          f"{' '.join(payload['moves'])}", flush=True)
            elif kind == "play":
                stats["play"].append(payload)
                print(f"PLAY MISMATCH {payload}", flush=True)
            else:
                stats["errors"].append(payload)
                print(f"ERROR {payload}", flush=True)
        now = time.time()
        if now - last > args.progress or stats["positions"] >= args.positions:
            last = now
            print(f"   {variant}: {stats['positions']}/{args.positions} positions "
                  f"({stats['playout']} from playouts, {stats['random']} random), "
                  f"{len(stats['mismatches'])} mismatches, {now - t0:.0f}s", flush=True)
        if stats["positions"] >= args.positions:
            break
    return stats


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", default="all",
                    help="international, english, italian, russian, brazilian, turkish, antidraughts, "
                         "breakthrough, frisian, frysk, a comma-separated list, or all (default)")
    ap.add_argument("--positions", type=int, default=500, help="positions compared per variant (default 500)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--binary", default=os.path.join(os.path.dirname(__file__), "..", "target", "release",
                                                     "draughts"), help="the draughts CLI (default target/release)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    ap.add_argument("--random-share", type=float, default=0.4,
                    help="share of work units that are random placements with kings (20 positions each; a playout "
                         "gives about 40); default 0.4")
    ap.add_argument("--minimize", type=int, default=5,
                    help="shrink the first N mismatches of each variant to a smaller failing position (default 5)")
    ap.add_argument("--max-print", type=int, default=40, help="print at most this many mismatches per variant")
    ap.add_argument("--report", help="append every mismatch as a JSON line to this file")
    ap.add_argument("--raw-pydraughts", action="store_true",
                    help="leave pydraughts' known bugs uncorrected (Turkish kings moving through pieces, Frisian "
                         "captures lost to float rounding)")
    ap.add_argument("--progress", type=float, default=15, help="seconds between progress lines")
    args = ap.parse_args()
    global FILTER_KNOWN_PYDRAUGHTS_BUGS
    FILTER_KNOWN_PYDRAUGHTS_BUGS = not args.raw_pydraughts

    if not os.path.isfile(args.binary):
        sys.exit(f"no engine binary at {args.binary} (cargo build --release -p draughts-cli, or --binary)")
    names = list(VARIANTS) if args.variant == "all" else [v.strip() for v in args.variant.split(",")]
    for v in names:
        if v in NOT_IN_PYDRAUGHTS:
            sys.exit(f"{v}: pydraughts has no such variant (it has standard, english, italian, russian, "
                     f"brazilian, turkish, frisian, frysk!, antidraughts, breakthrough)")
        if v not in VARIANTS:
            sys.exit(f"unknown variant {v}")

    failed = False
    summary = []
    with multiprocessing.Pool(max(1, args.jobs)) as pool:
        for v in names:
            st = run_variant(args, v, pool)
            summary.append((v, st))
            failed |= bool(st["mismatches"] or st["errors"] or st["play"])
    print("\n== summary")
    for v, st in summary:
        print(f"{v:14} {st['positions']:6} positions  {len(st['mismatches']):5} mismatches  "
              f"{len(st['errors'])} errors  {len(st['play'])} play disagreements  "
              f"({st['filtered']} positions with a known pydraughts bug corrected)")
        cov = st["coverage"]
        print(f"{'':14} positions with: " + ", ".join(
            f"{k} {cov[k]}" for k in ("capture", "multi-capture", "king", "king capture",
                                        "same ends, other pieces", "king-move count", "king held")))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
