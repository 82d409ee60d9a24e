// Players' public pages: a profile (#/profile/ID: Ratings.GetProfile, a rating-history graph from
// Ratings.RatingHistory drawn as an inline SVG line chart, recent rated games) and the leaderboard of a
// rating category (#/leaderboard/VARIANT[/SPEED]: Ratings.Leaderboard, page by page). Also the rating
// shown next to a player's name (Ratings.GetRatings, read once per player and page load).
import { create } from "@bufbuild/protobuf";
import type { TimeControl } from "./gen/draughts/v1/common_pb.js";
import { Variant } from "./gen/draughts/v1/common_pb.js";
import { RatingCategorySchema, SpeedClass, type Rating, type RatingCategory, type RatingHistoryEntry } from "./gen/draughts/v1/ratings_pb.js";
import { bearer, Code, ConnectError, currentIdentity, describeError, ensureIdentity, profileHref, ratings, retrying, type Identity } from "./api.js";
import { dateText, h, hashQuery } from "./dom.js";
import { t, tDynamic } from "./i18n.js";
import { variantKey, variantLabel, VARIANTS } from "./variants.js";

const SPEEDS: [SpeedClass, string][] = [
  [SpeedClass.UNSPECIFIED, "any speed"],
  [SpeedClass.BULLET, "bullet"],
  [SpeedClass.BLITZ, "blitz"],
  [SpeedClass.RAPID, "rapid"],
  [SpeedClass.CLASSICAL, "classical"],
  [SpeedClass.CORRESPONDENCE, "correspondence"],
];
const speedKey = (s: SpeedClass) => SPEEDS.find(([v]) => v === s)?.[1].replace(" ", "-") ?? "any-speed";
/** A speed class in the reader's language. */
const speedText = (key: string) => tDynamic(`speed.${key}`, key);

/**
 * The variants the server rates per speed class. The API does not say which (a server setting,
 * international by default): the leaderboard starts there with a speed class and lets the reader pick.
 */
const PER_SPEED = new Set([Variant.INTERNATIONAL]);

/** A rating category as players read it: "International (10×10) · blitz". */
export function categoryLabel(c: RatingCategory | undefined): string {
  const v = variantLabel(c?.variant);
  return c?.speed ? `${v} · ${speedText(speedKey(c.speed))}` : v;
}

/** The page of a category's leaderboard. */
export function leaderboardHref(c: RatingCategory | undefined): string {
  return `#/leaderboard/${variantKey(c?.variant)}${c?.speed ? `/${speedKey(c.speed)}` : ""}`;
}

/** The speed class of a time control (the server's rule: base + 40 × increment per player). */
export function speedOf(tc: TimeControl | undefined): SpeedClass {
  const k = tc?.kind;
  if (k?.case === "correspondence") return SpeedClass.CORRESPONDENCE;
  if (k?.case !== "fischer") return SpeedClass.UNSPECIFIED;
  const s = (Number(k.value.baseMs) + 40 * Number(k.value.incrementMs)) / 1000;
  return s < 180 ? SpeedClass.BULLET : s < 480 ? SpeedClass.BLITZ : s < 1500 ? SpeedClass.RAPID : SpeedClass.CLASSICAL;
}

/** A rating as a number, "?" after it while provisional. */
export function ratingText(r: Rating | undefined): string {
  if (!r) return "";
  return `${Math.round(r.rating)}${r.provisional ? "?" : ""}`;
}

const ratingsCache = new Map<string, { at: number; p: Promise<Rating[]> }>();

/** A player's ratings (GetRatings, read again after 30 s: a game just finished changes them; none for the computer). */
export function ratingsOf(playerId: string): Promise<Rating[]> {
  if (!playerId || playerId.startsWith("ai:")) return Promise.resolve([]);
  const had = ratingsCache.get(playerId);
  if (had && had.at > Date.now() - 30_000) return had.p;
  const p = retrying(() => ratings.getRatings({ playerId }, bearer(currentIdentity()))).then((r) => r.ratings);
  p.catch(() => ratingsCache.delete(playerId));
  ratingsCache.set(playerId, { at: Date.now(), p });
  return p;
}

/** The player's rating for a game of this variant and time control, where the player has one. */
export async function ratingFor(playerId: string, variant: Variant | undefined, tc: TimeControl | undefined): Promise<Rating | undefined> {
  const all = (await ratingsOf(playerId).catch(() => [])).filter((r) => r.category?.variant === variant);
  const speed = speedOf(tc);
  return all.find((r) => r.category?.speed === speed) ?? all.find((r) => !r.category?.speed);
}

/** A player's name as a link to the profile (the computer has none). */
export function playerLink(id: string, name: string, attrs: Record<string, unknown> = {}): HTMLElement {
  if (!id || id.startsWith("ai:")) return h("span", attrs, name);
  return h("a", { href: profileHref(id), class: "player-link", "data-player": id, ...attrs }, name);
}

const names = new Map<string, Promise<string>>();

/** A player's display name (GetProfile, once per player and page load); the id when it is unknown. */
function nameOf(playerId: string, me: Identity): Promise<string> {
  let p = names.get(playerId);
  if (!p) {
    p = retrying(() => ratings.getProfile({ playerId, recentGames: 1 }, bearer(me)))
      .then((r) => r.player?.displayName || playerId)
      .catch(() => playerId);
    names.set(playerId, p);
  }
  return p;
}

const SVG = "http://www.w3.org/2000/svg";

/** The rating after each update, oldest first, as an SVG line chart with its range and dates marked. */
export function ratingChart(entries: RatingHistoryEntry[]): SVGSVGElement {
  const W = 600;
  const H = 200;
  const L = 44;
  const B = 20;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("class", "rating-chart");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", t("profile.history"));
  const mk = (name: string, attrs: Record<string, string | number>, text?: string) => {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    svg.append(e);
    return e;
  };
  if (!entries.length) {
    mk("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "label" }, t("profile.noRated"));
    return svg;
  }
  const values = entries.map((e) => e.rating);
  let lo = Math.min(...values);
  let hi = Math.max(...values);
  const pad = Math.max(20, (hi - lo) * 0.1);
  lo = Math.floor((lo - pad) / 10) * 10;
  hi = Math.ceil((hi + pad) / 10) * 10;
  const n = entries.length;
  const x = (i: number) => L + (n === 1 ? (W - L - 8) / 2 : (i / (n - 1)) * (W - L - 8));
  const y = (v: number) => 6 + ((hi - v) / (hi - lo)) * (H - B - 12);
  // Grid lines at round values: about four of them.
  const step = [10, 20, 25, 50, 100, 200, 250, 500].find((s) => (hi - lo) / s <= 5) ?? 1000;
  for (let v = Math.ceil(lo / step) * step; v <= hi; v += step) {
    mk("line", { x1: L, x2: W - 4, y1: y(v), y2: y(v), class: "grid" });
    mk("text", { x: L - 4, y: y(v) + 4, "text-anchor": "end", class: "label" }, String(v));
  }
  mk("text", { x: L, y: H - 4, class: "label" }, dateText(entries[0].atMs));
  if (n > 1) mk("text", { x: W - 4, y: H - 4, "text-anchor": "end", class: "label" }, dateText(entries[n - 1].atMs));
  mk("polyline", { points: entries.map((e, i) => `${x(i).toFixed(1)},${y(e.rating).toFixed(1)}`).join(" "), class: "line" });
  entries.forEach((e, i) => {
    const c = mk("circle", { cx: x(i).toFixed(1), cy: y(e.rating).toFixed(1), r: n > 60 ? 1.5 : 3, class: "point" });
    const change = `${e.ratingChange >= 0 ? "+" : ""}${Math.round(e.ratingChange)}`;
    const t = document.createElementNS(SVG, "title");
    t.textContent = `${dateText(e.atMs, true)}: ${Math.round(e.rating)} (${change})`;
    c.append(t);
  });
  return svg;
}

/** #/profile/ID */
export function profilePage(root: HTMLElement, playerId: string): () => void {
  let closed = false;
  const box = h("div", { class: "profile", "data-testid": "profile" }, t("common.loading"));
  root.replaceChildren(box);
  const chart = h("div", { class: "chart", "data-testid": "rating-chart" });

  async function showHistory(me: Identity, category: RatingCategory) {
    chart.dataset.loaded = "false";
    try {
      // Newest first, up to 200 updates (the API's page bound): the graph shows the last 200.
      const r = await retrying(() => ratings.ratingHistory({ playerId, category, pageSize: 200 }, bearer(me)));
      if (closed) return;
      const entries = [...r.entries].reverse();
      chart.replaceChildren(ratingChart(entries));
      chart.dataset.points = String(entries.length);
      chart.dataset.loaded = "true";
    } catch (e) {
      chart.replaceChildren(h("div", { class: "error" }, describeError(e)));
    }
  }

  void (async () => {
    try {
      const me = await ensureIdentity();
      const p = await retrying(() => ratings.getProfile({ playerId, recentGames: 20 }, bearer(me)));
      if (closed) return;
      const own = me.id === playerId;
      const name = p.player?.displayName || playerId;
      document.title = `${name} · draughts`;
      const kind = p.account ? t("profile.kindAccount") : p.player?.computer ? t("profile.kindComputer") : p.player?.guest ? t("profile.kindGuest") : t("profile.kindPlayer");
      const pick = h(
        "select",
        { "data-testid": "history-category", "aria-label": t("profile.category") },
        ...p.ratings.map((r, i) => h("option", { value: String(i) }, categoryLabel(r.rating?.category))),
      );
      pick.addEventListener("change", () => void showHistory(me, p.ratings[Number(pick.value)].rating!.category!));
      const games = p.wins + p.draws + p.losses;
      box.replaceChildren(
        h("h2", { "data-testid": "profile-name" }, name),
        h(
          "p",
          { class: "hint", "data-testid": "profile-meta" },
          `${kind} · ${playerId}`,
          p.sinceMs ? ` · ${t("account.since", { date: dateText(p.sinceMs) })}` : "",
          ` · ${t("profile.ratedGames", { games, wins: p.wins, draws: p.draws, losses: p.losses })}`,
        ),
        own && me.kind === "account" ? h("p", {}, h("a", { href: "#/settings" }, t("profile.yourSettings"))) : "",
        own && me.kind === "guest" ? h("p", {}, t("profile.guestProfile"), " ", h("a", { href: "#/signup" }, t("account.createTitle"))) : "",
        h("h3", {}, t("profile.ratings")),
        p.ratings.length
          ? h(
              "table",
              { class: "ratings", "data-testid": "profile-ratings" },
              h("thead", {}, h("tr", {}, h("th", {}, t("profile.category")), h("th", {}, t("profile.rating")), h("th", {}, t("profile.rank")), h("th", {}, t("profile.games")), h("th", {}, t("profile.wdl")))),
              h(
                "tbody",
                {},
                ...p.ratings.map((pr) => {
                  const r = pr.rating!;
                  return h(
                    "tr",
                    { "data-testid": "profile-rating", "data-category": `${variantKey(r.category?.variant)}${r.category?.speed ? "-" + speedKey(r.category.speed) : ""}`, "data-provisional": String(r.provisional) },
                    h("td", {}, h("a", { href: leaderboardHref(r.category) }, categoryLabel(r.category))),
                    h("td", {}, h("b", {}, String(Math.round(r.rating))), ` ±${Math.round(r.deviation)}`),
                    h("td", {}, r.provisional ? h("span", { class: "provisional", title: t("profile.provisionalHint") }, t("profile.provisional")) : `#${pr.rank}`),
                    h("td", {}, String(r.games)),
                    h("td", {}, `${r.wins} / ${r.draws} / ${r.losses}`),
                  );
                }),
              ),
            )
          : h("p", { class: "hint", "data-testid": "profile-no-ratings" }, t("profile.noRated")),
        p.ratings.length ? h("h3", {}, t("profile.history"), " ", pick) : "",
        p.ratings.length ? chart : "",
        h("h3", {}, t("profile.recent")),
        p.recentGames.length
          ? h(
              "ul",
              { class: "recent", "data-testid": "profile-games" },
              ...p.recentGames.map((g) =>
                h(
                  "li",
                  {},
                  h("a", { href: `#/game/${g.gameId}`, "data-testid": "profile-game" }, `${categoryLabel(g.category)} · ${dateText(g.atMs, true)}`),
                  ` → ${Math.round(g.rating)} (`,
                  h("span", { class: g.ratingChange >= 0 ? "up" : "down" }, `${g.ratingChange >= 0 ? "+" : ""}${Math.round(g.ratingChange)}`),
                  ")",
                ),
              ),
            )
          : h("p", { class: "hint" }, t("profile.none")),
      );
      box.dataset.loaded = "true";
      if (p.ratings.length) {
        // The category with the most games first.
        let best = 0;
        p.ratings.forEach((r, i) => (r.rating!.games > p.ratings[best].rating!.games ? (best = i) : 0));
        pick.value = String(best);
        await showHistory(me, p.ratings[best].rating!.category!);
      }
    } catch (e) {
      const err = ConnectError.from(e);
      box.replaceChildren(h("p", { class: "error", "data-testid": "profile-error", "data-code": Code[err.code] }, err.code === Code.NotFound ? t("profile.noPlayer", { id: playerId }) : describeError(e)));
    }
  })();

  return () => {
    closed = true;
  };
}

/** #/leaderboard[/VARIANT[/SPEED]][?bots=1] (the people's leaderboard, or with `bots=1` the BOTs'). */
export function leaderboardPage(root: HTMLElement, variantArg?: string, speedArg?: string): () => void {
  let closed = false;
  const v = VARIANTS.find((x) => x.key === variantArg) ?? VARIANTS[0];
  const speedGiven = SPEEDS.find(([, k]) => k.replace(" ", "-") === speedArg)?.[0];
  const speed = speedGiven ?? (PER_SPEED.has(v.variant) ? SpeedClass.BLITZ : SpeedClass.UNSPECIFIED);
  const category = create(RatingCategorySchema, { variant: v.variant, speed });
  // 25 a page; `?size=N` asks for another size (1 to 200, the API's bound).
  const PAGE = Math.min(Math.max(Number(hashQuery().get("size")) || 25, 1), 200);
  // The people's leaderboard or the BOTs' (the server's mark; ranks count within the one shown).
  const bots = hashQuery().get("bots") === "1";
  const tokens: string[] = [""];
  let page = 0;

  const variantSel = h("select", { "data-testid": "lb-variant" }, ...VARIANTS.map((x) => h("option", { value: x.key, selected: x.key === v.key }, x.label)));
  const speedSel = h("select", { "data-testid": "lb-speed" }, ...SPEEDS.map(([s, k]) => h("option", { value: k.replace(" ", "-"), selected: s === speed }, speedText(k.replace(" ", "-")))));
  const kindSel = h(
    "select",
    { "data-testid": "lb-kind" },
    h("option", { value: "people", selected: !bots }, t("profile.people")),
    h("option", { value: "bots", selected: bots }, t("profile.bots")),
  );
  const go = () => {
    const q = hashQuery();
    if (kindSel.value === "bots") q.set("bots", "1");
    else q.delete("bots");
    const qs = q.toString();
    location.hash = `#/leaderboard/${variantSel.value}/${speedSel.value}${qs ? "?" + qs : ""}`;
  };
  kindSel.addEventListener("change", go);
  variantSel.addEventListener("change", () => {
    // A variant rated per speed class starts at blitz; the others at their single rating.
    const nv = VARIANTS.find((x) => x.key === variantSel.value);
    speedSel.value = nv && PER_SPEED.has(nv.variant) ? "blitz" : "any-speed";
    go();
  });
  speedSel.addEventListener("change", go);
  const table = h("tbody", {});
  const state = h("div", { class: "hint", "data-testid": "lb-state" });
  const prev = h("button", { "data-testid": "lb-prev", disabled: true, onclick: () => void load(page - 1) }, t("profile.previous"));
  const next = h("button", { "data-testid": "lb-next", disabled: true, onclick: () => void load(page + 1) }, t("profile.next"));
  root.replaceChildren(
    h(
      "div",
      { class: "leaderboard", "data-testid": "leaderboard", "data-category": `${v.key}/${speedKey(speed)}`, "data-bots": String(bots) },
      h("h2", {}, t("nav.leaderboard")),
      h("div", { class: "row" }, kindSel, variantSel, speedSel),
      h("p", { class: "hint" }, t("profile.establishedOnly")),
      h("table", { class: "ratings" }, h("thead", {}, h("tr", {}, h("th", {}, "#"), h("th", {}, t("profile.player")), h("th", {}, t("profile.rating")), h("th", {}, t("profile.games")), h("th", {}, t("profile.wdl")))), table),
      state,
      h("div", { class: "row" }, prev, next),
    ),
  );

  async function load(p: number) {
    state.textContent = t("common.loading");
    try {
      const me = await ensureIdentity();
      const r = await retrying(() => ratings.leaderboard({ category, pageSize: PAGE, pageToken: tokens[p], bots }, bearer(me)));
      if (closed) return;
      page = p;
      tokens[p + 1] = r.nextPageToken;
      prev.disabled = p === 0;
      next.disabled = !r.nextPageToken;
      table.replaceChildren(
        ...r.entries.map((e) => {
          const rt = e.rating!;
          const link = playerLink(rt.playerId, rt.playerId, { "data-testid": "lb-player" });
          // The entries carry player ids only: the names come from the players' profiles.
          void nameOf(rt.playerId, me).then((n) => (link.textContent = n));
          return h(
            "tr",
            { "data-testid": "lb-entry", "data-player": rt.playerId, class: rt.playerId === me.id ? "me" : "" },
            h("td", {}, String(e.rank)),
            h("td", {}, link, e.bot ? h("span", { class: "badge bot", "data-testid": "lb-bot" }, t("game.bot")) : ""),
            h("td", {}, h("b", {}, String(Math.round(rt.rating))), ` ±${Math.round(rt.deviation)}`),
            h("td", {}, String(rt.games)),
            h("td", {}, `${rt.wins} / ${rt.draws} / ${rt.losses}`),
          );
        }),
      );
      state.textContent = r.entries.length ? t("profile.page", { n: p + 1 }) : p === 0 ? t(bots ? "profile.nobodyBots" : "profile.nobody") : t("profile.noMore");
      state.dataset.loaded = "true";
      state.dataset.entries = String(r.entries.length);
    } catch (e) {
      state.textContent = describeError(e);
      state.dataset.error = Code[ConnectError.from(e).code];
    }
  }
  void load(0);
  return () => {
    closed = true;
  };
}
