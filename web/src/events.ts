// The signed-in player's events (Games.WatchPlayerEvents): invitations received (challenges, rematch
// offers) shown with Accept/Decline (Matchmaking.Accept, which also ends a quick seek, and
// Matchmaking.Decline with a reason from the fixed list), and the invitations this browser waits on
// (challenge links, named challenges, lobby seeks, rematches), followed into their game. Every
// invitation event is also dispatched on `window` as "draughts:invitation" (the invite page listens).
import { DeclineReason, InvitationState, type Invitation } from "./gen/draughts/v1/games_pb.js";
import { bearer, Code, ConnectError, describeError, ensureIdentity, games, identityRefused, matchmaking, playerName, profileHref, retrying, sleep, type Identity } from "./api.js";
import { h, toast } from "./dom.js";
import { t, tDynamic } from "./i18n.js";
import { rulesLabel } from "./variants.js";
import { timeControlText } from "./timecontrol.js";

/** Invitation ids this browser sent and waits on: once accepted, go to their game. */
export const awaiting = new Set<string>();

const received = new Map<string, Invitation>();
let started = false;
let connected = false;

export function isConnected(): boolean {
  return connected;
}

function goToGame(id: string) {
  awaiting.delete(id);
  if (location.hash !== `#/game/${id}`) location.hash = `#/game/${id}`;
}

const REASONS: DeclineReason[] = [
  DeclineReason.UNSPECIFIED,
  DeclineReason.LATER,
  DeclineReason.TOO_FAST,
  DeclineReason.TOO_SLOW,
  DeclineReason.TIME_CONTROL,
  DeclineReason.RATED,
  DeclineReason.CASUAL,
  DeclineReason.VARIANT,
];

/** A decline reason as the reader's language says it ("too fast"). */
export function declineReasonText(r: DeclineReason): string {
  const key = (DeclineReason[r] ?? "UNSPECIFIED").toLowerCase();
  return tDynamic(`decline.${key}`, key.replace(/_/g, " "));
}

/** Whether the server lacks Matchmaking (then the same calls go to Games directly). */
const noMatchmaking = (e: unknown) => ConnectError.from(e).code === Code.Unimplemented;

function renderInvites(me: Identity) {
  const box = document.getElementById("invites")!;
  box.replaceChildren(
    ...[...received.values()].map((inv) => {
      const reason = h("select", { "data-testid": "decline-reason", "aria-label": t("invite.reason") }, ...REASONS.map((v) => h("option", { value: String(v) }, declineReasonText(v))));
      return h(
        "div",
        { class: "invite", "data-testid": "incoming-invitation", "data-invitation": inv.invitationId },
        h("a", { href: profileHref(inv.inviter?.id ?? ""), class: "player-link" }, playerName(inv.inviter)),
        h("span", {}, ` ${inv.rematchOf ? t("invite.offersRematch") : t("invite.invitesYou")}: ${rulesLabel(inv.rules)}, ${timeControlText(inv.timeControl)}`),
        h(
          "button",
          {
            "data-testid": "accept-invitation",
            onclick: async () => {
              try {
                const g = await retrying(() =>
                  matchmaking.accept({ id: inv.invitationId }, bearer(me)).catch((e) => {
                    if (noMatchmaking(e)) return games.acceptInvitation({ invitationId: inv.invitationId }, bearer(me));
                    throw e;
                  }),
                );
                received.delete(inv.invitationId);
                renderInvites(me);
                goToGame(g.gameId);
              } catch (e) {
                toast(describeError(e), "error");
              }
            },
          },
          t("common.accept"),
        ),
        reason,
        h(
          "button",
          {
            "data-testid": "decline-invitation",
            onclick: async () => {
              const r = Number(reason.value) as DeclineReason;
              try {
                await retrying(() =>
                  matchmaking.decline({ id: inv.invitationId, reason: r }, bearer(me)).catch((e) => {
                    if (noMatchmaking(e)) return games.declineInvitation({ invitationId: inv.invitationId, reason: r }, bearer(me));
                    throw e;
                  }),
                );
              } catch (e) {
                toast(describeError(e), "error");
              }
              received.delete(inv.invitationId);
              renderInvites(me);
            },
          },
          t("common.decline"),
        ),
      );
    }),
  );
}

/** Starts the one event stream of this page (idempotent); it reconnects by itself. */
export function startPlayerEvents(): void {
  if (started) return;
  started = true;
  // A new identity (signed in or out, here or in another tab): the stream is opened again with it.
  let abort = new AbortController();
  window.addEventListener("draughts:identity", () => {
    abort.abort();
    received.clear();
    document.getElementById("invites")!.replaceChildren();
  });
  void (async () => {
    let backoff = 500;
    for (;;) {
      if (abort.signal.aborted) abort = new AbortController();
      let me: Identity;
      try {
        me = await ensureIdentity();
      } catch {
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 5000);
        continue;
      }
      try {
        for await (const ev of games.watchPlayerEvents({}, { ...bearer(me), signal: abort.signal })) {
          connected = true;
          backoff = 500;
          const k = ev.kind;
          if (k.case === "invitation") {
            const inv = k.value;
            const toMe = inv.invitee?.id === me.id;
            if (toMe && inv.state === InvitationState.PENDING) received.set(inv.invitationId, inv);
            else received.delete(inv.invitationId);
            if (inv.state === InvitationState.ACCEPTED && awaiting.has(inv.invitationId)) goToGame(inv.gameId || inv.invitationId);
            if (inv.inviter?.id === me.id && awaiting.has(inv.invitationId) && inv.state === InvitationState.DECLINED) {
              awaiting.delete(inv.invitationId);
              toast(t("invite.declinedBy", { name: playerName(inv.invitee) }));
            }
            renderInvites(me);
            window.dispatchEvent(new CustomEvent<Invitation>("draughts:invitation", { detail: inv }));
          } else if (k.case === "gameStarted") {
            if (awaiting.has(k.value.gameId)) goToGame(k.value.gameId);
          }
        }
      } catch (e) {
        const code = ConnectError.from(e).code;
        if (code === Code.Unauthenticated) await identityRefused(me);
      }
      connected = false;
      if (abort.signal.aborted) continue;
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 5000);
    }
  })();
}
