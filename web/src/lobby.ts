// The lobby, playing first: the lobby's numbers (WatchLobby); quick pairing in the server's pools with
// their live counts; the computer at three named levels (one tap into a game; 1-8 under "more options");
// then a custom game: variant, time control and colour to play the computer, challenge by link, offer a
// lobby seek or play two people on this screen, with house rules, a start position, rating ranges and a
// named opponent behind "more options"; the lobby's open seeks; watch a game; the player's own games;
// who this browser is. On a phone the first screen is this, not a board (the preview comes last).
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
import { language, t } from "./i18n.js";
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
  /** "More options" left open. */
  more: boolean;
}

/** The computer's levels offered by name (the rest, 1-8, under "more options"). */
export const NAMED_LEVELS = [
  { key: "beginner", level: 1 },
  { key: "intermediate", level: 4 },
  { key: "strong", level: 8 },
] as const;

function loadPrefs(): Prefs {
  // A first visit in Russian starts at Russian draughts; otherwise international.
  const variant = language() === "ru" ? "russian" : "international";
  const d: Prefs = { variant, noMandatoryCapture: false, promoteMidCapture: false, moveLimit: 0, time: "5+3", color: "white", level: 2, more: false };
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

  const select = (testid: string, options: [string, string][], value: string, label: string) =>
    h("select", { "data-testid": testid, "aria-label": label }, ...options.map(([v, l]) => h("option", { value: v, selected: v === value }, l)));
  const variantSel = select("variant", VARIANTS.map((v) => [v.key, v.label]), prefs.variant, t("lobby.variant"));
  const nmc = h("input", { type: "checkbox", "data-testid": "opt-no-mandatory-capture", checked: prefs.noMandatoryCapture });
  const pmc = h("input", { type: "checkbox", "data-testid": "opt-promote-mid-capture", checked: prefs.promoteMidCapture });
  const limit = h("input", { type: "number", min: 0, max: 1000, value: String(prefs.moveLimit), "data-testid": "opt-move-limit", class: "small" });
  // A start position other than the variant's (FEN as PDN writes it; Turkish with algebraic squares).
  const fenInput = h("input", { placeholder: t("lobby.fenPlaceholder"), "aria-label": t("lobby.fenPlaceholder"), value: q.get("fen") ?? "", "data-testid": "fen", class: "fen" });
  const fen = () => fenInput.value.trim();
  const timeSel = select("time", TIME_CONTROLS.map((tc) => [tc.key, tc.label]), prefs.time, t("lobby.time"));
  const colorSel = select("color", [["white", t("color.white")], ["black", t("color.black")], ["random", t("color.random")]], prefs.color, t("lobby.yourColor"));
  const levelSel = select("level", [1, 2, 3, 4, 5, 6, 7, 8].map((l) => [String(l), t("lobby.level", { n: l })]), String(prefs.level), t("lobby.levelLabel"));
  const rulesError = h("div", { class: "error", "data-testid": "rules-error" });
  const preview = h("div", { class: "board-box preview" });
  const board = new BoardView(preview, { label: t("board.previewLabel") });
  const who = h("div", { class: "who", "data-testid": "identity" });
  const mine = h("div", { class: "my-games" });
  const watchInput = h("input", { placeholder: t("lobby.watchPlaceholder"), "aria-label": t("lobby.watchPlaceholder"), "data-testid": "watch-id" });
  const startButtons: HTMLButtonElement[] = [];
  const rated = h("input", { type: "checkbox", "data-testid": "rated" });
  const offerMin = h("input", { type: "number", min: 0, max: 4000, placeholder: t("seek.min"), "aria-label": t("seek.min"), class: "small", "data-testid": "offer-min" });
  const offerMax = h("input", { type: "number", min: 0, max: 4000, placeholder: t("seek.max"), "aria-label": t("seek.max"), class: "small", "data-testid": "offer-max" });
  const opponentInput = h("input", { placeholder: t("lobby.playerIdPlaceholder"), "aria-label": t("lobby.playerIdPlaceholder"), "data-testid": "challenge-player-id" });
  const stats = h("div", { class: "lobby-stats", "data-testid": "lobby-stats", "data-live": "false" }, "…");
  const quick = quickSeekPanel(prefs.variant);
  const seeks = lobbySeeksPanel();

  const current = () => {
    const v = VARIANTS.find((x) => x.key === variantSel.value) ?? VARIANTS[0];
    return ruleSet(v.variant, { noMandatoryCapture: nmc.checked, promoteMidCapture: pmc.checked, moveLimit: Number(limit.value) || 0 });
  };
  const timeControl = () => (TIME_CONTROLS.find((tc) => tc.key === timeSel.value) ?? TIME_CONTROLS[0]).make();
  const myColor = () => (colorSel.value === "white" ? Color.WHITE : colorSel.value === "black" ? Color.BLACK : Math.random() < 0.5 ? Color.WHITE : Color.BLACK);

  const more = h(
    "details",
    { class: "more", "data-testid": "more-options", open: prefs.more || !!fen() || prefs.noMandatoryCapture || prefs.promoteMidCapture || prefs.moveLimit > 0 },
    h("summary", {}, t("lobby.moreOptions")),
  );
  more.addEventListener("toggle", savePrefs);

  function savePrefs() {
    const p: Prefs = {
      variant: variantSel.value,
      noMandatoryCapture: nmc.checked,
      promoteMidCapture: pmc.checked,
      moveLimit: Number(limit.value) || 0,
      time: timeSel.value,
      color: colorSel.value,
      level: Number(levelSel.value),
      more: more.open,
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

  function start(label: string, testid: string, f: () => Promise<void>, cls = "primary") {
    const b = h(
      "button",
      {
        class: cls,
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

  /** A game against the computer at `level`, with the lobby's variant, house rules, time and colour. */
  async function playComputer(level: number) {
    const me = await ensureIdentity();
    const ai = create(PlayerSchema, { id: `ai:${level}` });
    const self = create(PlayerSchema, { id: "" });
    const white = myColor() === Color.WHITE;
    const g = await retrying(() => games.createGame({ rules: current(), fen: fen(), timeControl: timeControl(), white: white ? self : ai, black: white ? ai : self }, bearer(me)));
    location.hash = `#/game/${g.gameId}`;
  }

  const playAi = start(t("lobby.playAi"), "play-ai", () => playComputer(Number(levelSel.value)));
  const named = NAMED_LEVELS.map((l) =>
    start(t(`lobby.levels.${l.key}`), `play-ai-${l.key}`, () => playComputer(l.level), "primary big"),
  );
  named.forEach((b, i) => b.setAttribute("data-level", String(NAMED_LEVELS[i].level)));

  const challenge = start(t("lobby.challengeLink"), "challenge-link", async () => {
    const me = await ensureIdentity();
    const c = colorSel.value === "random" ? Color.UNSPECIFIED : myColor();
    const inv = await retrying(() => games.createInvitation({ rules: current(), fen: fen(), timeControl: timeControl(), color: c, rated: rated.checked }, bearer(me)));
    location.hash = `#/invite/${inv.invitationId}`;
  }, "");

  const hotseat = start(t("lobby.hotseat"), "hotseat", async () => {
    // Hot-seat: a second guest for the other side, invited by this browser's player and accepting at
    // once with its own token (the ordinary consent flow; both tokens stay in this browser).
    const me = await ensureIdentity();
    const second = await newGuest(t("lobby.player2"));
    const inv = await retrying(() => games.createInvitation({ rules: current(), fen: fen(), timeControl: timeControl(), inviteeId: second.id, color: Color.WHITE }, bearer(me)));
    const g = await retrying(() => games.acceptInvitation({ invitationId: inv.invitationId }, bearer(second)));
    setHotseatIdentity(g.gameId, second);
    location.hash = `#/game/${g.gameId}`;
  }, "");

  const offer = start(t("lobby.offer"), "lobby-offer", async () => {
    // A lobby seek carries its rule set, house rules included (the list shows them); a start
    // position of one's own goes by a challenge, whose terms the invited player sees in full.
    const rs = current();
    if (fen()) throw new Error(t("lobby.offerNoFen"));
    const me = await ensureIdentity();
    const ratingRange = rangeOf(offerMin.value, offerMax.value);
    const c = colorSel.value === "random" ? Color.UNSPECIFIED : myColor();
    const s = await retrying(() => matchmaking.createLobbySeek({ rules: rs, timeControl: timeControl(), color: c, rated: rated.checked, ratingRange }, bearer(me)));
    awaiting.add(s.seekId);
    toast(t("lobby.offered"));
    await seeks.refresh();
  }, "");

  const challengePlayer = start(t("lobby.challengePlayer"), "challenge-player", async () => {
    const inviteeId = opponentInput.value.trim();
    if (!inviteeId) throw new Error(t("lobby.needPlayerId"));
    const me = await ensureIdentity();
    const c = colorSel.value === "random" ? Color.UNSPECIFIED : myColor();
    const inv = await retrying(() => matchmaking.challenge({ inviteeId, rules: current(), fen: fen(), timeControl: timeControl(), color: c, rated: rated.checked }, bearer(me)));
    location.hash = `#/invite/${inv.invitationId}`;
  }, "");

  let lastSeekCount = -1;
  function renderStats(s: LobbyStats) {
    const item = (testid: string, n: bigint, text: string) => h("span", { "data-testid": testid, "data-n": String(n) }, h("b", {}, String(n)), ` ${text}`);
    const seekingAll = s.pools.reduce((n, p) => n + p.seeking, 0n);
    stats.replaceChildren(
      item("lobby-online", s.playersOnline, t("lobby.online", { count: Number(s.playersOnline) })),
      item("lobby-seeking", seekingAll, t("lobby.seeking", { count: Number(seekingAll) })),
      item("lobby-games", s.gamesInProgress, t("lobby.gamesInProgress", { count: Number(s.gamesInProgress) })),
      item("lobby-seek-count", s.lobbySeeks, t("lobby.lobbySeeks", { count: Number(s.lobbySeeks) })),
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
    const nameInput = h("input", { value: localStorage.getItem("draughts.name") ?? "", placeholder: t("lobby.yourName"), "aria-label": t("lobby.yourName"), maxlength: 32, "data-testid": "name" });
    who.dataset.player = id?.id ?? "";
    who.dataset.kind = id?.kind ?? "";
    const rows: (HTMLElement | string)[] = [
      h("div", {}, `${t("lobby.playingAs")} `, id ? playerLink(id.id, id.name || id.id, { "data-testid": "identity-link" }) : h("b", {}, "…"), id ? ` (${id.kind === "account" ? t("profile.kindAccount") : id.kind === "guest" ? t("profile.kindGuest") : t("profile.kindPlayer")}, ${id.id})` : ""),
    ];
    if (!id || id.kind === "guest") {
      rows.push(
        h(
          "div",
          { class: "row" },
          h("a", { class: "button primary", href: `#/signup?next=${here}`, "data-testid": "lobby-signup" }, t("account.createTitle")),
          h("a", { class: "button", href: `#/signin?next=${here}`, "data-testid": "lobby-signin" }, t("nav.signIn")),
          h("span", { class: "hint" }, t("lobby.accountHint")),
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
            t("lobby.newGuest"),
          ),
        ),
      );
    } else {
      rows.push(
        h(
          "div",
          { class: "row" },
          id.kind === "account" ? h("a", { href: "#/settings" }, t("nav.settings")) : "",
          h(
            "button",
            {
              "data-testid": "lobby-signout",
              onclick: async () => {
                await signOut().catch((e) => toast(describeError(e), "error"));
              },
            },
            t("nav.signOut"),
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
        h("h3", {}, t("lobby.yourGames")),
        h(
          "ul",
          {},
          ...r.ongoing.map((g) => row(g.gameId, `${variantLabel(g.rules?.variant)}: ${g.white?.displayName} – ${g.black?.displayName} (${t("lobby.ongoing")})`)),
          ...r.recent.map((g) =>
            h(
              "li",
              {},
              h("a", { href: `#/game/${g.gameId}` }, `${variantLabel(g.variant)}${g.rated ? ` (${t("common.rated")})` : ""}: `),
              playerLink(g.whiteId, g.whiteId === me.id ? t("common.you") : g.whiteId),
              " – ",
              playerLink(g.blackId, g.blackId === me.id ? t("common.you") : g.blackId),
              ` ${g.status?.result ?? ""} `,
              h("a", { href: `#/game/${g.gameId}` }, t("lobby.game")),
              canAnalyse(me) ? h("a", { href: `#/analysis/${g.gameId}`, class: "small-link" }, ` ${t("lobby.analyse")}`) : "",
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

  more.append(
    h(
      "fieldset",
      {},
      h("legend", {}, t("lobby.houseRules")),
      h("label", {}, nmc, ` ${t("lobby.nmc")}`),
      h("label", {}, pmc, ` ${t("lobby.pmc")}`),
      h("label", {}, `${t("lobby.moveLimit")} `, limit, ` ${t("lobby.moveLimitHint")}`),
      h("label", {}, fenInput),
    ),
    h("div", { class: "row" }, levelSel, playAi),
    h("div", { class: "row" }, offer, h("span", {}, t("lobby.ratingRange")), offerMin, h("span", {}, "–"), offerMax),
    h("div", { class: "row" }, opponentInput, challengePlayer),
  );

  root.replaceChildren(
    h(
      "div",
      { class: "lobby" },
      stats,
      h(
        "section",
        { class: "setup" },
        quick.el,
        h(
          "section",
          { class: "computer", "data-testid": "computer" },
          h("h2", {}, t("lobby.computerTitle")),
          h("div", { class: "levels" }, ...named),
          h("p", { class: "hint" }, t("lobby.computerHint")),
        ),
        h(
          "section",
          { class: "custom" },
          h("h2", {}, t("lobby.customTitle")),
          h("div", { class: "row" }, h("label", {}, `${t("lobby.variant")} `, variantSel)),
          rulesError,
          h("div", { class: "row" }, h("label", {}, `${t("lobby.time")} `, timeSel), h("label", {}, `${t("lobby.yourColor")} `, colorSel)),
          h("div", { class: "row" }, challenge, hotseat),
          h("label", {}, rated, ` ${t("lobby.ratedHint")}`),
          more,
        ),
        seeks.el,
        h("h3", {}, t("lobby.watchTitle")),
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
            t("lobby.watch"),
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
