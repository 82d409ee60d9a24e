// Tournaments (draughts.v1.Tournaments): the list (#/tournaments, by state), a tournament's page
// (#/tournament/ID: its terms, live standings from WatchTournament, the games in progress, join / leave /
// start, and the player's own next game joined automatically when it is paired) and the form that creates
// one (#/tournaments/new, for signed-in accounts). A server without the service says so.
import { create } from "@bufbuild/protobuf";
import {
  SwissRoundStart,
  TournamentKind,
  TournamentState,
  TournamentTermsSchema,
  type StandingRow,
  type Tournament,
  type TournamentPairing,
  type TournamentView,
} from "./gen/draughts/v1/tournaments_pb.js";
import { bearer, Code, ConnectError, currentIdentity, describeError, ensureIdentity, playerName, retrying, sleep, tournaments, type Identity } from "./api.js";
import { dateText, h, toast } from "./dom.js";
import { t, tDynamic } from "./i18n.js";
import { playerLink } from "./profile.js";
import { timeControlText, TIME_CONTROLS } from "./timecontrol.js";
import { ruleSet, rulesLabel, VARIANTS } from "./variants.js";

const unavailable = (e: unknown) => ConnectError.from(e).code === Code.Unimplemented;

const stateName = (s: TournamentState) => tDynamic(`tournament.state.${(TournamentState[s] ?? "UNSPECIFIED").toLowerCase()}`, TournamentState[s] ?? "?");
const kindName = (k: TournamentKind) => (k === TournamentKind.SWISS ? t("tournament.swiss") : t("tournament.arena"));

/** One line of terms: kind, rule set, time control, rated, rounds or length. */
function termsText(tm: Tournament): string {
  const terms = tm.terms;
  const parts = [kindName(terms?.kind ?? TournamentKind.ARENA), rulesLabel(terms?.rules), timeControlText(terms?.timeControl), terms?.rated ? t("common.rated") : t("common.casual")];
  if (terms?.kind === TournamentKind.SWISS) parts.push(t("tournament.rounds", { count: terms.swissRounds }));
  else if (terms?.arenaDurationSeconds) parts.push(t("tournament.minutes", { count: Math.round(terms.arenaDurationSeconds / 60) }));
  // Arenas allow berserk unless their creator turned it off.
  if (terms?.kind !== TournamentKind.SWISS && terms?.berserkAllowed === false) parts.push(t("tournament.noBerserk"));
  return parts.join(" · ");
}

/** #/tournaments */
export function tournamentsPage(root: HTMLElement, stateArg?: string): () => void {
  let closed = false;
  const states = [TournamentState.UPCOMING, TournamentState.RUNNING, TournamentState.FINISHED];
  const state = states.find((s) => TournamentState[s].toLowerCase() === stateArg) ?? TournamentState.RUNNING;
  const list = h("ul", { class: "tournaments", "data-testid": "tournament-list" }, h("li", { class: "hint" }, t("common.loading")));
  const id = currentIdentity();
  root.replaceChildren(
    h(
      "div",
      { class: "tournaments-page" },
      h("h2", {}, t("tournament.title")),
      h(
        "div",
        { class: "row tabs", role: "tablist" },
        ...states.map((s) =>
          h("a", { href: `#/tournaments/${TournamentState[s].toLowerCase()}`, class: `button${s === state ? " primary" : ""}`, role: "tab", "aria-selected": String(s === state), "data-testid": `tab-${TournamentState[s].toLowerCase()}` }, stateName(s)),
        ),
        id?.kind === "account"
          ? h("a", { href: "#/tournaments/new", class: "button", "data-testid": "new-tournament" }, t("tournament.create"))
          : h("span", { class: "hint" }, t("tournament.accountsCreate")),
      ),
      list,
    ),
  );
  void (async () => {
    try {
      const me = await ensureIdentity();
      const r = await retrying(() => tournaments.listTournaments({ state, pageSize: 50 }, bearer(me)));
      if (closed) return;
      list.dataset.loaded = "true";
      list.replaceChildren(
        ...(r.tournaments.length
          ? r.tournaments.map((tm) =>
              h(
                "li",
                { "data-testid": "tournament", "data-id": tm.tournamentId },
                h("a", { href: `#/tournament/${tm.tournamentId}` }, h("b", {}, tm.terms?.name ?? tm.tournamentId)),
                h("div", { class: "hint" }, `${termsText(tm)} · ${t("tournament.players", { count: tm.players })} · ${t("tournament.starts", { date: dateText(tm.startsAtMs, true) })}`),
              ),
            )
          : [h("li", { class: "hint" }, t("tournament.none"))]),
      );
    } catch (e) {
      list.dataset.loaded = "error";
      list.replaceChildren(h("li", { class: "error", "data-testid": "tournaments-unavailable" }, unavailable(e) ? t("tournament.unavailable") : describeError(e)));
    }
  })();
  return () => {
    closed = true;
  };
}

/** #/tournament/ID */
export function tournamentPage(root: HTMLElement, tournamentId: string): () => void {
  const abort = new AbortController();
  let closed = false;
  let me: Identity | null = null;
  let view: TournamentView | null = null;

  const head = h("div", { class: "tournament-head" }, t("common.loading"));
  const actions = h("div", { class: "row" });
  const standings = h("tbody", { "data-testid": "standings" });
  const pairings = h("ul", { class: "pairings", "data-testid": "pairings" });
  const live = h("div", { class: "hint", "data-testid": "tournament-live", "data-state": "connecting" });
  const myGame = h("div", { class: "watching", "data-testid": "my-game", hidden: true });
  const password = h("input", { type: "password", placeholder: t("tournament.password"), "aria-label": t("tournament.password"), "data-testid": "tournament-password", hidden: true });
  root.replaceChildren(
    h(
      "div",
      { class: "tournament-page", "data-testid": "tournament-page" },
      head,
      myGame,
      actions,
      live,
      h("h3", {}, t("tournament.standings")),
      h(
        "table",
        { class: "ratings" },
        h(
          "thead",
          {},
          h("tr", {}, h("th", {}, "#"), h("th", {}, t("profile.player")), h("th", {}, t("profile.rating")), h("th", {}, t("tournament.points")), h("th", {}, t("profile.games")), h("th", {}, t("tournament.wins"))),
        ),
        standings,
      ),
      h("h3", {}, t("tournament.gamesNow")),
      pairings,
    ),
  );

  function renderStandings(rows: StandingRow[]) {
    standings.replaceChildren(
      ...rows.map((r) =>
        h(
          "tr",
          { "data-testid": "standing", "data-player": r.player?.id ?? "", class: r.player?.id === me?.id ? "me" : "" },
          h("td", {}, String(r.rank)),
          h("td", {}, playerLink(r.player?.id ?? "", playerName(r.player)), r.onFire ? " 🔥" : "", r.paused || r.withdrawn ? h("span", { class: "hint" }, ` (${r.withdrawn ? t("tournament.withdrawn") : t("tournament.paused")})`) : ""),
          h("td", {}, String(r.rating)),
          // Swiss points are half-points: shown as points (1½).
          h("td", {}, view?.tournament?.terms?.kind === TournamentKind.SWISS ? halfPoints(r.points) : String(r.points)),
          h("td", {}, String(r.games)),
          h("td", {}, String(r.wins)),
        ),
      ),
    );
    standings.dataset.rows = String(rows.length);
  }

  function renderPairings(ps: TournamentPairing[]) {
    pairings.replaceChildren(
      ...(ps.length
        ? ps.map((p) => h("li", {}, h("a", { href: `#/game/${p.gameId}`, "data-testid": "pairing" }, `${playerName(p.white)} – ${playerName(p.black)}`)))
        : [h("li", { class: "hint" }, t("tournament.noGames"))]),
    );
  }

  function renderHead() {
    const tm = view?.tournament;
    if (!tm) return;
    const mine = me?.id === tm.creator?.id;
    head.replaceChildren(
      h("h2", { "data-testid": "tournament-name" }, tm.terms?.name ?? tournamentId),
      h("p", {}, termsText(tm)),
      h(
        "p",
        { "data-testid": "tournament-state", "data-state": TournamentState[tm.state].toLowerCase() },
        `${stateName(tm.state)} · ${t("tournament.players", { count: tm.players })}`,
        tm.round ? ` · ${t("tournament.round", { n: tm.round })}` : "",
        ` · ${t("tournament.starts", { date: dateText(tm.startsAtMs, true) })}`,
        tm.endsAtMs ? ` · ${t("tournament.ends", { date: dateText(tm.endsAtMs, true) })}` : "",
        ` · ${t("tournament.by", { name: playerName(tm.creator) })}`,
      ),
    );
    const open = tm.state === TournamentState.UPCOMING || tm.state === TournamentState.RUNNING;
    const out: HTMLElement[] = [];
    if (open && !tm.joined) {
      password.hidden = !tm.hasPassword;
      out.push(password, act(t("tournament.join"), "join-tournament", () => tournaments.joinTournament({ tournamentId, password: password.value }, bearer(me))));
    }
    if (open && tm.joined) out.push(act(t("tournament.leave"), "leave-tournament", () => tournaments.leaveTournament({ tournamentId }, bearer(me))));
    if (mine && tm.state === TournamentState.UPCOMING) out.push(act(t("tournament.start"), "start-tournament", () => tournaments.startTournament({ tournamentId }, bearer(me))));
    actions.replaceChildren(...out);
  }

  function act(label: string, testid: string, f: () => Promise<Tournament>) {
    const b = h(
      "button",
      {
        class: "primary",
        "data-testid": testid,
        onclick: async () => {
          b.disabled = true;
          try {
            const tm = await f();
            if (view) view.tournament = tm;
            renderHead();
            void reload();
          } catch (e) {
            toast(describeError(e), "error");
          } finally {
            b.disabled = false;
          }
        },
      },
      label,
    );
    return b;
  }

  /** The player's own game was paired: go to it (once). */
  function follow(p: TournamentPairing) {
    if (!me || followed.has(p.gameId)) return;
    if (p.white?.id !== me.id && p.black?.id !== me.id) return;
    followed.add(p.gameId);
    location.hash = `#/game/${p.gameId}`;
  }

  let loading: Promise<void> | null = null;
  /** GetTournament (coalesced: one call at a time). */
  function reload(): Promise<void> {
    if (loading) return loading;
    loading = (async () => {
      const v = await retrying(() => tournaments.getTournament({ tournamentId, standingsPageSize: 100 }, bearer(me)));
      if (closed) return;
      view = v;
      renderHead();
      renderStandings(v.standings);
      renderPairings(v.pairings);
      // The player's own game in progress: a link to it (the page was opened after the pairing, or
      // from the game: it does not send the player back by itself).
      const own = me ? v.pairings.find((p) => p.white?.id === me!.id || p.black?.id === me!.id) : undefined;
      myGame.hidden = !own;
      myGame.replaceChildren(...(own ? [t("tournament.yourGame"), " ", h("a", { href: `#/game/${own.gameId}`, class: "button primary", "data-testid": "my-game-link" }, t("tournament.play"))] : []));
    })().finally(() => (loading = null));
    return loading;
  }

  async function watch() {
    let backoff = 500;
    while (!closed) {
      try {
        for await (const ev of tournaments.watchTournament({ tournamentId }, { ...bearer(me), signal: abort.signal })) {
          backoff = 500;
          live.dataset.state = "live";
          live.textContent = t("tournament.live");
          const k = ev.kind;
          if (k.case === "standings") renderStandings(k.value.rows);
          else if (k.case === "paired") {
            follow(k.value);
            void reload();
          } else if (k.case === "finished") {
            if (view) view.tournament = k.value;
            void reload();
          } else void reload();
        }
        if (view?.tournament?.state === TournamentState.FINISHED || view?.tournament?.state === TournamentState.CANCELLED) {
          live.dataset.state = "over";
          live.textContent = "";
          return;
        }
      } catch (e) {
        if (closed) return;
        const code = ConnectError.from(e).code;
        if (code === Code.NotFound || code === Code.InvalidArgument || code === Code.Unimplemented) return;
      }
      live.dataset.state = "reconnecting";
      live.textContent = t("game.reconnecting");
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 5000);
    }
  }

  void (async () => {
    try {
      me = await ensureIdentity();
      await reload();
      await watch();
    } catch (e) {
      head.replaceChildren(h("p", { class: "error", "data-testid": "tournament-error" }, unavailable(e) ? t("tournament.unavailable") : describeError(e)));
    }
  })();

  return () => {
    closed = true;
    abort.abort();
  };
}

/** Games the player was already sent to (a paired event may come twice; a page opened again does not send them back). */
const followed = new Set<string>();

const halfPoints = (n: number) => `${Math.floor(n / 2)}${n % 2 ? "½" : ""}`;

/** #/tournaments/new */
export function createTournamentPage(root: HTMLElement): () => void {
  const me = currentIdentity();
  if (me?.kind !== "account") {
    root.replaceChildren(
      h(
        "div",
        { class: "account-page" },
        h("h2", {}, t("tournament.create")),
        h("p", { "data-testid": "tournament-accounts-only" }, t("tournament.accountsCreate"), " ", h("a", { href: "#/signin?next=%23%2Ftournaments%2Fnew" }, t("nav.signIn"))),
      ),
    );
    return () => {};
  }
  const name = h("input", { required: true, maxlength: 80, "data-testid": "t-name", value: t("tournament.defaultName") });
  const kind = h("select", { "data-testid": "t-kind" }, h("option", { value: "arena" }, t("tournament.arena")), h("option", { value: "swiss" }, t("tournament.swiss")));
  const variant = h("select", { "data-testid": "t-variant" }, ...VARIANTS.map((v) => h("option", { value: v.key }, v.label)));
  const fischer = TIME_CONTROLS.filter((tc) => tc.key !== "corr1");
  const time = h("select", { "data-testid": "t-time" }, ...fischer.map((tc) => h("option", { value: tc.key, selected: tc.key === "3+2" }, tc.label)));
  const rated = h("input", { type: "checkbox", "data-testid": "t-rated" });
  const startIn = h("input", { type: "number", min: 0, max: 43200, value: "5", class: "small", "data-testid": "t-start-in" });
  const length = h("input", { type: "number", min: 1, max: 1440, value: "30", class: "small", "data-testid": "t-minutes" });
  const rounds = h("input", { type: "number", min: 1, max: 50, value: "5", class: "small", "data-testid": "t-rounds" });
  const minRating = h("input", { type: "number", min: 0, max: 4000, class: "small", "data-testid": "t-min-rating", placeholder: t("seek.min") });
  const maxRating = h("input", { type: "number", min: 0, max: 4000, class: "small", "data-testid": "t-max-rating", placeholder: t("seek.max") });
  const accountsOnly = h("input", { type: "checkbox", "data-testid": "t-accounts-only" });
  const maxPlayers = h("input", { type: "number", min: 0, max: 10000, class: "small", "data-testid": "t-max-players", placeholder: "0" });
  const pass = h("input", { type: "password", maxlength: 64, "data-testid": "t-password", autocomplete: "new-password" });
  const error = h("div", { class: "error", "data-testid": "t-error" });
  const berserk = h("input", { type: "checkbox", checked: true, "data-testid": "t-berserk" });
  const arenaRow = h(
    "div",
    {},
    h("label", {}, `${t("tournament.lengthMinutes")} `, length),
    h("label", { title: t("game.berserkHint") }, berserk, ` ${t("tournament.berserkAllowed")}`),
  );
  const swissRow = h("label", { hidden: true }, `${t("tournament.roundsLabel")} `, rounds);
  kind.addEventListener("change", () => {
    arenaRow.hidden = kind.value !== "arena";
    swissRow.hidden = kind.value !== "swiss";
  });
  const submit = h("button", { type: "submit", class: "primary", "data-testid": "t-create" }, t("tournament.create"));
  const form = h(
    "form",
    {
      class: "account-form",
      onsubmit: async (e: Event) => {
        e.preventDefault();
        error.textContent = "";
        submit.disabled = true;
        try {
          const v = VARIANTS.find((x) => x.key === variant.value) ?? VARIANTS[0];
          const swiss = kind.value === "swiss";
          const terms = create(TournamentTermsSchema, {
            name: name.value.trim(),
            kind: swiss ? TournamentKind.SWISS : TournamentKind.ARENA,
            rules: ruleSet(v.variant, {}),
            timeControl: (fischer.find((tc) => tc.key === time.value) ?? fischer[0]).make(),
            rated: rated.checked,
            start: { case: "startInSeconds", value: Math.max(0, Math.round(Number(startIn.value) * 60)) },
            arenaDurationSeconds: swiss ? 0 : Math.round(Number(length.value) * 60),
            berserkAllowed: swiss ? undefined : berserk.checked,
            swissRounds: swiss ? Number(rounds.value) : 0,
            roundStart: swiss ? SwissRoundStart.AFTER_PREVIOUS : SwissRoundStart.UNSPECIFIED,
            conditions: {
              minRating: Number(minRating.value) || 0,
              maxRating: Number(maxRating.value) || 0,
              accountsOnly: accountsOnly.checked,
              maxPlayers: Number(maxPlayers.value) || 0,
              password: pass.value,
            },
          });
          const tm = await tournaments.createTournament({ terms }, bearer(await ensureIdentity()));
          location.hash = `#/tournament/${tm.tournamentId}`;
        } catch (err) {
          error.textContent = unavailable(err) ? t("tournament.unavailable") : describeError(err);
        } finally {
          submit.disabled = false;
        }
      },
    },
    h("label", {}, t("tournament.name"), h("br"), name),
    h("div", { class: "row" }, h("label", {}, `${t("tournament.kind")} `, kind), h("label", {}, `${t("lobby.variant")} `, variant), h("label", {}, `${t("lobby.time")} `, time)),
    h("label", {}, rated, ` ${t("common.rated")}`),
    h("label", {}, `${t("tournament.startIn")} `, startIn),
    arenaRow,
    swissRow,
    h(
      "fieldset",
      {},
      h("legend", {}, t("tournament.conditions")),
      h("div", { class: "row" }, h("span", {}, t("lobby.ratingRange")), minRating, h("span", {}, "–"), maxRating),
      h("label", {}, accountsOnly, ` ${t("tournament.accountsOnly")}`),
      h("label", {}, `${t("tournament.maxPlayers")} `, maxPlayers),
      h("label", {}, `${t("tournament.password")} `, pass),
    ),
    h("div", { class: "row" }, submit),
    error,
  );
  root.replaceChildren(h("div", { class: "account-page" }, h("h2", {}, t("tournament.create")), form));
  return () => {};
}
