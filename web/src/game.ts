// A live game: the board, clocks, move list and actions for its players (one or, hot-seat, both), and
// the same view read-only for spectators. Events come from Games.WatchGame (reconnected after a drop);
// the position after each move is read with Games.GetGame, the legal moves with Rules.ListMoves.
import { create } from "@bufbuild/protobuf";
import { Color, Outcome, type Move } from "./gen/draughts/v1/common_pb.js";
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
  retrying,
  rules as rulesApi,
  setHotseatIdentity,
  sleep,
  type Identity,
} from "./api.js";
import { BoardView, type Geometry } from "./board.js";
import { clockText, h, toast } from "./dom.js";
import { awaiting } from "./events.js";
import { geometryOf, rulesLabel, variantKey } from "./variants.js";
import { timeControlText } from "./timecontrol.js";
import { playerLink, ratingFor, ratingText } from "./profile.js";

const other = (c: Color) => (c === Color.WHITE ? Color.BLACK : Color.WHITE);
const colorName = (c: Color) => (c === Color.WHITE ? "White" : "Black");

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

  const status = h("div", { class: "status", "data-testid": "status" }, "Loading…");
  const conn = h("div", { class: "conn", "data-testid": "connection" });
  const boardBox = h("div", { class: "board-box" });
  const top = h("div", { class: "player top" });
  const bottom = h("div", { class: "player bottom" });
  const actions = h("div", { class: "actions" });
  const moveList = h("ol", { class: "moves", "data-testid": "moves" });
  const info = h("div", { class: "info" });
  root.replaceChildren(
    h("div", { class: "game" }, h("div", { class: "left" }, top, boardBox, bottom), h("div", { class: "right" }, info, status, conn, actions, moveList)),
  );
  const board = new BoardView(boardBox, {
    onMove: (m) => void play(m),
    onRefused: (why) => {
      toast(`Not a legal move: ${why}`, "error");
      status.dataset.refused = String(Number(status.dataset.refused ?? 0) + 1);
    },
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
      const side = colorName(c).toLowerCase();
      const rating = p ? ratingShown.get(p.id) : undefined;
      const clock = h("span", { class: "clock", "data-testid": `clock-${side}` });
      const first = h("span", { class: "first-move", "data-testid": `first-move-${side}`, title: "Time left for the first move: the game is aborted when it runs out; the clock starts once both sides have moved" });
      box.replaceChildren(
        h("span", { class: `swatch ${c === Color.WHITE ? "white" : "black"}` }),
        h(
          "span",
          { class: "name", "data-testid": `name-${side}` },
          playerLink(p?.id ?? "", playerName(p)),
          p?.computer ? " (computer)" : "",
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
        first.textContent = `first move: ${left} s`;
        first.dataset.left = String(left);
        first.classList.toggle("urgent", left <= 10);
      } else {
        first.textContent = "";
        delete first.dataset.left;
      }
    }
  }

  function statusText(): string {
    if (!view) return "Loading…";
    const s = view.status;
    if (!ongoing()) return s?.description ?? "over";
    const mine = myColors();
    const stm = sideToMove();
    let t = `${colorName(stm)} to move`;
    if (mine.has(stm)) t += mine.size === 2 ? ` (${playerName(stm === Color.WHITE ? view.white : view.black)})` : " — your move";
    if (view.drawOffer) t += ` · ${colorName(view.drawOffer)} offers a draw`;
    return t;
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
      if (moves.length < 2) out.push(button("Abort", "abort", () => act("abort", actor)));
      out.push(button(mine.size === 2 ? `Resign (${colorName(actor)})` : "Resign", "resign", () => act("resign", actor)));
      const offer = v.drawOffer;
      if (offer && mine.has(other(offer))) {
        out.push(button("Accept draw", "accept-draw", () => act("acceptDraw", other(offer))));
        out.push(button("Decline draw", "decline-draw", () => act("declineDraw", other(offer))));
      } else if (!offer) {
        out.push(button("Offer draw", "offer-draw", () => act("offerDraw", actor)));
      }
    }
    if (!ongoing() && mine.size > 0) out.push(button("Rematch", "rematch", rematch));
    if (!ongoing() && v.status?.outcome !== Outcome.ABORTED) {
      // Analysis needs the analysis scope (accounts have it): a guest is offered an account instead.
      if (me?.kind === "guest" && !canAnalyse(me))
        out.push(h("a", { class: "button", href: `#/signup?next=${encodeURIComponent(`#/analysis/${gameId}`)}`, "data-testid": "signup-to-analyse" }, "Sign up to analyse"));
      else out.push(h("a", { class: "button", href: `#/analysis/${gameId}`, "data-testid": "analyse" }, "Analyse"));
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
        "Flip board",
      ),
    );
    out.push(
      h(
        "button",
        {
          onclick: () => {
            void navigator.clipboard?.writeText(`${location.origin}/#/game/${gameId}`);
            toast("Link to watch this game copied");
          },
        },
        "Copy watch link",
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
    toast("Rematch offered: waiting for the opponent");
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
      h("div", {}, `${rulesLabel(view.rules)} · ${timeControlText(view.timeControl)}${view.rated ? " · rated" : ""}`),
      h("div", { class: "gid" }, `game ${gameId}`),
    );
    if (browsing === null) {
      const last = moves[moves.length - 1];
      board.setPosition(view.position?.pieces ?? [], last?.move?.path ?? []);
    }
    renderPlayers();
    status.textContent = browsing === null ? statusText() : `Ply ${browsing} (click the last move to return)`;
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
    render();
  }

  /** Lets the player pick a move when it is this browser's turn. */
  async function offerMoves() {
    if (!view || browsing !== null) return;
    if (!ongoing() || !myColors().has(sideToMove())) {
      board.setMoves(null);
      return;
    }
    const fen = view.position?.fen ?? "";
    const r = await retrying(() => rulesApi.listMoves({ rules: view!.rules, fen }, bearer(me)));
    if (view.position?.fen === fen && browsing === null) board.setMoves(r.moves);
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
            conn.textContent = "";
            conn.dataset.state = "live";
            backoff = 500;
            void refresh();
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
          status.textContent = `No such game: ${gameId}`;
          conn.textContent = "";
          return;
        }
        if (err.code === Code.NotFound) {
          status.textContent = "Looking for the game…";
          await sleep(backoff);
          backoff = Math.min(backoff * 2, 4000);
          continue;
        }
      }
      // The stream ended or broke (e.g. the server restarted): show it and come back.
      conn.dataset.state = "reconnecting";
      conn.textContent = "Connection lost: reconnecting…";
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

  return () => {
    closed = true;
    abort.abort();
    clearInterval(tick);
  };
}
