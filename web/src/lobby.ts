// The lobby: the lobby's numbers (WatchLobby); a quick seek in the server's pools; pick a variant, rule
// options and a time control to play the computer, offer a lobby seek, challenge a named player or by
// link, or play two people on this screen; the lobby's open seeks; watch a game; the player's own games;
// who this browser is.
import { create } from "@bufbuild/protobuf";
import { Color } from "./gen/draughts/v1/common_pb.js";
import { PlayerSchema } from "./gen/draughts/v1/common_pb.js";
import {
  adoptedRecently,
  bearer,
  canAnalyse,
  currentIdentity,
  describeError,
  ensureIdentity,
  games,
  matchmaking,
  newGuest,
  resetIdentity,
  retrying,
  rules as rulesApi,
  setHotseatIdentity,
  setIdentity,
  signOut,
} from "./api.js";
import { playerLink } from "./profile.js";
import { BoardView } from "./board.js";
import { h, toast } from "./dom.js";
import { geometryOf, ruleSet, variantLabel, VARIANTS } from "./variants.js";
import { TIME_CONTROLS } from "./timecontrol.js";
import { awaiting } from "./events.js";
import { lobbySeeksPanel, quickSeekPanel, rangeOf, watchLobby } from "./matchmaking.js";
import type { LobbyStats } from "./gen/draughts/v1/matchmaking_pb.js";

const PREFS = "draughts.lobby";

interface Prefs {
  variant: string;
  noMandatoryCapture: boolean;
  promoteMidCapture: boolean;
  moveLimit: number;
  time: string;
  color: string;
  level: number;
}

function loadPrefs(): Prefs {
  const d: Prefs = { variant: "international", noMandatoryCapture: false, promoteMidCapture: false, moveLimit: 0, time: "5+3", color: "white", level: 2 };
  try {
    return { ...d, ...(JSON.parse(localStorage.getItem(PREFS) ?? "{}") as Partial<Prefs>) };
  } catch {
    return d;
  }
}

export function lobbyPage(root: HTMLElement): () => void {
  const prefs = loadPrefs();
  // A link like #/?variant=english picks the variant (the tests' board screenshots use it).
  const q = new URLSearchParams(location.hash.split("?")[1] ?? "");
  if (q.get("variant")) prefs.variant = q.get("variant")!;
  let closed = false;

  const select = (testid: string, options: [string, string][], value: string) =>
    h("select", { "data-testid": testid }, ...options.map(([v, l]) => h("option", { value: v, selected: v === value }, l)));
  const variantSel = select("variant", VARIANTS.map((v) => [v.key, v.label]), prefs.variant);
  const nmc = h("input", { type: "checkbox", "data-testid": "opt-no-mandatory-capture", checked: prefs.noMandatoryCapture });
  const pmc = h("input", { type: "checkbox", "data-testid": "opt-promote-mid-capture", checked: prefs.promoteMidCapture });
  const limit = h("input", { type: "number", min: 0, max: 1000, value: String(prefs.moveLimit), "data-testid": "opt-move-limit", class: "small" });
  // A start position other than the variant's (FEN as PDN writes it; Turkish with algebraic squares).
  const fenInput = h("input", { placeholder: "start position FEN (optional)", value: q.get("fen") ?? "", "data-testid": "fen", class: "fen" });
  const fen = () => fenInput.value.trim();
  const timeSel = select("time", TIME_CONTROLS.map((t) => [t.key, t.label]), prefs.time);
  const colorSel = select("color", [["white", "White"], ["black", "Black"], ["random", "Random"]], prefs.color);
  const levelSel = select("level", [1, 2, 3, 4, 5, 6, 7, 8].map((l) => [String(l), `Level ${l}`]), String(prefs.level));
  const rulesError = h("div", { class: "error", "data-testid": "rules-error" });
  const preview = h("div", { class: "board-box preview" });
  const board = new BoardView(preview);
  const who = h("div", { class: "who", "data-testid": "identity" });
  const mine = h("div", { class: "my-games" });
  const watchInput = h("input", { placeholder: "game id or link", "data-testid": "watch-id" });
  const startButtons: HTMLButtonElement[] = [];
  const rated = h("input", { type: "checkbox", "data-testid": "rated" });
  const offerMin = h("input", { type: "number", min: 0, max: 4000, placeholder: "min", class: "small", "data-testid": "offer-min" });
  const offerMax = h("input", { type: "number", min: 0, max: 4000, placeholder: "max", class: "small", "data-testid": "offer-max" });
  const opponentInput = h("input", { placeholder: "player id (e.g. guest:…)", "data-testid": "challenge-player-id" });
  const stats = h("div", { class: "lobby-stats", "data-testid": "lobby-stats", "data-live": "false" }, "…");
  const quick = quickSeekPanel(prefs.variant);
  const seeks = lobbySeeksPanel();

  const current = () => {
    const v = VARIANTS.find((x) => x.key === variantSel.value) ?? VARIANTS[0];
    return ruleSet(v.variant, { noMandatoryCapture: nmc.checked, promoteMidCapture: pmc.checked, moveLimit: Number(limit.value) || 0 });
  };
  const timeControl = () => (TIME_CONTROLS.find((t) => t.key === timeSel.value) ?? TIME_CONTROLS[0]).make();
  const myColor = () => (colorSel.value === "white" ? Color.WHITE : colorSel.value === "black" ? Color.BLACK : Math.random() < 0.5 ? Color.WHITE : Color.BLACK);

  function savePrefs() {
    const p: Prefs = {
      variant: variantSel.value,
      noMandatoryCapture: nmc.checked,
      promoteMidCapture: pmc.checked,
      moveLimit: Number(limit.value) || 0,
      time: timeSel.value,
      color: colorSel.value,
      level: Number(levelSel.value),
    };
    localStorage.setItem(PREFS, JSON.stringify(p));
  }

  let previewSeq = 0;
  async function updatePreview() {
    savePrefs();
    const seq = ++previewSeq;
    const rs = current();
    try {
      // The server checks the options (one that does not apply to the variant is refused).
      const plain = !rs.options?.noMandatoryCapture && !rs.options?.promoteMidCapture && !rs.options?.moveLimit && !fen();
      const { geometry, start: plainStart } = await geometryOf(rs.variant);
      // With house rules, one more call: the server accepts or refuses them for this variant.
      const start = plain ? plainStart : await retrying(() => rulesApi.listMoves({ rules: rs, fen: fen() }));
      if (seq !== previewSeq || closed) return;
      rulesError.textContent = "";
      startButtons.forEach((b) => (b.disabled = false));
      board.setGeometry(geometry);
      board.setFlipped(false);
      board.setPosition(start.position?.pieces ?? []);
      preview.dataset.variant = variantSel.value;
      if (!performance.getEntriesByName("board-painted").length) performance.mark("board-painted");
    } catch (e) {
      if (seq !== previewSeq) return;
      rulesError.textContent = describeError(e);
      startButtons.forEach((b) => (b.disabled = true));
    }
  }

  function start(label: string, testid: string, f: () => Promise<void>) {
    const b = h(
      "button",
      {
        class: "primary",
        "data-testid": testid,
        onclick: async () => {
          b.disabled = true;
          try {
            await f();
          } catch (e) {
            toast(describeError(e), "error");
          } finally {
            b.disabled = false;
          }
        },
      },
      label,
    );
    startButtons.push(b);
    return b;
  }

  const playAi = start("Play the computer", "play-ai", async () => {
    const me = await ensureIdentity();
    const ai = create(PlayerSchema, { id: `ai:${levelSel.value}` });
    const self = create(PlayerSchema, { id: "" });
    const white = myColor() === Color.WHITE;
    const g = await retrying(() => games.createGame( { rules: current(), fen: fen(), timeControl: timeControl(), white: white ? self : ai, black: white ? ai : self }, bearer(me)));
    location.hash = `#/game/${g.gameId}`;
  });

  const challenge = start("Create a challenge link", "challenge-link", async () => {
    const me = await ensureIdentity();
    const c = colorSel.value === "random" ? Color.UNSPECIFIED : myColor();
    const inv = await retrying(() => games.createInvitation( { rules: current(), fen: fen(), timeControl: timeControl(), color: c, rated: rated.checked }, bearer(me)));
    location.hash = `#/invite/${inv.invitationId}`;
  });

  const hotseat = start("Two players on this screen", "hotseat", async () => {
    // Hot-seat: a second guest for the other side, invited by this browser's player and accepting at
    // once with its own token (the ordinary consent flow; both tokens stay in this browser).
    const me = await ensureIdentity();
    const second = await newGuest("Player 2");
    const inv = await retrying(() => games.createInvitation( { rules: current(), fen: fen(), timeControl: timeControl(), inviteeId: second.id, color: Color.WHITE }, bearer(me)));
    const g = await retrying(() => games.acceptInvitation({ invitationId: inv.invitationId }, bearer(second)));
    setHotseatIdentity(g.gameId, second);
    location.hash = `#/game/${g.gameId}`;
  });

  const offer = start("Offer in the lobby", "lobby-offer", async () => {
    // A lobby seek carries its rule set, house rules included (the list shows them); a start
    // position of one's own goes by a challenge, whose terms the invited player sees in full.
    const rs = current();
    if (fen()) throw new Error("a lobby seek starts from the variant's start position: use a challenge for a position of your own");
    const me = await ensureIdentity();
    const ratingRange = rangeOf(offerMin.value, offerMax.value);
    const c = colorSel.value === "random" ? Color.UNSPECIFIED : myColor();
    const s = await retrying(() => matchmaking.createLobbySeek({ rules: rs, timeControl: timeControl(), color: c, rated: rated.checked, ratingRange }, bearer(me)));
    awaiting.add(s.seekId);
    toast("Offered in the lobby: the game starts when someone accepts");
    await seeks.refresh();
  });

  const challengePlayer = start("Challenge this player", "challenge-player", async () => {
    const inviteeId = opponentInput.value.trim();
    if (!inviteeId) throw new Error("the player's id is needed (shown under their lobby as “Playing as …”)");
    const me = await ensureIdentity();
    const c = colorSel.value === "random" ? Color.UNSPECIFIED : myColor();
    const inv = await retrying(() => matchmaking.challenge({ inviteeId, rules: current(), fen: fen(), timeControl: timeControl(), color: c, rated: rated.checked }, bearer(me)));
    location.hash = `#/invite/${inv.invitationId}`;
  });

  let lastSeekCount = -1;
  function renderStats(s: LobbyStats) {
    const item = (testid: string, n: bigint, text: string) => h("span", { "data-testid": testid, "data-n": String(n) }, h("b", {}, String(n)), ` ${text}`);
    const seekingAll = s.pools.reduce((n, p) => n + p.seeking, 0n);
    stats.replaceChildren(
      item("lobby-online", s.playersOnline, "online"),
      item("lobby-seeking", seekingAll, "seeking"),
      item("lobby-games", s.gamesInProgress, "games in progress"),
      item("lobby-seek-count", s.lobbySeeks, "lobby seeks"),
    );
    quick.setStats(s);
    if (Number(s.lobbySeeks) !== lastSeekCount) {
      lastSeekCount = Number(s.lobbySeeks);
      void seeks.refresh();
    }
  }

  function renderWho() {
    const id = currentIdentity();
    const here = encodeURIComponent("#/");
    const nameInput = h("input", { value: localStorage.getItem("draughts.name") ?? "", placeholder: "your name", maxlength: 32, "data-testid": "name" });
    const rows: (HTMLElement | string)[] = [
      h("div", {}, "Playing as ", id ? playerLink(id.id, id.name || id.id, { "data-testid": "identity-link" }) : h("b", {}, "…"), id ? ` (${id.kind}, ${id.id})` : ""),
    ];
    if (!id || id.kind === "guest") {
      rows.push(
        h(
          "div",
          { class: "row" },
          h("a", { class: "button primary", href: `#/signup?next=${here}`, "data-testid": "lobby-signup" }, "Create an account"),
          h("a", { class: "button", href: `#/signin?next=${here}`, "data-testid": "lobby-signin" }, "Sign in"),
          h("span", { class: "hint" }, "An account keeps your games and ratings (this guest's included) and may ask for analysis."),
        ),
        h(
          "div",
          { class: "row" },
          nameInput,
          h(
            "button",
            {
              onclick: async () => {
                localStorage.setItem("draughts.name", nameInput.value.trim());
                setIdentity(null);
                resetIdentity();
                await ensureIdentity().catch((e) => toast(describeError(e), "error"));
                renderWho();
              },
            },
            "New guest with this name",
          ),
        ),
      );
    } else {
      rows.push(
        h(
          "div",
          { class: "row" },
          id.kind === "account" ? h("a", { href: "#/settings" }, "Settings") : "",
          h(
            "button",
            {
              "data-testid": "lobby-signout",
              onclick: async () => {
                await signOut().catch((e) => toast(describeError(e), "error"));
              },
            },
            "Sign out",
          ),
        ),
      );
    }
    who.replaceChildren(...rows);
  }

  async function renderMine(again = 0) {
    // Just signed up from a guest: its finished games reach the account within seconds; read twice more.
    if (again < 2 && adoptedRecently()) setTimeout(() => !closed && void renderMine(again + 1), 2500);
    try {
      const me = await ensureIdentity();
      renderWho();
      const r = await retrying(() => games.listGames({ playerId: me.id, limit: 10 }, bearer(me)));
      if (closed) return;
      const row = (id: string, text: string) => h("li", {}, h("a", { href: `#/game/${id}` }, text));
      mine.replaceChildren(
        h("h3", {}, "Your games"),
        h(
          "ul",
          {},
          ...r.ongoing.map((g) => row(g.gameId, `${variantLabel(g.rules?.variant)}: ${g.white?.displayName} – ${g.black?.displayName} (ongoing)`)),
          ...r.recent.map((g) =>
            h(
              "li",
              {},
              h("a", { href: `#/game/${g.gameId}` }, `${variantLabel(g.variant)}${g.rated ? " (rated)" : ""}: `),
              playerLink(g.whiteId, g.whiteId === me.id ? "you" : g.whiteId),
              " – ",
              playerLink(g.blackId, g.blackId === me.id ? "you" : g.blackId),
              ` ${g.status?.result ?? ""} `,
              h("a", { href: `#/game/${g.gameId}` }, "game"),
              canAnalyse(me) ? h("a", { href: `#/analysis/${g.gameId}`, class: "small-link" }, " analyse") : "",
            ),
          ),
        ),
      );
    } catch (e) {
      mine.textContent = describeError(e);
    }
  }

  for (const e of [variantSel, nmc, pmc, limit, fenInput]) e.addEventListener("change", () => void updatePreview());
  for (const e of [timeSel, colorSel, levelSel]) e.addEventListener("change", savePrefs);

  root.replaceChildren(
    h(
      "div",
      { class: "lobby" },
      stats,
      h(
        "section",
        { class: "setup" },
        quick.el,
        h("h2", {}, "New game"),
        h("label", {}, "Variant ", variantSel),
        h(
          "fieldset",
          {},
          h("legend", {}, "House rules"),
          h("label", {}, nmc, " no mandatory capture (8×8)"),
          h("label", {}, pmc, " promote mid-capture"),
          h("label", {}, "move limit ", limit, " (0 = the variant's rule)"),
          h("label", {}, fenInput),
        ),
        rulesError,
        h("label", {}, "Time ", timeSel),
        h("label", {}, "Your colour ", colorSel),
        h("div", { class: "row" }, levelSel, playAi),
        h("div", { class: "row" }, challenge, hotseat),
        h("label", {}, rated, " rated (lobby offers and challenges)"),
        h("div", { class: "row" }, offer, h("span", {}, "ratings "), offerMin, h("span", {}, "–"), offerMax),
        h("div", { class: "row" }, opponentInput, challengePlayer),
        seeks.el,
        h("h3", {}, "Watch a game"),
        h(
          "div",
          { class: "row" },
          watchInput,
          h(
            "button",
            {
              "data-testid": "watch",
              onclick: () => {
                const v = watchInput.value.trim();
                const id = v.includes("/") ? v.split("/").pop()! : v;
                if (id) location.hash = `#/game/${id}`;
              },
            },
            "Watch",
          ),
        ),
        who,
        mine,
      ),
      preview,
    ),
  );
  renderWho();
  // The board first; the player's games (which need a guest) after it.
  let stopWatch = () => {};
  void updatePreview().finally(() => {
    if (closed) return;
    void renderMine();
    quick.load();
    stopWatch = watchLobby(renderStats, (live) => (stats.dataset.live = String(live)));
  });
  return () => {
    closed = true;
    stopWatch();
    quick.close();
  };
}

