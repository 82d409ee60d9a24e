// The board: drawn as SVG from what the server says (pieces on algebraic squares with their PDN numbers,
// legal moves with every landing square). Nothing here knows a rule: the geometry of a variant's board is
// read from its start position, and a click only ever picks one of the server's legal moves.
import { Color, PieceKind, type Move, type PlacedPiece, type Position } from "./gen/draughts/v1/common_pb.js";
import { t } from "./i18n.js";

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
  /** The board's name for screen readers. */
  label?: string;
  /** A premove was picked (origin and destination; null: the premove was taken back). */
  onPremove?: (premove: { from: string; to: string } | null) => void;
}

/** Whether the reader asked for less motion (then moves are not animated). */
const reducedMotion = () => typeof matchMedia === "function" && matchMedia("(prefers-reduced-motion: reduce)").matches;

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
  /** A piece being dragged: where the pointer went down, and whether it has moved far enough to be a drag. */
  private drag: { pointer: number; sq: string; x: number; y: number; moved: boolean; ghost: SVGGElement | null } | null = null;
  /** The click that ends a drag is not a click on a square. */
  private swallowClick = false;
  /** While the opponent is to move: the colour whose pieces a premove may take (null: no premoves). */
  private premoveColor: Color | null = null;
  private premoveFrom: string | null = null;
  private premove: { from: string; to: string } | null = null;
  /** Moves animated so far (tests and the console read it). */
  animations = 0;

  constructor(container: HTMLElement, private handlers: BoardHandlers = {}) {
    this.svg = el("svg", { class: "board", role: "group", "aria-label": handlers.label ?? t("board.label") });
    container.append(this.svg);
    this.svg.addEventListener("pointerdown", (e) => this.pointerDown(e));
    this.svg.addEventListener("pointermove", (e) => this.pointerMove(e));
    this.svg.addEventListener("pointerup", (e) => this.pointerUp(e));
    this.svg.addEventListener("pointercancel", () => this.endDrag());
    this.svg.addEventListener("click", (e) => {
      if (this.swallowClick) {
        this.swallowClick = false;
        e.stopPropagation();
      }
    }, true);
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

  /**
   * Shows a position. With `animate`, the piece of the last move slides along its path (every landing
   * square) and each captured piece fades as it is jumped.
   */
  setPosition(pieces: PlacedPiece[], lastMove: string[] = [], animate = false) {
    const before = this.pieces;
    this.pieces = pieces;
    this.lastMove = lastMove;
    this.render();
    if (animate && lastMove.length >= 2 && !reducedMotion()) this.animate(before, pieces, lastMove);
  }

  /** The legal moves the player may pick from now (null: the board is read-only). */
  setMoves(moves: Move[] | null) {
    this.moves = moves;
    this.origin = null;
    this.clicks = [];
    this.render();
  }

  /** The square's name as the variant writes it: its PDN number, or algebraic. */
  label(sq: string): string {
    const g = this.geometry;
    if (!g || g.algebraic) return sq;
    return String(g.numbers.get(sq) ?? sq);
  }

  /**
   * A move typed as square names ("32-28", "28x19x10", "c3-d4", "c3 d4"): the legal move whose origin,
   * landing squares (in order, any subset) and destination they name; an error text when none or several.
   */
  moveFromText(text: string): Move | string {
    if (!this.moves || !this.geometry) return t("board.notYourTurn");
    const names = text.trim().toLowerCase().split(/[\s\-x:×]+/).filter((x) => x);
    if (names.length < 2) return t("board.typeTwo");
    const g = this.geometry;
    const bySquare = new Map<string, string>();
    for (let r = 0; r < g.size; r++) for (let f = 0; f < g.size; f++) {
      const sq = squareName(f, r);
      bySquare.set(sq, sq);
      const n = g.numbers.get(sq);
      if (n && !g.algebraic) bySquare.set(String(n), sq);
    }
    const squares: string[] = [];
    for (const n of names) {
      const sq = bySquare.get(n);
      if (!sq) return t("board.noSquare", { name: n });
      squares.push(sq);
    }
    const [from, ...rest] = squares;
    const to = rest[rest.length - 1];
    const fits = this.moves.filter((m) => m.from === from && m.to === to && this.follows(m, rest.slice(0, -1)));
    const exact = this.moves.find((m) => m.notation.toLowerCase() === text.trim().toLowerCase());
    if (exact) return exact;
    if (fits.length === 1) return fits[0];
    if (fits.length > 1) return t("board.ambiguous");
    return t("board.noLegal", { text: text.trim() });
  }

  /** Plays a move picked outside the board (typed), as a click on its squares would. */
  pick(m: Move) {
    if (!this.moves?.includes(m)) return;
    this.origin = null;
    this.clicks = [];
    this.moves = null;
    this.render();
    this.handlers.onMove?.(m);
  }

  /**
   * Premoves: while the opponent is to move, a piece of `color` and an empty square may be picked; the
   * page plays it when the turn comes if it is then a legal move (nothing here knows a rule).
   */
  setPremoveMode(color: Color | null) {
    if (this.premoveColor === color) return;
    this.premoveColor = color;
    this.premoveFrom = null;
    this.render();
  }

  /** The premove shown (null: none). */
  setPremove(p: { from: string; to: string } | null) {
    this.premove = p;
    this.premoveFrom = null;
    this.render();
  }

  private premoveClick(sq: string) {
    const own = this.pieces.find((p) => p.square === sq && p.color === this.premoveColor);
    if (!this.premoveFrom) {
      if (!own) return;
      if (this.premove) this.handlers.onPremove?.(null);
      this.premove = null;
      this.premoveFrom = sq;
    } else if (sq === this.premoveFrom) {
      this.premoveFrom = null;
    } else if (own) {
      this.premoveFrom = sq;
    } else if (!this.pieces.some((p) => p.square === sq)) {
      this.premove = { from: this.premoveFrom, to: sq };
      this.premoveFrom = null;
      this.handlers.onPremove?.(this.premove);
    }
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
        this.handlers.onRefused?.(this.origin ? t("board.noMoveEnds", { sq: this.label(sq) }) : t("board.noMoveFrom", { sq: this.label(sq) }));
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
      this.handlers.onRefused?.(t("board.noMoveGoes", { from: this.label(this.origin), to: this.label(sq) }));
      return;
    }
    const ending = next.filter((m) => m.to === sq);
    if (ending.length === 1) {
      this.pick(ending[0]);
      return;
    }
    if (ending.length > 1) {
      // Several captures share this origin and destination: the landing squares tell them apart.
      this.handlers.onRefused?.(t("board.severalEnd", { sq: this.label(sq) }));
      this.clicks = [];
      this.render();
      return;
    }
    this.clicks.push(sq);
    this.render();
  }

  /** The square under a pointer (null: off the board). */
  private squareAt(clientX: number, clientY: number): string | null {
    const g = this.geometry;
    const m = this.svg.getScreenCTM();
    if (!g || !m) return null;
    const p = new DOMPoint(clientX, clientY).matrixTransform(m.inverse());
    const x = Math.floor(p.x);
    const y = Math.floor(p.y);
    if (x < 0 || y < 0 || x >= g.size || y >= g.size) return null;
    const f = this.flipped ? g.size - 1 - x : x;
    const r = this.flipped ? y : g.size - 1 - y;
    return squareName(f, r);
  }

  private boardPoint(clientX: number, clientY: number): DOMPoint | null {
    const m = this.svg.getScreenCTM();
    return m ? new DOMPoint(clientX, clientY).matrixTransform(m.inverse()) : null;
  }

  // Drag and drop: a press on a movable piece selects it (the legal destinations show at once); moving
  // the pointer carries a copy of the piece; letting go on a square is a click there (a destination plays
  // the move, a landing square narrows a capture); letting go elsewhere puts the piece back.
  private pointerDown(e: PointerEvent) {
    if (!this.moves || e.button !== 0) return;
    const sq = this.squareAt(e.clientX, e.clientY);
    if (!sq || !this.moves.some((m) => m.from === sq)) return;
    this.drag = { pointer: e.pointerId, sq, x: e.clientX, y: e.clientY, moved: false, ghost: null };
  }

  private pointerMove(e: PointerEvent) {
    const d = this.drag;
    if (!d || d.pointer !== e.pointerId) return;
    if (!d.moved) {
      if (Math.hypot(e.clientX - d.x, e.clientY - d.y) < 6) return;
      d.moved = true;
      try {
        this.svg.setPointerCapture(e.pointerId);
      } catch {
        // A synthetic pointer: no capture, the events still come to the board.
      }
      if (this.origin !== d.sq || this.clicks.length) {
        this.origin = d.sq;
        this.clicks = [];
      }
      this.render();
      const from = this.svg.querySelector(`g[data-sq="${d.sq}"]`);
      from?.classList.add("dragging");
      const piece = this.pieces.find((p) => p.square === d.sq);
      if (piece) {
        d.ghost = this.pieceGroup(piece);
        d.ghost.classList.add("drag-ghost");
        this.svg.append(d.ghost);
      }
      this.svg.dataset.dragging = d.sq;
    }
    const p = this.boardPoint(e.clientX, e.clientY);
    if (p && d.ghost) d.ghost.setAttribute("transform", `translate(${p.x - 0.5} ${p.y - 0.5})`);
  }

  private pointerUp(e: PointerEvent) {
    const d = this.drag;
    if (!d || d.pointer !== e.pointerId) return;
    this.endDrag();
    if (!d.moved) return;
    this.swallowClick = true;
    setTimeout(() => (this.swallowClick = false), 0);
    const sq = this.squareAt(e.clientX, e.clientY);
    if (!sq || sq === d.sq) {
      this.render();
      return;
    }
    this.click(sq);
  }

  private endDrag() {
    const d = this.drag;
    this.drag = null;
    d?.ghost?.remove();
    delete this.svg.dataset.dragging;
    this.svg.querySelector(".dragging")?.classList.remove("dragging");
  }

  /** A piece drawn at the origin of a 1×1 cell (for drags and animations; no square attributes). */
  private pieceGroup(p: PlacedPiece): SVGGElement {
    const white = p.color === Color.WHITE;
    const grp = el("g", { class: "floating", "aria-hidden": "true" });
    grp.append(el("circle", { cx: 0.5, cy: 0.5, r: 0.4, class: `piece ${white ? "white" : "black"}` }));
    grp.append(el("circle", { cx: 0.5, cy: 0.5, r: 0.28, class: `ring ${white ? "white" : "black"}` }));
    if (p.kind === PieceKind.KING) {
      const k = el("text", { x: 0.5, y: 0.63, class: `crown ${white ? "white" : "black"}`, "text-anchor": "middle" });
      k.textContent = "♛";
      grp.append(k);
    }
    return grp;
  }

  /** Board coordinates (top-left of the cell) of a square as drawn now. */
  private cell(sq: string): [number, number] {
    const n = this.geometry?.size ?? 8;
    const [f, r] = parseSquare(sq);
    return [this.flipped ? n - 1 - f : f, this.flipped ? r : n - 1 - r];
  }

  /** Slides the moved piece along `path` and fades the pieces it captured as it jumps them. */
  private animate(before: PlacedPiece[], after: PlacedPiece[], path: string[]) {
    const mover = before.find((p) => p.square === path[0]);
    const landed = after.find((p) => p.square === path[path.length - 1]);
    if (!mover || !landed || !this.geometry) return;
    const nowOn = new Set(after.map((p) => p.square));
    const captured = before.filter((p) => p.square !== path[0] && !nowOn.has(p.square));
    const step = Math.min(160, 600 / (path.length - 1));
    const duration = step * (path.length - 1);
    const target = this.svg.querySelector(`g[data-sq="${path[path.length - 1]}"]`);
    const hidden = target ? [...target.querySelectorAll(".piece, .ring, .crown")] : [];
    hidden.forEach((x) => x.classList.add("arriving"));
    const ghost = this.pieceGroup(mover);
    this.svg.append(ghost);
    const frames = path.map((sq, i) => {
      const [x, y] = this.cell(sq);
      return { transform: `translate(${x}px, ${y}px)`, offset: i / (path.length - 1) };
    });
    const fades: SVGGElement[] = [];
    for (const c of captured) {
      const [cx, cy] = this.cell(c.square);
      // The hop that jumps it: the segment of the path it lies on.
      let hop = path.findIndex((sq, i) => i > 0 && between(parseSquare(path[i - 1]), parseSquare(sq), parseSquare(c.square)));
      if (hop < 0) hop = path.length - 1;
      const g = this.pieceGroup(c);
      g.setAttribute("transform", `translate(${cx} ${cy})`);
      g.classList.add("captured");
      this.svg.insertBefore(g, ghost);
      fades.push(g);
      g.animate([{ opacity: 1 }, { opacity: 1, offset: Math.max(0, (hop - 0.5) / (path.length - 1)) }, { opacity: 0 }], { duration, fill: "forwards" });
    }
    this.animations++;
    this.svg.dataset.animations = String(this.animations);
    const done = () => {
      ghost.remove();
      fades.forEach((g) => g.remove());
      hidden.forEach((x) => x.classList.remove("arriving"));
    };
    const anim = ghost.animate(frames, { duration, easing: "ease-in-out" });
    anim.onfinish = done;
    anim.oncancel = done;
  }

  private render() {
    const g = this.geometry;
    const svg = this.svg;
    // A square focused from the keyboard keeps the focus across the redraw.
    const focused = (document.activeElement as Element | null)?.closest?.("g[data-sq]")?.getAttribute("data-sq") ?? null;
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
        if (sq === this.premoveFrom || sq === this.premove?.from || sq === this.premove?.to) cls.push("premove");
        if (sq === this.origin) cls.push("selected");
        grp.append(el("rect", { width: 1, height: 1, class: cls.join(" ") }));
        if (playable && !g.algebraic) {
          const num = el("text", { x: 0.06, y: 0.2, class: "num", "aria-hidden": "true" });
          num.textContent = String(g.numbers.get(sq) ?? "");
          grp.append(num);
        }
        if (g.algebraic && y === n - 1) {
          const c = el("text", { x: 0.94, y: 0.94, class: `coord${playable && !g.all ? " on-dark" : ""}`, "text-anchor": "end", "aria-hidden": "true" });
          c.textContent = sq[0];
          grp.append(c);
        }
        if (g.algebraic && x === 0) {
          const c = el("text", { x: 0.05, y: 0.22, class: `coord${playable && !g.all ? " on-dark" : ""}`, "aria-hidden": "true" });
          c.textContent = String(r + 1);
          grp.append(c);
        }
        const p = bySquare.get(sq);
        let what = "";
        if (p) {
          const white = p.color === Color.WHITE;
          const king = p.kind === PieceKind.KING;
          grp.dataset.piece = `${white ? "white" : "black"}-${king ? "king" : "man"}`;
          what = t(`board.piece.${grp.dataset.piece as "white-man"}`);
          const pc = ["piece", white ? "white" : "black"];
          if (movable.has(sq) && !this.origin) pc.push("movable");
          grp.append(el("circle", { cx: 0.5, cy: 0.5, r: 0.4, class: pc.join(" ") }));
          grp.append(el("circle", { cx: 0.5, cy: 0.5, r: 0.28, class: `ring ${white ? "white" : "black"}` }));
          if (king) {
            const k = el("text", { x: 0.5, y: 0.63, class: `crown ${white ? "white" : "black"}`, "text-anchor": "middle", "aria-hidden": "true" });
            k.textContent = "♛";
            grp.append(k);
          }
        }
        if (targets.has(sq)) {
          grp.classList.add("target");
          grp.append(el("circle", { cx: 0.5, cy: 0.5, r: 0.14, class: "dot" }));
          what = what ? `${what}, ${t("board.destination")}` : t("board.destination");
        } else if (landings.has(sq) && !this.clicks.includes(sq)) {
          grp.classList.add("landing");
          grp.append(el("circle", { cx: 0.5, cy: 0.5, r: 0.22, class: "hop" }));
          what = what ? `${what}, ${t("board.landing")}` : t("board.landing");
        }
        if (this.clicks.includes(sq)) grp.append(el("circle", { cx: 0.5, cy: 0.5, r: 0.14, class: "hop chosen" }));
        if (playable) {
          // Screen readers: the square's name and what is on it; a square one may click is a button.
          const name = g.algebraic ? sq : `${g.numbers.get(sq) ?? ""} (${sq})`;
          grp.setAttribute("aria-label", what ? `${name}: ${what}` : name);
          const clickable = !!this.moves && (movable.has(sq) || targets.has(sq) || landings.has(sq) || sq === this.origin);
          grp.setAttribute("role", clickable ? "button" : "img");
          // Keyboard: Tab to a square one may click, Enter or Space clicks it.
          if (clickable) grp.setAttribute("tabindex", "0");
        }
        if (!this.moves && this.premoveColor !== null && playable) grp.addEventListener("click", () => this.premoveClick(sq));
        if (this.moves) {
          grp.addEventListener("click", () => this.click(sq));
          grp.addEventListener("keydown", (e) => {
            if (e.key !== "Enter" && e.key !== " ") return;
            e.preventDefault();
            this.click(sq);
          });
        }
        svg.append(grp);
        if (sq === focused) queueMicrotask(() => (svg.querySelector(`g[data-sq="${sq}"]`) as SVGGElement | null)?.focus());
      }
    }
    // A drag in progress survives a redraw (a new position, a draw offer): the dragged piece stays dimmed
    // at its square and its copy stays under the pointer.
    const d = this.drag;
    if (d?.moved && d.ghost) {
      svg.querySelector(`g[data-sq="${d.sq}"]`)?.classList.add("dragging");
      svg.append(d.ghost);
    }
  }
}

/** Whether square `c` lies strictly between `a` and `b` on one line (diagonal or orthogonal). */
function between(a: [number, number], b: [number, number], c: [number, number]): boolean {
  const [dx, dy] = [b[0] - a[0], b[1] - a[1]];
  const [cx, cy] = [c[0] - a[0], c[1] - a[1]];
  if (dx * cy - dy * cx !== 0) return false;
  const along = dx !== 0 ? cx / dx : cy / dy;
  return along > 0 && along < 1;
}
