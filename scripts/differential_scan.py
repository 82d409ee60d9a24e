#!/usr/bin/env python3
"""Differential test of the engine's move generator against Scan 3.1's (opt-in; nothing of Scan is in the project).

Scan 3.1 (rhalbersma/scan at 7aae17e) plays international draughts and its variants `normal`, `killer`, `bt`
(breakthrough), `losing` (antidraughts) and `frisian`. It has no move-list command, so the comparison needs a
small driver built OUTSIDE the repository and linked with Scan's object files: it reads lines
`moves <hub position> [<count> <square>]` and answers one line with every legal move in Hub notation
(`from-to`, or `from x to x captured...`), and `perft <hub position> <depth>`. See docs/engine.md, "Rule sets", for
how it was built.

For random positions (playouts from the start and random placements) this script compares the SETS of legal
moves, each reduced to (from, to, set of captured squares) in PDN numbers, between `draughts moves --json` and
the driver, and exits 1 on any difference.

Frisian (docs/rules.md §11): the king-move limit (§11.5) depends on the game's history, which a Hub position
does not carry. This script keeps each side's run (count and king square) itself through the playout, by the
rule (a quiet move by a king of a side that has men: the same king again adds one, another king starts at
one; any other move ends the side's run; the other side's run survives while its king does and that side
has men), and SETS it on both sides: the engine gets it in the FEN's `+` field, the driver as
`moves <hub> <count> <square>` for the side to move (it writes Scan's `Pos` fields `m_count`/`m_wolf`, which
is what Scan's own `Pos::succ` keeps). So positions with a held king (count 3) are compared too. Quiet king
moves (the same king again where it can) are favoured in the playouts so that the limit is met often. Scan
has no Frysk; Frysk is Frisian from another start and shares the engine's generator.

Usage:
    python3 scripts/differential_scan.py --driver /path/to/scan-driver --binary target/release/draughts \
        --variant all --positions 2000 --seed 1
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys

FILES = "abcdefghij"
# our key -> Scan's variant name
VARIANTS = {"international": "normal", "killer": "killer", "breakthrough": "bt", "antidraughts": "losing",
            "frisian": "frisian"}
# Scan's move list holds 128 moves (list.hpp, unchecked in its release build): positions with more are skipped.
SCAN_LIST_SIZE = 128


def number_of(name):
    """Algebraic 10x10 square -> PDN number (1 = b10, 46 = a1)."""
    f, r = FILES.index(name[0]), int(name[1:]) - 1
    row = 9 - r
    return row * 5 + f // 2 + 1


def coords(n):
    row, c = divmod(n - 1, 5)
    f = 2 * c + 1 if row % 2 == 0 else 2 * c
    return f, 9 - row


def hub_position(side, pieces):
    """side 'W'/'B', pieces {number: (colour, king)} -> Hub string."""
    out = [side]
    for n in range(1, 51):
        p = pieces.get(n)
        if p is None:
            out.append("e")
        else:
            c = p[0].lower()
            out.append(c.upper() if p[1] else c)
    return "".join(out)


def fen(side, pieces, runs=None):
    w = [("K" if k else "") + str(n) for n, (c, k) in sorted(pieces.items()) if c == "W"]
    b = [("K" if k else "") + str(n) for n, (c, k) in sorted(pieces.items()) if c == "B"]
    text = f"{side}:W{','.join(w)}:B{','.join(b)}"
    if runs and any(count for count, _ in runs.values()):
        # lidraughts' king-move field: Black's count and square, then White's (docs/rules.md §5.3, §11.5)
        def field(colour):
            count, square = runs[colour]
            return f"{count}{square}" if count else "0"
        text += f":+{field('B')}+{field('W')}"
    return text


def has_men(pieces, colour):
    return any(c == colour and not k for c, k in pieces.values())


def next_runs(runs, side, pieces, new_pieces, m):
    """Frisian king-move runs after `side` played `m` (docs/rules.md §11.5): {colour: (count, square)}."""
    other = "B" if side == "W" else "W"
    out = {}
    count, square = runs[other]
    keep = count and new_pieces.get(square) == (other, True) and has_men(new_pieces, other)
    out[other] = (count, square) if keep else (0, 0)
    frm, to = number_of(m["from"]), number_of(m["to"])
    if not m["captured"] and pieces[frm][1] and has_men(new_pieces, side):
        count, square = runs[side]
        out[side] = (count + 1 if count and square == frm else 1, to)
    else:
        out[side] = (0, 0)
    return out


def scan_set(line):
    out = set()
    for tok in line.split():
        if "x" in tok:
            parts = [int(p) for p in tok.split("x")]
            out.add((parts[0], parts[1], frozenset(parts[2:])))
        else:
            a, b = tok.split("-")
            out.add((int(a), int(b), frozenset()))
    return out


def engine_list(binary, variant, fen_text):
    proc = subprocess.run([binary, "moves", "--variant", variant, "--fen", fen_text, "--json"],
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"{variant} {fen_text}: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def engine_set(moves):
    return {(number_of(m["from"]), number_of(m["to"]), frozenset(number_of(c) for c in m["captured"]))
            for m in moves}


def play(side, pieces, m):
    new = dict(pieces)
    frm, to = number_of(m["from"]), number_of(m["to"])
    colour, king = new.pop(frm)
    for c in m["captured"]:
        new.pop(number_of(c), None)
    promo_row = 0 if colour == "W" else 9
    if not king and (to - 1) // 5 == promo_row:
        king = True
    new[to] = (colour, king)
    return ("B" if side == "W" else "W"), new


def start():
    pieces = {n: ("B", False) for n in range(1, 21)}
    pieces.update({n: ("W", False) for n in range(31, 51)})
    return "W", pieces


def placement(variant, rng):
    squares = list(range(1, 51))
    rng.shuffle(squares)
    king_p = 0.0 if variant == "breakthrough" else rng.choice([0.15, 0.35, 0.6])
    pieces = {}
    for colour, count in (("W", rng.randint(1, 12)), ("B", rng.randint(1, 12))):
        placed = 0
        for n in squares:
            if placed == count:
                break
            if n in pieces:
                continue
            king = rng.random() < king_p
            if not king and (n - 1) // 5 == (0 if colour == "W" else 9):
                continue
            pieces[n] = (colour, king)
            placed += 1
    return rng.choice("WB"), pieces


def fmt(t):
    frm, to, caps = t
    return f"{frm}-{to}" if not caps else f"{frm}x{to}x" + "x".join(str(c) for c in sorted(caps))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--driver", required=True, help="the Scan 3.1 move-list driver (built outside the project)")
    ap.add_argument("--binary", required=True, help="the draughts CLI")
    ap.add_argument("--variant", default="all", choices=["all"] + list(VARIANTS))
    ap.add_argument("--positions", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    variants = list(VARIANTS) if args.variant == "all" else [args.variant]
    bad = 0
    for variant in variants:
        rng = random.Random(f"{args.seed}:{variant}")
        scan = subprocess.Popen([args.driver, VARIANTS[variant]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)
        frisian = variant == "frisian"
        no_runs = {"W": (0, 0), "B": (0, 0)}
        n = mismatches = captures = multi = kings = king_captures = counting = held = skipped = 0
        side, pieces = start()
        runs = dict(no_runs)
        # Frisian playouts run longer, and most begin at a placement with kings, so that runs of quiet king
        # moves reach the limit.
        placement_p = 0.05 if frisian else 0.3

        def fresh():
            return placement(variant, rng) if frisian and rng.random() < 0.7 else start()

        while n < args.positions:
            if rng.random() < placement_p:
                side, pieces = placement(variant, rng)
                runs = dict(no_runs)
            if variant == "breakthrough" and any(k for _, k in pieces.values()):
                # A playout crowned: the first king ends the game (docs/rules.md §9.3), where the engine
                # lists no moves and Scan's generator, which leaves the game's end to its search, still
                # does. Not compared (before this, such positions were compared and reported).
                side, pieces = fresh()
                runs = dict(no_runs)
                continue
            f = fen(side, pieces, runs if frisian else None)
            ours_json = engine_list(args.binary, variant, f)
            if len(ours_json) >= SCAN_LIST_SIZE - 8:
                skipped += 1
                side, pieces = fresh()
                runs = dict(no_runs)
                continue
            ours = engine_set(ours_json)
            count, square = runs[side]
            extra = f" {count} {square}" if frisian and count else ""
            scan.stdin.write(f"moves {hub_position(side, pieces)}{extra}\n")
            scan.stdin.flush()
            answer = scan.stdout.readline().strip()
            if answer == "error":
                print(f"{variant} {f}: the driver refused the position", file=sys.stderr)
                side, pieces = fresh()
                runs = dict(no_runs)
                continue
            theirs = scan_set(answer)
            n += 1
            captures += any(m["captured"] for m in ours_json)
            multi += any(len(m["captured"]) > 1 for m in ours_json)
            kings += any(k for _, k in pieces.values())
            king_captures += any(m["captured"] and pieces[number_of(m["from"])][1] for m in ours_json)
            counting += count > 0
            held += count == 3 and has_men(pieces, side)
            if ours != theirs:
                mismatches += 1
                print(json.dumps({"variant": variant, "fen": f,
                                  "engine_only": sorted(fmt(t) for t in ours - theirs),
                                  "scan_only": sorted(fmt(t) for t in theirs - ours)}))
            if not ours_json or len(pieces) < 4 or rng.random() < 0.02:
                side, pieces = fresh()
                runs = dict(no_runs)
            else:
                m = rng.choice(ours_json)
                if frisian and rng.random() < 0.85:
                    # Favour quiet king moves, the same king again where it can, so that the king-move
                    # limit (three in a row) is met often.
                    quiet_kings = [x for x in ours_json if not x["captured"] and pieces[number_of(x["from"])][1]]
                    again = [x for x in quiet_kings if number_of(x["from"]) == runs[side][1] and runs[side][0]]
                    if again or quiet_kings:
                        m = rng.choice(again or quiet_kings)
                new_side, new_pieces = play(side, pieces, m)
                if frisian:
                    runs = next_runs(runs, side, pieces, new_pieces, m)
                side, pieces = new_side, new_pieces
        scan.stdin.close()
        scan.wait()
        print(f"{variant:14} {n} positions, {mismatches} mismatches "
              f"(with a capture {captures}, multi-capture {multi}, kings {kings}, a king's capture "
              f"{king_captures}" + (f", a king-move count running {counting}, a king held {held}" if frisian
                                    else "") + f"; {skipped} skipped: {SCAN_LIST_SIZE - 8}+ moves)")
        bad += mismatches
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
