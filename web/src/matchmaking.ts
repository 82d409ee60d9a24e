// Matchmaking in the lobby (draughts.v1.Matchmaking): the server's pools (ListPools), the lobby's numbers
// (WatchLobby), quick seek in one or more pools (Seek, held open while waiting; closing it withdraws the
// seek), and the lobby's custom seeks (ListLobbySeeks, Accept, Cancel).
import { create } from "@bufbuild/protobuf";
import { Color } from "./gen/draughts/v1/common_pb.js";
import { RatingRangeSchema, SeekEndReason, type LobbySeek, type LobbyStats, type Pool, type RatingRange } from "./gen/draughts/v1/matchmaking_pb.js";
import { bearer, Code, ConnectError, describeError, ensureIdentity, matchmaking, playerName, profileHref, retrying, sleep, type Identity } from "./api.js";
import { h, toast } from "./dom.js";
import { t } from "./i18n.js";
import { awaiting } from "./events.js";
import { timeControlText } from "./timecontrol.js";
import { rulesLabel, variantKey, variantLabel, VARIANTS } from "./variants.js";

/** At most this many pools in one seek (the API's bound). */
export const MAX_SEEK_POOLS = 8;

let pools: Promise<Pool[]> | null = null;

/** The server's quick-pairing pools, read once per page load. */
export function listPools(): Promise<Pool[]> {
  if (!pools) {
    pools = retrying(() => matchmaking.listPools({})).then((r) => r.pools);
    pools.catch(() => (pools = null));
  }
  return pools;
}

/** A short text for a wait in milliseconds ("8 s", "2 min"). */
export function waitText(ms: number): string {
  const s = Math.round(ms / 1000);
  return s < 90 ? t("wait.seconds", { n: s }) : t("wait.minutes", { n: Math.round(s / 60) });
}

/**
 * Holds WatchLobby open (with the player's token, so the player counts as online), calling `onStats`
 * with every update; reconnects with back-off. Returns the function that closes it.
 */
export function watchLobby(onStats: (s: LobbyStats) => void, onLive: (live: boolean) => void): () => void {
  const abort = new AbortController();
  void (async () => {
    let backoff = 500;
    while (!abort.signal.aborted) {
      try {
        const me = await ensureIdentity();
        for await (const s of matchmaking.watchLobby({}, { ...bearer(me), signal: abort.signal })) {
          backoff = 500;
          onLive(true);
          onStats(s);
        }
      } catch {
        if (abort.signal.aborted) return;
      }
      onLive(false);
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 5000);
    }
  })();
  return () => abort.abort();
}

const QUICK = "draughts.quick";

interface QuickPrefs {
  variant: string;
  rated: boolean;
  pools: string[];
  min: string;
  max: string;
}

function loadQuick(variant: string): QuickPrefs {
  const d: QuickPrefs = { variant, rated: false, pools: [], min: "", max: "" };
  try {
    return { ...d, ...(JSON.parse(localStorage.getItem(QUICK) ?? "{}") as Partial<QuickPrefs>) };
  } catch {
    return d;
  }
}

const END_TEXT: Record<number, () => string> = {
  [SeekEndReason.CANCELLED]: () => t("seek.endCancelled"),
  [SeekEndReason.IN_GAME]: () => t("seek.endInGame"),
  [SeekEndReason.EXPIRED]: () => t("seek.endExpired"),
  [SeekEndReason.UNKNOWN_PLAYER]: () => t("seek.endUnknown"),
};

/** Reads an optional rating range from two inputs; null when both are empty; throws on a bad one. */
function rangeOf(min: string, max: string): RatingRange | undefined {
  if (!min.trim() && !max.trim()) return undefined;
  const lo = min.trim() ? Number(min) : 0;
  const hi = max.trim() ? Number(max) : 4000;
  if (!Number.isInteger(lo) || !Number.isInteger(hi) || lo < 0 || hi > 4000 || lo > hi) throw new Error(t("seek.badRange"));
  return create(RatingRangeSchema, { min: lo, max: hi });
}

/**
 * The quick-seek panel: a variant, rated or casual, the pools' time controls as toggles (several pools,
 * even of several variants, in one seek), an optional rating range; the wait while the Seek stream is
 * open; into the game when paired. `close` withdraws a seek in progress (the stream is closed).
 */
export function quickSeekPanel(defaultVariant: string): { el: HTMLElement; load: () => void; setStats: (s: LobbyStats) => void; close: () => void } {
  const prefs = loadQuick(defaultVariant);
  const chosen = new Set<string>(prefs.pools);
  let all: Pool[] = [];
  let stats: LobbyStats | null = null;
  let seeking: AbortController | null = null;
  let closed = false;

  const variantSel = h("select", { "data-testid": "qs-variant" }, ...VARIANTS.map((v) => h("option", { value: v.key, selected: v.key === prefs.variant }, v.label)));
  const ratedSel = h("select", { "data-testid": "qs-rated" }, h("option", { value: "casual", selected: !prefs.rated }, t("seek.casual")), h("option", { value: "rated", selected: prefs.rated }, t("seek.rated")));
  const min = h("input", { type: "number", min: 0, max: 4000, placeholder: t("seek.min"), value: prefs.min, class: "small", "data-testid": "qs-min" });
  const max = h("input", { type: "number", min: 0, max: 4000, placeholder: t("seek.max"), value: prefs.max, class: "small", "data-testid": "qs-max" });
  const grid = h("div", { class: "pools", "data-testid": "pools" }, t("seek.loadingPools"));
  const picked = h("div", { class: "picked", "data-testid": "picked-pools" });
  const state = h("div", { class: "seek-state", "data-testid": "seek-state", "data-state": "idle" });
  const seekBtn = h("button", { class: "primary", "data-testid": "seek", onclick: () => void startSeek() }, t("seek.seek"));
  const cancelBtn = h("button", { "data-testid": "cancel-seek", hidden: true, onclick: () => void cancel(true) }, t("common.cancel"));

  const save = () =>
    localStorage.setItem(QUICK, JSON.stringify({ variant: variantSel.value, rated: ratedSel.value === "rated", pools: [...chosen], min: min.value, max: max.value } satisfies QuickPrefs));

  const poolLabel = (p: Pool) => `${variantLabel(p.rules?.variant)} ${timeControlText(p.timeControl)} ${p.rated ? t("common.rated") : t("common.casual")}`;

  function renderGrid() {
    const variant = variantSel.value;
    const rated = ratedSel.value === "rated";
    const shown = all.filter((p) => variantKey(p.rules?.variant) === variant && p.rated === rated);
    const busy = seeking !== null;
    grid.replaceChildren(
      ...(shown.length
        ? shown.map((p) => {
            const ps = stats?.pools.find((x) => x.poolId === p.poolId);
            const on = chosen.has(p.poolId);
            return h(
              "button",
              {
                class: `pool${on ? " on" : ""}`,
                "data-testid": "pool",
                "data-pool": p.poolId,
                "data-seeking": ps ? String(ps.seeking) : "",
                "data-wait": ps ? String(ps.typicalWaitMs) : "",
                "aria-pressed": String(on),
                disabled: busy || (!on && chosen.size >= MAX_SEEK_POOLS),
                onclick: () => {
                  if (on) chosen.delete(p.poolId);
                  else chosen.add(p.poolId);
                  save();
                  render();
                },
              },
              h("b", {}, timeControlText(p.timeControl)),
              h("small", {}, ps ? `${t("seek.seeking", { count: Number(ps.seeking) })}${ps.typicalWaitMs ? ` · ~${waitText(Number(ps.typicalWaitMs))}` : ""}` : " "),
            );
          })
        : [h("span", {}, all.length ? t("seek.noPool") : "")]),
    );
  }

  function render() {
    renderGrid();
    const ids = [...chosen].filter((id) => all.length === 0 || all.some((p) => p.poolId === id));
    picked.replaceChildren(
      ...(ids.length
        ? [
            h("span", {}, `${t("seek.pools", { count: ids.length })}: `),
            ...ids.map((id) => {
              const p = all.find((x) => x.poolId === id);
              return h(
                "button",
                {
                  class: "chip",
                  title: t("seek.remove"),
                  disabled: seeking !== null,
                  onclick: () => {
                    chosen.delete(id);
                    save();
                    render();
                  },
                },
                `${p ? poolLabel(p) : id} ×`,
              );
            }),
          ]
        : [h("span", { class: "hint" }, t("seek.pickHint"))]),
    );
    seekBtn.hidden = seeking !== null;
    seekBtn.disabled = ids.length === 0;
    cancelBtn.hidden = seeking === null;
  }

  function show(kind: string, text: string) {
    state.dataset.state = kind;
    state.textContent = text;
  }

  async function startSeek() {
    let range: RatingRange | undefined;
    try {
      range = rangeOf(min.value, max.value);
    } catch (e) {
      toast((e as Error).message, "error");
      return;
    }
    const ids = [...chosen].filter((id) => all.some((p) => p.poolId === id));
    if (!ids.length) return;
    save();
    const ctl = new AbortController();
    seeking = ctl;
    render();
    show("connecting", t("seek.seekingNow"));
    let me: Identity;
    try {
      me = await ensureIdentity();
    } catch (e) {
      stop(t("seek.couldNot", { error: describeError(e) }), "error");
      return;
    }
    // Waiting: the server says how long and how many waves it missed; between its messages the
    // clock runs here.
    let since = 0;
    let missed = 0;
    let seekId = "";
    const tick = window.setInterval(() => {
      if (state.dataset.state === "waiting") showWaiting();
    }, 500);
    const showWaiting = () => {
      state.dataset.seekId = seekId;
      show("waiting", `${t("seek.waitingIn", { pools: t("seek.pools", { count: ids.length }), wait: waitText(Date.now() - since) })}${missed ? `, ${t("seek.widened", { n: missed })}` : ""}`);
    };
    let backoff = 500;
    try {
      while (!ctl.signal.aborted) {
        try {
          for await (const ev of matchmaking.seek({ poolIds: ids, ratingRange: range }, { ...bearer(me), signal: ctl.signal })) {
            backoff = 500;
            const k = ev.kind;
            if (k.case === "waiting") {
              seekId = k.value.seekId;
              since = Date.now() - Number(k.value.waitedMs);
              missed = k.value.missedWaves;
              showWaiting();
            } else if (k.case === "paired") {
              const p = k.value;
              stop(t("seek.paired", { name: playerName(p.opponent), color: p.color === Color.WHITE ? t("seek.youWhite") : t("seek.youBlack"), wait: waitText(Number(p.waitedMs)) }), "paired");
              state.dataset.game = p.gameId;
              location.hash = `#/game/${p.gameId}`;
              return;
            } else if (k.case === "ended") {
              stop(t("seek.ended", { why: END_TEXT[k.value.reason]?.() ?? t("seek.endOther") }), "ended");
              return;
            }
          }
          // The stream ended without a word (the server is going away): seek again, which joins the
          // waiting seek (same pools) and keeps its place.
        } catch (e) {
          if (ctl.signal.aborted) return;
          const err = ConnectError.from(e);
          if (![Code.Unavailable, Code.Unknown, Code.Internal, Code.ResourceExhausted, Code.DeadlineExceeded, Code.Aborted].includes(err.code)) {
            stop(t("seek.couldNot", { error: describeError(err) }), "error");
            return;
          }
        }
        if (ctl.signal.aborted) return;
        show("reconnecting", t("seek.again"));
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 5000);
      }
    } finally {
      clearInterval(tick);
    }
  }

  function stop(text: string, kind: string) {
    seeking = null;
    if (closed) return;
    show(kind, text);
    render();
  }

  /** Withdraws the seek: closing the stream does it; CancelSeek too when the player asked. */
  async function cancel(byPlayer: boolean) {
    const ctl = seeking;
    if (!ctl) return;
    ctl.abort();
    stop(t("seek.cancelled"), "cancelled");
    if (byPlayer) {
      try {
        await matchmaking.cancelSeek({}, bearer(await ensureIdentity()));
      } catch {
        // The closed stream already withdrew it.
      }
    }
  }

  for (const e of [variantSel, ratedSel]) e.addEventListener("change", () => (save(), render()));
  for (const e of [min, max]) e.addEventListener("change", save);

  const el = h(
    "section",
    { class: "quick" },
    h("h2", {}, t("seek.title")),
    h("div", { class: "row" }, variantSel, ratedSel),
    grid,
    picked,
    h("div", { class: "row" }, h("span", {}, t("seek.opponentRating")), min, h("span", {}, "–"), max, h("span", { class: "hint" }, t("common.optional"))),
    h("div", { class: "row" }, seekBtn, cancelBtn),
    state,
  );
  render();
  // Called once the lobby's board is painted (the pools are not needed for the first paint).
  const load = () =>
    listPools()
      .then((p) => {
        all = p;
        // Pools this server does not have are dropped from the remembered choice.
        for (const id of [...chosen]) if (!p.some((x) => x.poolId === id)) chosen.delete(id);
        grid.dataset.loaded = "true";
        render();
      })
      .catch((e) => (grid.textContent = t("seek.noQuick", { error: describeError(e) })));
  return {
    el,
    load,
    setStats: (s) => {
      stats = s;
      renderGrid();
    },
    close: () => {
      void cancel(false);
      closed = true;
    },
  };
}

/** The lobby's custom seeks: each with Accept (or Cancel for the player's own), refreshed on demand. */
export function lobbySeeksPanel(): { el: HTMLElement; refresh: () => Promise<void> } {
  const list = h("ul", { class: "lobby-seeks", "data-testid": "lobby-seeks" });
  const el = h("section", { class: "lobby-seeks-box" }, h("h3", {}, t("lobby.seeksTitle")), list);
  let running: Promise<void> | null = null;
  let again = false;

  const colorText = (c: Color) => (c === Color.WHITE ? t("lobby.playsWhite") : c === Color.BLACK ? t("lobby.playsBlack") : t("lobby.colorsRandom"));

  function row(s: LobbySeek, me: Identity) {
    const mine = s.seeker?.id === me.id;
    if (mine) awaiting.add(s.seekId);
    const range = s.ratingRange ? ` · ${t("lobby.ratings", { min: s.ratingRange.min, max: s.ratingRange.max })}` : "";
    const act = mine
      ? h(
          "button",
          {
            "data-testid": "cancel-lobby-seek",
            onclick: async () => {
              try {
                await retrying(() => matchmaking.cancel({ id: s.seekId }, bearer(me)));
                awaiting.delete(s.seekId);
              } catch (e) {
                toast(describeError(e), "error");
              }
              await refresh();
            },
          },
          t("common.cancel"),
        )
      : h(
          "button",
          {
            class: "primary",
            "data-testid": "accept-lobby-seek",
            onclick: async (e: Event) => {
              const b = e.currentTarget as HTMLButtonElement;
              b.disabled = true;
              try {
                const g = await retrying(() => matchmaking.accept({ id: s.seekId }, bearer(me)));
                location.hash = `#/game/${g.gameId}`;
              } catch (err) {
                toast(describeError(err), "error");
                b.disabled = false;
                await refresh();
              }
            },
          },
          t("common.accept"),
        );
    return h(
      "li",
      { "data-testid": "lobby-seek", "data-seek-id": s.seekId, "data-seeker": s.seeker?.id ?? "" },
      h(
        "span",
        {},
        h("a", { href: profileHref(s.seeker?.id ?? ""), class: "player-link" }, playerName(s.seeker)),
        `${mine ? ` (${t("common.you")})` : ""} (${s.seekerRating}) · ${rulesLabel(s.rules)} · ${timeControlText(s.timeControl)} · ${s.rated ? t("common.rated") : t("common.casual")} · ${colorText(s.color)}${range}`,
      ),
      act,
    );
  }

  /** Reads the list again (coalesced: one call in flight, one more if asked meanwhile). */
  function refresh(): Promise<void> {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        try {
          const me = await ensureIdentity();
          const r = await retrying(() => matchmaking.listLobbySeeks({ limit: 30 }));
          list.replaceChildren(...(r.seeks.length ? r.seeks.map((s) => row(s, me)) : [h("li", { class: "hint" }, t("lobby.noSeeks"))]));
          list.dataset.count = String(r.seeks.length);
        } catch (e) {
          list.replaceChildren(h("li", { class: "error" }, describeError(e)));
        }
      } while (again);
    })().finally(() => (running = null));
    return running;
  }

  return { el, refresh };
}

export { rangeOf };
