#!/usr/bin/env python3
"""Differential test of the engine's move generator against Scan 3.1's (opt-in; nothing of Scan is in the project).

Scan 3.1 (rhalbersma/scan at 7aae17e) plays international draughts and its variants `normal`, `killer`, `bt`
(breakthrough) and `losing` (antidraughts). It has no move-list command, so the comparison needs a small driver
built OUTSIDE the repository and linked with Scan's object files: it reads lines `moves <hub position>` and
answers one line with every legal move in Hub notation (`from-to`, or `from x to x captured...`), and
`perft <hub position> <depth>`. See README.md, "Rule sets", for how it was built.

For random positions (playouts from the start and random placements) this script compares the SETS of legal
moves, each reduced to (from, to, set of captured squares) in PDN numbers, between `draughts moves --json` and
the driver, and exits 1 on any difference.

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
VARIANTS = {"international": "normal", "killer": "killer", "breakthrough": "bt", "antidraughts": "losing"}


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


def fen(side, pieces):
    w = [("K" if k else "") + str(n) for n, (c, k) in sorted(pieces.items()) if c == "W"]
    b = [("K" if k else "") + str(n) for n, (c, k) in sorted(pieces.items()) if c == "B"]
    return f"{side}:W{','.join(w)}:B{','.join(b)}"


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
        n = mismatches = captures = multi = kings = 0
        side, pieces = start()
        while n < args.positions:
            if rng.random() < 0.3:
                side, pieces = placement(variant, rng)
            f = fen(side, pieces)
            ours_json = engine_list(args.binary, variant, f)
            ours = engine_set(ours_json)
            scan.stdin.write(f"moves {hub_position(side, pieces)}\n")
            scan.stdin.flush()
            answer = scan.stdout.readline().strip()
            if answer == "error":
                print(f"{variant} {f}: the driver refused the position", file=sys.stderr)
                side, pieces = start()
                continue
            theirs = scan_set(answer)
            n += 1
            captures += any(m["captured"] for m in ours_json)
            multi += any(len(m["captured"]) > 1 for m in ours_json)
            kings += any(k for _, k in pieces.values())
            if ours != theirs:
                mismatches += 1
                print(json.dumps({"variant": variant, "fen": f,
                                  "engine_only": sorted(fmt(t) for t in ours - theirs),
                                  "scan_only": sorted(fmt(t) for t in theirs - ours)}))
            if not ours_json or len(pieces) < 4 or rng.random() < 0.02:
                side, pieces = start()
            else:
                side, pieces = play(side, pieces, rng.choice(ours_json))
        scan.stdin.close()
        scan.wait()
        print(f"{variant:14} {n} positions, {mismatches} mismatches "
              f"(with a capture {captures}, multi-capture {multi}, kings {kings})")
        bad += mismatches
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
