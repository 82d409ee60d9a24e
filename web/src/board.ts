// The board: drawn as SVG from what the server says (pieces on algebraic squares with their PDN numbers,
// legal moves with every landing square). Nothing here knows a rule: the geometry of a variant's board is
// read from its start position, and a click only ever picks one of the server's legal moves.
import { Color, PieceKind, type Move, type PlacedPiece, type Position } from "./gen/draughts/v1/common_pb.js";

/** A variant's board as its start position shows it. */
export interface Geometry {
  /** Squares per side (8, 10 or 12). */
  size: number;
  /** Every square is played on (Turkish); else only squares of one colour. */
  all: boolean;
  /** (file + rank) % 2 of the playable squares (0-based file and rank). */
  parity: number;
  /** PDN number of every playable square, row by row from the top as White sees the board. */
  numbers: Map<string, number>;
  /** The variant writes moves with algebraic squares ("c3-d4"): show coordinates, not numbers. */
  algebraic: boolean;
}

export const squareName = (file: number, rank: number) => String.fromCharCode(97 + file) + (rank + 1);

export function parseSquare(sq: string): [number, number] {
  return [sq.charCodeAt(0) - 97, Number(sq.slice(1)) - 1];
}

/** The geometry from a start position and one of its legal moves' notation. */
export function geometryFrom(pos: Position, sampleNotation: string): Geometry {
  let size = 0;
  const parities = new Set<number>();
  for (const p of pos.pieces) {
    const [f, r] = parseSquare(p.square);
    size = Math.max(size, f + 1, r + 1);
    parities.add((f + r) % 2);
  }
  size = size > 10 ? 12 : size > 8 ? 10 : 8;
  const all = parities.size > 1;
  const parity = all ? 0 : [...parities][0] ?? 0;
  const numbers = new Map<string, number>();
  let n = 1;
  for (let r = size - 1; r >= 0; r--) {
    for (let f = 0; f < size; f++) {
      if (all || (f + r) % 2 === parity) numbers.set(squareName(f, r), n++);
    }
  }
  // The server's numbers win where they are known (they are the engine's).
  for (const p of pos.pieces) if (p.number) numbers.set(p.square, p.number);
  return { size, all, parity, numbers, algebraic: /[a-z]/.test(sampleNotation) };
}

const SVG = "http://www.w3.org/2000/svg";

function el<K extends keyof SVGElementTagNameMap>(name: K, attrs: Record<string, string | number>): SVGElementTagNameMap[K] {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

export interface BoardHandlers {
  /** A complete legal move was picked. */
  onMove?: (m: Move) => void;
  /** A click that no legal move allows (refused here: nothing is sent). */
  onRefused?: (why: string) => void;
}

export class BoardView {
  readonly svg: SVGSVGElement;
  private geometry: Geometry | null = null;
  private flipped = false;
  private pieces: PlacedPiece[] = [];
  private lastMove: string[] = [];
  private moves: Move[] | null = null;
  private origin: string | null = null;
  /** Landing squares clicked after the origin. */
  private clicks: string[] = [];

  constructor(container: HTMLElement, private handlers: BoardHandlers = {}) {
    this.svg = el("svg", { class: "board", role: "grid", "aria-label": "board" });
    container.append(this.svg);
  }

  setGeometry(g: Geometry) {
    this.geometry = g;
    this.render();
  }

  setFlipped(flipped: boolean) {
    this.flipped = flipped;
    this.render();
  }

  isFlipped() {
    return this.flipped;
  }

  setPosition(pieces: PlacedPiece[], lastMove: string[] = []) {
    this.pieces = pieces;
    this.lastMove = lastMove;
    this.render();
  }

  /** The legal moves the player may pick from now (null: the board is read-only). */
  setMoves(moves: Move[] | null) {
    this.moves = moves;
    this.origin = null;
    this.clicks = [];
    this.render();
  }

  /** Moves still possible after the clicks so far. */
  private candidates(): Move[] {
    if (!this.moves || !this.origin) return [];
    return this.moves.filter((m) => m.from === this.origin && this.follows(m, this.clicks));
  }

  /** Whether `clicks` are landing squares of `m`'s path, in order. */
  private follows(m: Move, clicks: string[]): boolean {
    let i = 1;
    for (const c of clicks) {
      while (i < m.path.length && m.path[i] !== c) i++;
      if (i >= m.path.length) return false;
      i++;
    }
    return true;
  }

  private click(sq: string) {
    if (!this.moves) return;
    const fromHere = this.moves.filter((m) => m.from === sq);
    if (!this.origin || (fromHere.length > 0 && this.clicks.length === 0 && sq !== this.origin)) {
      if (fromHere.length === 0) {
        this.handlers.onRefused?.(this.origin ? `no legal move ends on ${this.label(sq)}` : `no legal move from ${this.label(sq)}`);
        return;
      }
      this.origin = sq;
      this.clicks = [];
      this.render();
      return;
    }
    if (sq === this.origin && this.clicks.length === 0) {
      this.origin = null;
      this.render();
      return;
    }
    const next = this.candidates().filter((m) => this.follows(m, [...this.clicks, sq]));
    if (next.length === 0) {
      this.handlers.onRefused?.(`no legal move from ${this.label(this.origin)} goes to ${this.label(sq)}`);
      return;
    }
    const ending = next.filter((m) => m.to === sq);
    if (ending.length === 1) {
      const m = ending[0];
      this.origin = null;
      this.clicks = [];
      this.moves = null;
      this.render();
      this.handlers.onMove?.(m);
      return;
    }
    if (ending.length > 1) {
      // Several captures share this origin and destination: the landing squares tell them apart.
      this.handlers.onRefused?.(`several captures end on ${this.label(sq)}: click the landing squares in order`);
      this.clicks = [];
      this.render();
      return;
    }
    this.clicks.push(sq);
    this.render();
  }

  private label(sq: string): string {
    const g = this.geometry;
    if (!g || g.algebraic) return sq;
    return String(g.numbers.get(sq) ?? sq);
  }

  private render() {
    const g = this.geometry;
    const svg = this.svg;
    svg.replaceChildren();
    if (!g) return;
    const n = g.size;
    svg.setAttribute("viewBox", `0 0 ${n} ${n}`);
    svg.dataset.size = String(n);
    svg.dataset.flipped = String(this.flipped);
    const bySquare = new Map(this.pieces.map((p) => [p.square, p]));
    const cands = this.candidates();
    const targets = new Set(cands.map((m) => m.to));
    const landings = new Set<string>();
    for (const m of cands) m.path.slice(1, -1).forEach((s) => landings.add(s));
    const movable = new Set((this.moves ?? []).map((m) => m.from));
    const last = new Set(this.lastMove);
    for (let r = 0; r < n; r++) {
      for (let f = 0; f < n; f++) {
        const sq = squareName(f, r);
        const x = this.flipped ? n - 1 - f : f;
        const y = this.flipped ? r : n - 1 - r;
        const playable = g.all || (f + r) % 2 === g.parity;
        const grp = el("g", { "data-sq": sq, transform: `translate(${x} ${y})` });
        const cls = ["sq", g.all ? "turkish" : playable ? "dark" : "light"];
        if (last.has(sq)) cls.push("last");
        if (sq === this.origin) cls.push("selected");
        grp.append(el("rect", { width: 1, height: 1, class: cls.join(" ") }));
        if (playable && !g.algebraic) {
          const num = el("text", { x: 0.06, y: 0.2, class: "num" });
          num.textContent = String(g.numbers.get(sq) ?? "");
          grp.append(num);
        }
        if (g.algebraic && y === n - 1) {
          const t = el("text", { x: 0.94, y: 0.94, class: `coord${playable && !g.all ? " on-dark" : ""}`, "text-anchor": "end" });
          t.textContent = sq[0];
          grp.append(t);
        }
        if (g.algebraic && x === 0) {
          const t = el("text", { x: 0.05, y: 0.22, class: `coord${playable && !g.all ? " on-dark" : ""}` });
          t.textContent = String(r + 1);
          grp.append(t);
        }
        const p = bySquare.get(sq);
        if (p) {
          const white = p.color === Color.WHITE;
          const king = p.kind === PieceKind.KING;
          grp.dataset.piece = `${white ? "white" : "black"}-${king ? "king" : "man"}`;
          const pc = ["piece", white ? "white" : "black"];
          if (movable.has(sq) && !this.origin) pc.push("movable");
          grp.append(el("circle", { cx: 0.5, cy: 0.5, r: 0.4, class: pc.join(" ") }));
          grp.append(el("circle", { cx: 0.5, cy: 0.5, r: 0.28, class: `ring ${white ? "white" : "black"}` }));
          if (king) {
            const k = el("text", { x: 0.5, y: 0.63, class: `crown ${white ? "white" : "black"}`, "text-anchor": "middle" });
            k.textContent = "♛";
            grp.append(k);
          }
        }
        if (targets.has(sq)) {
          grp.classList.add("target");
          grp.append(el("circle", { cx: 0.5, cy: 0.5, r: 0.14, class: "dot" }));
        } else if (landings.has(sq) && !this.clicks.includes(sq)) {
          grp.classList.add("landing");
          grp.append(el("circle", { cx: 0.5, cy: 0.5, r: 0.22, class: "hop" }));
        }
        if (this.clicks.includes(sq)) grp.append(el("circle", { cx: 0.5, cy: 0.5, r: 0.14, class: "hop chosen" }));
        if (this.moves) grp.addEventListener("click", () => this.click(sq));
        svg.append(grp);
      }
    }
  }
}
