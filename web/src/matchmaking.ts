// Matchmaking in the lobby (draughts.v1.Matchmaking): the server's pools (ListPools), the lobby's numbers
// (WatchLobby), quick seek in one or more pools (Seek, held open while waiting; closing it withdraws the
// seek), and the lobby's custom seeks (ListLobbySeeks, Accept, Cancel).
import { create } from "@bufbuild/protobuf";
import { Color } from "./gen/draughts/v1/common_pb.js";
import { RatingRangeSchema, SeekEndReason, type LobbySeek, type LobbyStats, type Pool, type RatingRange } from "./gen/draughts/v1/matchmaking_pb.js";
import { bearer, Code, ConnectError, describeError, ensureIdentity, matchmaking, playerName, profileHref, retrying, sleep, type Identity } from "./api.js";
import { h, toast } from "./dom.js";
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
  return s < 90 ? `${s} s` : `${Math.round(s / 60)} min`;
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

const END_TEXT: Record<number, string> = {
  [SeekEndReason.CANCELLED]: "cancelled",
  [SeekEndReason.IN_GAME]: "you started a game meanwhile",
  [SeekEndReason.EXPIRED]: "expired (no connection held it)",
  [SeekEndReason.UNKNOWN_PLAYER]: "your identity is no longer known",
};

/** Reads an optional rating range from two inputs; null when both are empty; throws on a bad one. */
function rangeOf(min: string, max: string): RatingRange | undefined {
  if (!min.trim() && !max.trim()) return undefined;
  const lo = min.trim() ? Number(min) : 0;
  const hi = max.trim() ? Number(max) : 4000;
  if (!Number.isInteger(lo) || !Number.isInteger(hi) || lo < 0 || hi > 4000 || lo > hi) throw new Error("rating range: whole numbers, 0 ≤ min ≤ max ≤ 4000");
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
  const ratedSel = h("select", { "data-testid": "qs-rated" }, h("option", { value: "casual", selected: !prefs.rated }, "Casual"), h("option", { value: "rated", selected: prefs.rated }, "Rated"));
  const min = h("input", { type: "number", min: 0, max: 4000, placeholder: "min", value: prefs.min, class: "small", "data-testid": "qs-min" });
  const max = h("input", { type: "number", min: 0, max: 4000, placeholder: "max", value: prefs.max, class: "small", "data-testid": "qs-max" });
  const grid = h("div", { class: "pools", "data-testid": "pools" }, "Loading the pools…");
  const picked = h("div", { class: "picked", "data-testid": "picked-pools" });
  const state = h("div", { class: "seek-state", "data-testid": "seek-state", "data-state": "idle" });
  const seekBtn = h("button", { class: "primary", "data-testid": "seek", onclick: () => void startSeek() }, "Seek a game");
  const cancelBtn = h("button", { "data-testid": "cancel-seek", hidden: true, onclick: () => void cancel(true) }, "Cancel");

  const save = () =>
    localStorage.setItem(QUICK, JSON.stringify({ variant: variantSel.value, rated: ratedSel.value === "rated", pools: [...chosen], min: min.value, max: max.value } satisfies QuickPrefs));

  const poolLabel = (p: Pool) => `${variantLabel(p.rules?.variant)} ${timeControlText(p.timeControl)} ${p.rated ? "rated" : "casual"}`;

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
              h("b", {}, p.timeControl?.kind.case === "correspondence" ? `${p.timeControl.kind.value.daysPerMove} d/move` : timeControlText(p.timeControl)),
              h("small", {}, ps ? `${ps.seeking} seeking${ps.typicalWaitMs ? ` · ~${waitText(Number(ps.typicalWaitMs))}` : ""}` : " "),
            );
          })
        : [h("span", {}, all.length ? "No pool of this kind on this server." : "")]),
    );
  }

  function render() {
    renderGrid();
    const ids = [...chosen].filter((id) => all.length === 0 || all.some((p) => p.poolId === id));
    picked.replaceChildren(
      ...(ids.length
        ? [
            h("span", {}, `${ids.length} pool${ids.length > 1 ? "s" : ""}: `),
            ...ids.map((id) => {
              const p = all.find((x) => x.poolId === id);
              return h(
                "button",
                {
                  class: "chip",
                  title: "remove",
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
        : [h("span", { class: "hint" }, "Pick one or more time controls (up to 8 pools, of any variants).")]),
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
    show("connecting", "Seeking…");
    let me: Identity;
    try {
      me = await ensureIdentity();
    } catch (e) {
      stop(`Could not seek: ${describeError(e)}`, "error");
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
      show("waiting", `Waiting for an opponent in ${ids.length} pool${ids.length > 1 ? "s" : ""}: ${waitText(Date.now() - since)}${missed ? `, range widened ${missed}×` : ""}`);
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
              stop(`Paired with ${playerName(p.opponent)} (${p.color === Color.WHITE ? "you play White" : "you play Black"}) after ${waitText(Number(p.waitedMs))}`, "paired");
              state.dataset.game = p.gameId;
              location.hash = `#/game/${p.gameId}`;
              return;
            } else if (k.case === "ended") {
              stop(`The seek ended: ${END_TEXT[k.value.reason] ?? "ended"}.`, "ended");
              return;
            }
          }
          // The stream ended without a word (the server is going away): seek again, which joins the
          // waiting seek (same pools) and keeps its place.
        } catch (e) {
          if (ctl.signal.aborted) return;
          const err = ConnectError.from(e);
          if (![Code.Unavailable, Code.Unknown, Code.Internal, Code.ResourceExhausted, Code.DeadlineExceeded, Code.Aborted].includes(err.code)) {
            stop(`Could not seek: ${describeError(err)}`, "error");
            return;
          }
        }
        if (ctl.signal.aborted) return;
        show("reconnecting", "Connection lost: seeking again…");
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
    stop("Seek cancelled.", "cancelled");
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
    h("h3", {}, "Quick game"),
    h("div", { class: "row" }, variantSel, ratedSel),
    grid,
    picked,
    h("div", { class: "row" }, h("span", {}, "Opponent's rating "), min, h("span", {}, "–"), max, h("span", { class: "hint" }, "(optional)")),
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
      .catch((e) => (grid.textContent = `No quick pairing here: ${describeError(e)}`));
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
  const el = h("section", { class: "lobby-seeks-box" }, h("h3", {}, "Lobby seeks"), list);
  let running: Promise<void> | null = null;
  let again = false;

  const colorText = (c: Color) => (c === Color.WHITE ? "plays White" : c === Color.BLACK ? "plays Black" : "colours at random");

  function row(s: LobbySeek, me: Identity) {
    const mine = s.seeker?.id === me.id;
    if (mine) awaiting.add(s.seekId);
    const range = s.ratingRange ? ` · ratings ${s.ratingRange.min}–${s.ratingRange.max}` : "";
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
          "Cancel",
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
          "Accept",
        );
    return h(
      "li",
      { "data-testid": "lobby-seek", "data-seek-id": s.seekId, "data-seeker": s.seeker?.id ?? "" },
      h(
        "span",
        {},
        h("a", { href: profileHref(s.seeker?.id ?? ""), class: "player-link" }, playerName(s.seeker)),
        `${mine ? " (you)" : ""} (${s.seekerRating}) · ${rulesLabel(s.rules)} · ${timeControlText(s.timeControl)} · ${s.rated ? "rated" : "casual"} · ${colorText(s.color)}${range}`,
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
          list.replaceChildren(...(r.seeks.length ? r.seeks.map((s) => row(s, me)) : [h("li", { class: "hint" }, "No open seeks: offer one from New game.")]));
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
