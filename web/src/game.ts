// A live game: the board, clocks, move list and actions for its players (one or, hot-seat, both), and
// the same view read-only for spectators. Events come from Games.WatchGame (reconnected after a drop);
// the position after each move is read with Games.GetGame, the legal moves with Rules.ListMoves.
import { create } from "@bufbuild/protobuf";
import { Color, EndReason, Outcome, type Move } from "./gen/draughts/v1/common_pb.js";
import { PlayerSchema } from "./gen/draughts/v1/common_pb.js";
import type { GameView, PlayedMove } from "./gen/draughts/v1/games_pb.js";
import {
  bearer,
  canAnalyse,
  Code,
  ConnectError,
  describeError,
  ensureIdentity,
  games,
  hotseatIdentity,
  identityRefused,
  playerName,
  ratings,
  retrying,
  rules as rulesApi,
  setHotseatIdentity,
  sleep,
  type Identity,
} from "./api.js";
import { BoardView, type Geometry } from "./board.js";
import { clockText, h, toast } from "./dom.js";
import { t, tDynamic } from "./i18n.js";
import { setSound, soundOn, sounds } from "./sound.js";
import { awaiting } from "./events.js";
import { geometryOf, rulesLabel, variantKey } from "./variants.js";
import { timeControlText } from "./timecontrol.js";
import { playerLink, ratingFor, ratingText } from "./profile.js";

const PREMOVES = "draughts.premoves";
const other = (c: Color) => (c === Color.WHITE ? Color.BLACK : Color.WHITE);
const colorName = (c: Color) => (c === Color.WHITE ? t("color.white") : t("color.black"));

export function gamePage(root: HTMLElement, gameId: string): () => void {
  const abort = new AbortController();
  let closed = false;
  let me: Identity | null = null;
  let hot: Identity | null = null;
  let view: GameView | null = null;
  let moves: PlayedMove[] = [];
  let geometry: Geometry | null = null;
  let lastSeq = 0n;
  let refreshing: Promise<void> | null = null;
  let again = false;
  let browsing: number | null = null;
  let userFlip: boolean | null = null;
  /** The ply the board shows (-1: none yet, or a browsed position): one more is animated. */
  let shownPly = -1;
  let lostOnce = false;
  /** The game was seen ongoing on this page: its end is announced with a sound. */
  let sawOngoing = false;
  let ratingAsked = false;

  const status = h("div", { class: "status", "data-testid": "status", role: "status" }, t("common.loading"));
  const conn = h("div", { class: "conn", "data-testid": "connection" });
  const boardBox = h("div", { class: "board-box" });
  const top = h("div", { class: "player top" });
  const bottom = h("div", { class: "player bottom" });
  const actions = h("div", { class: "actions" });
  const moveList = h("ol", { class: "moves", "data-testid": "moves" });
  const info = h("div", { class: "info" });
  // The result when the game ends (reason, and the rating change of a rated game); who is watching.
  const banner = h("div", { class: "result-banner", "data-testid": "result-banner", hidden: true, role: "alert" });
  const watching = h("div", { class: "watching", "data-testid": "watching", hidden: true });
  // Moves typed as square names (keyboard play): "32-28", "c3-d4", "28x19x10".
  const typed = h("input", { class: "typed-move", "data-testid": "typed-move", placeholder: t("game.typePlaceholder", { example: "32-28" }), "aria-label": t("game.typeLabel"), autocomplete: "off", disabled: true });
  const typedForm = h(
    "form",
    {
      class: "row typed",
      onsubmit: (e: Event) => {
        e.preventDefault();
        const m = board.moveFromText(typed.value);
        if (typeof m === "string") {
          toast(m, "error");
          status.dataset.refused = String(Number(status.dataset.refused ?? 0) + 1);
          return;
        }
        typed.value = "";
        board.pick(m);
      },
    },
    typed,
    h("button", { type: "submit", "data-testid": "typed-play" }, t("game.play")),
  );
  const soundBox = h("input", { type: "checkbox", "data-testid": "sound", checked: soundOn() });
  soundBox.addEventListener("change", () => setSound(soundBox.checked));
  // Premoves (optional, kept in localStorage): a move picked while the opponent is to move, played when
  // the turn comes if it is legal then, dropped otherwise.
  const premoveBox = h("input", { type: "checkbox", "data-testid": "premove", checked: localStorage.getItem(PREMOVES) === "on" });
  let premove: { from: string; to: string } | null = null;
  const premoveState = h("div", { class: "hint", "data-testid": "premove-state" });
  premoveBox.addEventListener("change", () => {
    localStorage.setItem(PREMOVES, premoveBox.checked ? "on" : "off");
    if (!premoveBox.checked) setPremove(null);
    void offerMoves();
  });
  function setPremove(p: { from: string; to: string } | null) {
    premove = p;
    board.setPremove(p);
    premoveState.textContent = p ? t("game.premoveSet", { from: board.label(p.from), to: board.label(p.to) }) : "";
    premoveState.dataset.premove = p ? `${p.from}-${p.to}` : "";
  }
  root.replaceChildren(
    h(
      "div",
      { class: "game" },
      h("div", { class: "left" }, banner, top, boardBox, bottom, typedForm),
      h("div", { class: "right" }, watching, info, status, conn, actions, h("div", { class: "row" }, h("label", { class: "sound" }, soundBox, ` ${t("game.sound")}`), h("label", { class: "sound" }, premoveBox, ` ${t("game.premoves")}`)), premoveState, moveList),
    ),
  );
  const board = new BoardView(boardBox, {
    onMove: (m) => void play(m),
    onRefused: (why) => {
      toast(t("game.notLegal", { why }), "error");
      status.dataset.refused = String(Number(status.dataset.refused ?? 0) + 1);
    },
    onPremove: (p) => setPremove(p),
  });

  /** The colours this browser plays in this game. */
  function myColors(): Set<Color> {
    const s = new Set<Color>();
    if (!view) return s;
    for (const id of [me, hot]) {
      if (!id) continue;
      if (view.white?.id === id.id) s.add(Color.WHITE);
      if (view.black?.id === id.id) s.add(Color.BLACK);
    }
    return s;
  }

  function tokenFor(c: Color): Identity | null {
    if (!view) return null;
    const pid = c === Color.WHITE ? view.white?.id : view.black?.id;
    return [me, hot].find((i) => i && i.id === pid) ?? null;
  }

  const ongoing = () => view?.status?.outcome === Outcome.ONGOING;
  const sideToMove = () => view?.position?.sideToMove ?? Color.WHITE;

  function orientation(): boolean {
    if (userFlip !== null) return userFlip;
    const mine = myColors();
    return mine.size === 1 && mine.has(Color.BLACK);
  }

  function clockOf(c: Color): number {
    const k = view?.clocks;
    if (!k) return 0;
    const ms = Number(c === Color.WHITE ? k.whiteMs : k.blackMs);
    if (clockRuns(c)) return ms - (Date.now() - Number(k.atMs));
    return ms;
  }

  /**
   * Whether a side's clock is running. Before both sides have moved no clock runs (the server names the
   * side to move all the same): the first move has its own limit, `first_move_deadline_ms`.
   */
  function clockRuns(c: Color): boolean {
    return view?.clocks?.running === c && ongoing() && !Number(view.firstMoveDeadlineMs);
  }

  // Each side's bar: built when the game changes, its clock and first-move countdown updated by the tick
  // (the name stays the same element, so a click on its link is not lost to a redraw).
  const bars = new Map<Color, { clock: HTMLElement; first: HTMLElement }>();
  /** Ratings shown next to the names (the players' ratings in the game's category, where known). */
  const ratingShown = new Map<string, string>();

  function loadRatings() {
    if (!view) return;
    const v = view;
    for (const p of [v.white, v.black]) {
      if (!p?.id || p.computer) continue;
      void ratingFor(p.id, v.rules?.variant, v.timeControl).then((r) => {
        if (!r || closed) return;
        ratingShown.set(p.id, ratingText(r));
        renderPlayers();
      });
    }
  }

  function renderPlayers() {
    if (!view) return;
    const flipped = board.isFlipped();
    const [tc, bc] = flipped ? [Color.WHITE, Color.BLACK] : [Color.BLACK, Color.WHITE];
    for (const [box, c] of [[top, tc], [bottom, bc]] as const) {
      const p = c === Color.WHITE ? view.white : view.black;
      const side = c === Color.WHITE ? "white" : "black";
      const rating = p ? ratingShown.get(p.id) : undefined;
      const clock = h("span", { class: "clock", "data-testid": `clock-${side}` });
      const first = h("span", { class: "first-move", "data-testid": `first-move-${side}`, title: t("game.firstMoveHint") });
      box.replaceChildren(
        h("span", { class: `swatch ${c === Color.WHITE ? "white" : "black"}` }),
        h(
          "span",
          { class: "name", "data-testid": `name-${side}` },
          playerLink(p?.id ?? "", p?.computer && /^ai:\d+$/.test(p.id) ? t("game.computerLevel", { n: p.id.slice(3) }) : playerName(p)),
          p?.computer ? h("span", { class: "badge computer", "data-testid": `computer-${side}` }, t("game.computer")) : "",
          // A program playing through the API (the server's mark: Player.bot).
          p?.bot ? h("span", { class: "badge bot", "data-testid": `bot-${side}` }, t("game.bot")) : "",
          // Went berserk in an arena game: half the time, no increment.
          (c === Color.WHITE ? view.whiteBerserk : view.blackBerserk)
            ? h("span", { class: "badge berserk", "data-testid": `berserk-${side}` }, t("game.berserkBadge"))
            : "",
          p?.guest ? h("span", { class: "badge guest" }, t("game.guest")) : "",
          rating ? h("span", { class: "rating", "data-testid": `rating-${side}` }, ` (${rating})`) : "",
        ),
        first,
        clock,
      );
      bars.set(c, { clock, first });
    }
    tickClocks();
  }

  function tickClocks() {
    if (!view) return;
    const corr = view.timeControl?.kind.case === "correspondence";
    const deadline = Number(view.firstMoveDeadlineMs);
    for (const [c, { clock, first }] of bars) {
      const running = clockRuns(c);
      clock.className = `clock${running ? " running" : ""}`;
      clock.textContent = corr ? `${(clockOf(c) / 3_600_000).toFixed(1)} h` : clockText(clockOf(c));
      // Before both sides have moved the clock does not run, but the first move has its own limit.
      if (deadline && ongoing() && c === sideToMove()) {
        const left = Math.max(0, Math.ceil((deadline - Date.now()) / 1000));
        first.textContent = t("game.firstMove", { n: left });
        first.dataset.left = String(left);
        first.classList.toggle("urgent", left <= 10);
      } else {
        first.textContent = "";
        delete first.dataset.left;
      }
    }
  }

  function statusText(): string {
    if (!view) return t("common.loading");
    if (!ongoing()) return resultText(view);
    const mine = myColors();
    const stm = sideToMove();
    let text = t("game.toMove", { side: colorName(stm) });
    if (mine.has(stm)) text += mine.size === 2 ? ` (${playerName(stm === Color.WHITE ? view.white : view.black)})` : ` — ${t("game.yourMove")}`;
    if (view.drawOffer) text += ` · ${t("game.offersDraw", { side: colorName(view.drawOffer) })}`;
    return text;
  }

  /** The result as players read it: who won and why. */
  function resultText(v: GameView): string {
    const o = v.status?.outcome;
    const who =
      o === Outcome.WHITE_WINS ? t("game.whiteWins") : o === Outcome.BLACK_WINS ? t("game.blackWins") : o === Outcome.DRAW ? t("game.draw") : o === Outcome.ABORTED ? t("game.aborted") : t("game.over");
    const reasonKey = (EndReason[v.status?.reason ?? 0] ?? "UNSPECIFIED").toLowerCase();
    const reason = v.status?.reason && v.status.reason !== EndReason.ABORTED ? tDynamic(`reason.${reasonKey}`, v.status.description) : "";
    return reason ? `${who} · ${reason}` : who;
  }

  /** The banner over the board once the game is over (and the rating change of a rated game). */
  function renderBanner() {
    if (!view) return;
    const mine = myColors();
    watching.hidden = mine.size > 0;
    // GetGame counts the spectators (this reader among them once the server has counted it).
    const others = view.spectators ?? 0;
    watching.textContent = mine.size > 0 ? "" : others > 0 ? `${t("game.watching")} · ${t("game.spectators", { count: others })}` : t("game.watching");
    watching.dataset.spectators = String(others);
    if (ongoing()) {
      sawOngoing = true;
      banner.hidden = true;
      return;
    }
    const o = view.status?.outcome;
    const mineOne = mine.size === 1 ? [...mine][0] : null;
    let headline = resultText(view);
    let kind = "neutral";
    if (mineOne !== null && (o === Outcome.WHITE_WINS || o === Outcome.BLACK_WINS)) {
      const won = (o === Outcome.WHITE_WINS) === (mineOne === Color.WHITE);
      kind = won ? "won" : "lost";
      headline = `${won ? t("game.youWon") : t("game.youLost")} · ${headline}`;
    }
    if (banner.hidden && sawOngoing) sounds.end();
    banner.hidden = false;
    banner.dataset.outcome = String(o ?? 0);
    banner.dataset.kind = kind;
    banner.replaceChildren(
      h("b", { "data-testid": "result-text" }, headline),
      h("span", { class: "result-score" }, view.status?.result && view.status.result !== "*" ? ` ${view.status.result}` : ""),
      ratingLine,
    );
    if (view.rated && mineOne !== null && me && !ratingAsked) {
      ratingAsked = true;
      void showRatingChange(me);
    }
  }

  const ratingLine = h("div", { class: "rating-change", "data-testid": "rating-change" });
  /** The player's rating change from this game (the profile's recent games; it lands within seconds). */
  async function showRatingChange(id: Identity) {
    for (let i = 0; i < 10 && !closed; i++) {
      try {
        const p = await ratings.getProfile({ playerId: id.id, recentGames: 10 }, bearer(id));
        const g = p.recentGames.find((x) => x.gameId === gameId);
        if (g) {
          const d = Math.round(g.ratingChange);
          ratingLine.textContent = t("game.ratingChange", { change: `${d >= 0 ? "+" : "−"}${Math.abs(d)}`, rating: Math.round(g.rating) });
          ratingLine.dataset.change = String(d);
          return;
        }
      } catch {
        // Ratings not reachable: try again in a moment.
      }
      await sleep(1500);
    }
  }

  function button(label: string, testid: string, f: () => Promise<unknown>) {
    return h(
      "button",
      {
        "data-testid": testid,
        onclick: async (e: Event) => {
          const b = e.currentTarget as HTMLButtonElement;
          b.disabled = true;
          try {
            await f();
          } catch (err) {
            toast(describeError(err), "error");
          } finally {
            b.disabled = false;
          }
        },
      },
      label,
    );
  }

  function renderActions() {
    if (!view) return;
    const mine = myColors();
    const out: HTMLElement[] = [];
    const v = view;
    if (ongoing() && mine.size > 0) {
      // Hot-seat: the side to move acts; otherwise this browser's one side.
      const actor = mine.size === 2 ? sideToMove() : [...mine][0];
      const act = (name: "resign" | "offerDraw" | "acceptDraw" | "declineDraw" | "abort", c: Color) =>
        retrying(() => games[name]({ gameId }, bearer(tokenFor(c)))).then(applyView);
      if (moves.length < 2) out.push(button(t("game.abort"), "abort", () => act("abort", actor)));
      // Arena games: berserk before one's own first move (the server refuses it after).
      const berserk = actor === Color.WHITE ? v.whiteBerserk : v.blackBerserk;
      if (v.berserkAllowed && mine.size === 1 && !berserk && !moves.some((m) => m.side === actor)) {
        const b = button(t("game.berserk"), "berserk", () =>
          retrying(() => games.berserk({ gameId }, bearer(tokenFor(actor)))).then(applyView),
        );
        b.title = t("game.berserkHint");
        out.push(b);
      }
      out.push(button(mine.size === 2 ? t("game.resignSide", { side: colorName(actor) }) : t("game.resign"), "resign", () => act("resign", actor)));
      const offer = v.drawOffer;
      if (offer && mine.has(other(offer))) {
        out.push(button(t("game.acceptDraw"), "accept-draw", () => act("acceptDraw", other(offer))));
        out.push(button(t("game.declineDraw"), "decline-draw", () => act("declineDraw", other(offer))));
      } else if (!offer) {
        out.push(button(t("game.offerDraw"), "offer-draw", () => act("offerDraw", actor)));
      }
    }
    if (!ongoing() && mine.size > 0) out.push(button(t("game.rematch"), "rematch", rematch));
    if (!ongoing() && v.status?.outcome !== Outcome.ABORTED) {
      // Analysis needs the analysis scope (accounts have it): a guest is offered an account instead.
      if (me?.kind === "guest" && !canAnalyse(me))
        out.push(h("a", { class: "button", href: `#/signup?next=${encodeURIComponent(`#/analysis/${gameId}`)}`, "data-testid": "signup-to-analyse" }, t("analysis.signUpToAnalyse")));
      else out.push(h("a", { class: "button", href: `#/analysis/${gameId}`, "data-testid": "analyse" }, t("game.analyse")));
    }
    out.push(
      h(
        "button",
        {
          "data-testid": "flip",
          onclick: () => {
            userFlip = !board.isFlipped();
            board.setFlipped(userFlip);
            renderPlayers();
          },
        },
        t("game.flip"),
      ),
    );
    out.push(
      h(
        "button",
        {
          onclick: () => {
            void navigator.clipboard?.writeText(`${location.origin}/#/game/${gameId}`);
            toast(t("game.watchLinkCopied"));
          },
        },
        t("game.copyWatchLink"),
      ),
    );
    actions.replaceChildren(...out);
  }

  async function rematch() {
    if (!view || !me) return;
    const v = view;
    const mine = myColors();
    const opp = mine.has(Color.WHITE) ? v.black : v.white;
    if (opp?.computer) {
      // The computer needs no invitation: a new game with the colours swapped.
      const iWasWhite = v.white?.id === me.id;
      const g = await retrying(() =>
        games.createGame(
          {
            rules: v.rules,
            timeControl: v.timeControl,
            white: create(PlayerSchema, { id: iWasWhite ? opp.id : "" }),
            black: create(PlayerSchema, { id: iWasWhite ? "" : opp.id }),
          },
          bearer(me),
        ),
      );
      location.hash = `#/game/${g.gameId}`;
      return;
    }
    const inv = await retrying(() => games.offerRematch({ gameId }, bearer(me)));
    if (hot) {
      // Hot-seat: the second player on this screen accepts at once.
      const g = await retrying(() => games.acceptInvitation({ invitationId: inv.invitationId }, bearer(hot)));
      setHotseatIdentity(g.gameId, hot);
      location.hash = `#/game/${g.gameId}`;
      return;
    }
    awaiting.add(inv.invitationId);
    toast(t("game.rematchOffered"));
  }

  function renderMoves() {
    const items: HTMLElement[] = [];
    for (let i = 0; i < moves.length; i += 2) {
      const pair = moves.slice(i, i + 2);
      items.push(
        h(
          "li",
          {},
          ...pair.map((m) =>
            h(
              "button",
              {
                class: `mv${browsing === m.ply ? " at" : ""}`,
                "data-ply": m.ply,
                onclick: () => void browse(m.ply),
              },
              m.move?.notation ?? "?",
            ),
          ),
        ),
      );
    }
    moveList.replaceChildren(...items);
    moveList.scrollTop = moveList.scrollHeight;
  }

  function render() {
    if (!view || !geometry) return;
    const flip = orientation();
    if (board.isFlipped() !== flip) board.setFlipped(flip);
    info.replaceChildren(
      h("div", {}, `${rulesLabel(view.rules)} · ${timeControlText(view.timeControl)}${view.rated ? ` · ${t("common.rated")}` : ""}`),
      h("div", { class: "gid" }, t("game.id", { id: gameId })),
    );
    if (browsing === null) {
      const last = moves[moves.length - 1];
      // One new move since the last drawing: it slides into place (with a sound when they are on).
      const fresh = shownPly >= 0 && moves.length === shownPly + 1 && !!last;
      board.setPosition(view.position?.pieces ?? [], last?.move?.path ?? [], fresh);
      if (fresh) (last.move?.captured.length ? sounds.capture : sounds.move)();
      shownPly = moves.length;
    }
    renderPlayers();
    renderBanner();
    status.textContent = browsing === null ? statusText() : t("game.browsing", { n: browsing });
    status.dataset.outcome = String(view.status?.outcome ?? 0);
    status.dataset.ply = String(moves.length);
    renderActions();
    renderMoves();
  }

  async function browse(ply: number) {
    if (!view) return;
    if (ply >= moves.length) {
      browsing = null;
      render();
      await offerMoves();
      return;
    }
    browsing = ply;
    board.setMoves(null);
    const r = await retrying(() =>
      rulesApi.applyMoves(
        { rules: view!.rules, fen: view!.startFen, moves: moves.slice(0, ply).map((m) => ({ move: { case: "squares", value: { squares: m.move?.path ?? [] } } })) },
        bearer(me),
      ),
    );
    board.setPosition(r.position?.pieces ?? [], moves[ply - 1]?.move?.path ?? []);
    shownPly = -1;
    render();
  }

  /** Lets the player pick a move when it is this browser's turn. */
  async function offerMoves() {
    if (!view || browsing !== null) return;
    const mine = myColors();
    if (!ongoing() || !mine.has(sideToMove())) {
      board.setMoves(null);
      typed.disabled = true;
      // The opponent to move: premoves, when on, for a player of one side (not hot-seat, not a spectator).
      board.setPremoveMode(ongoing() && premoveBox.checked && mine.size === 1 ? [...mine][0] : null);
      if (!ongoing() && premove) setPremove(null);
      return;
    }
    board.setPremoveMode(null);
    const fen = view.position?.fen ?? "";
    const r = await retrying(() => rulesApi.listMoves({ rules: view!.rules, fen }, bearer(me)));
    if (view.position?.fen === fen && browsing === null) {
      if (premove) {
        // The turn has come: the premove is played if exactly one legal move goes from its origin to its square.
        const p = premove;
        const fits = r.moves.filter((m) => m.from === p.from && m.to === p.to);
        setPremove(null);
        if (fits.length === 1) {
          void play(fits[0]);
          return;
        }
        toast(t("game.premoveDropped", { from: board.label(p.from), to: board.label(p.to) }));
      }
      board.setMoves(r.moves);
      typed.disabled = false;
    }
  }

  function applyView(v: GameView) {
    if (!view) return;
    if (v.revision < view.revision) return;
    const firstPly = v.firstPly;
    if (firstPly === 1 || (firstPly === 0 && v.moves.length === 0)) moves = [...v.moves];
    else if (v.moves.length > 0 && firstPly <= moves.length + 1) moves = [...moves.slice(0, firstPly - 1), ...v.moves];
    else if (v.moves.length > 0) {
      // Moves between ours and this answer were missed: read the whole game.
      void refresh();
      return;
    }
    view = { ...v, moves } as GameView;
    render();
    void offerMoves();
  }

  async function play(m: Move) {
    if (!view) return;
    const c = sideToMove();
    const id = tokenFor(c);
    try {
      const v = await retrying(() =>
        games.playMove(
          { gameId, move: { move: { case: "squares", value: { squares: m.path } } }, expectedPly: moves.length },
          bearer(id),
        ),
      );
      applyView(v);
    } catch (e) {
      toast(describeError(e), "error");
      await refresh();
    }
  }

  /** GetGame, coalesced: one call in flight, one more if something happened meanwhile. */
  function refresh(): Promise<void> {
    if (refreshing) {
      again = true;
      return refreshing;
    }
    refreshing = (async () => {
      do {
        again = false;
        const v = await retrying(() => games.getGame({ gameId }, bearer(me)));
        if (!view) {
          view = v;
          moves = [...v.moves];
          geometry = (await geometryOf(v.rules!.variant)).geometry;
          board.setGeometry(geometry);
          typed.placeholder = t("game.typePlaceholder", { example: geometry.algebraic ? "c3-d4" : "32-28" });
          render();
          loadRatings();
          void offerMoves();
        } else applyView(v);
        document.title = `${variantKey(v.rules?.variant)} · ${statusText()}`;
      } while (again && !closed);
    })().finally(() => (refreshing = null));
    return refreshing;
  }

  async function watch() {
    let backoff = 500;
    let notFound = 0;
    while (!closed) {
      try {
        const stream = games.watchGame({ gameId }, { ...bearer(me), signal: abort.signal });
        let first = true;
        let finished = false;
        for await (const ev of stream) {
          if (first) {
            first = false;
            // Back after a drop: say so for a moment.
            conn.textContent = lostOnce ? t("game.restored") : "";
            conn.dataset.state = lostOnce ? "restored" : "live";
            if (lostOnce) setTimeout(() => {
              if (conn.dataset.state === "restored") {
                conn.textContent = "";
                conn.dataset.state = "live";
              }
            }, 3000);
            backoff = 500;
            void refresh();
            // A spectator: read the count again once the server has counted this stream.
            if (view && myColors().size === 0) setTimeout(() => void refresh(), 1500);
          }
          if (ev.seq <= lastSeq) continue;
          lastSeq = ev.seq;
          const k = ev.kind;
          if (k.case === "movePlayed" && k.value.ply <= moves.length) continue;
          if (k.case === "created") continue;
          if (k.case === "finished") finished = true;
          void refresh();
        }
        if (finished || (view && !ongoing())) {
          await refresh();
          return;
        }
      } catch (e) {
        if (closed) return;
        const err = ConnectError.from(e);
        // An account's access token refused (expired): refresh it before coming back.
        if (err.code === Code.Unauthenticated && me?.kind === "account") await identityRefused(me);
        // An invitation is reported accepted a moment before its game exists: a just-accepted game
        // may be NOT_FOUND for that moment, so look a few times before giving up.
        if (err.code === Code.InvalidArgument || (err.code === Code.NotFound && (view || ++notFound > 6))) {
          status.textContent = t("game.noSuch", { id: gameId });
          conn.textContent = "";
          return;
        }
        if (err.code === Code.NotFound) {
          status.textContent = t("game.looking");
          await sleep(backoff);
          backoff = Math.min(backoff * 2, 4000);
          continue;
        }
      }
      // The stream ended or broke (e.g. the server restarted): show it and come back.
      conn.dataset.state = "reconnecting";
      conn.textContent = t("game.reconnecting");
      lostOnce = true;
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 4000);
      lastSeq = 0n;
    }
  }

  const tick = window.setInterval(() => {
    if (view && ongoing()) tickClocks();
  }, 200);

  void (async () => {
    try {
      me = await ensureIdentity();
      hot = hotseatIdentity(gameId);
      await watch();
    } catch (e) {
      status.textContent = describeError(e);
    }
  })();

  // While a spectator watches a game in progress, the number of spectators is read again every 20 s.
  const spectatorsTimer = setInterval(() => {
    if (!closed && view && ongoing() && myColors().size === 0) void refresh();
  }, 20_000);
  return () => {
    clearInterval(spectatorsTimer);
    closed = true;
    abort.abort();
    clearInterval(tick);
  };
}
