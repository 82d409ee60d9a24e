// The signed-in player's events (Games.WatchPlayerEvents): invitations received (challenges, rematch
// offers) shown with Accept/Decline, and the invitations this browser waits on, followed into their game.
import { InvitationState, type Invitation } from "./gen/draughts/v1/games_pb.js";
import { bearer, Code, ConnectError, describeError, ensureIdentity, games, playerName, resetIdentity, retrying, setIdentity, sleep, type Identity } from "./api.js";
import { h, toast } from "./dom.js";
import { variantLabel } from "./variants.js";
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

function renderInvites(me: Identity) {
  const box = document.getElementById("invites")!;
  box.replaceChildren(
    ...[...received.values()].map((inv) =>
      h(
        "div",
        { class: "invite", "data-testid": "incoming-invitation", "data-invitation": inv.invitationId },
        h("span", {}, `${playerName(inv.inviter)} ${inv.rematchOf ? "offers a rematch" : "invites you"}: ${variantLabel(inv.rules?.variant)}, ${timeControlText(inv.timeControl)}`),
        h(
          "button",
          {
            "data-testid": "accept-invitation",
            onclick: async () => {
              try {
                const g = await retrying(() => games.acceptInvitation({ invitationId: inv.invitationId }, bearer(me)));
                received.delete(inv.invitationId);
                renderInvites(me);
                goToGame(g.gameId);
              } catch (e) {
                toast(describeError(e), "error");
              }
            },
          },
          "Accept",
        ),
        h(
          "button",
          {
            onclick: async () => {
              try {
                await retrying(() => games.declineInvitation({ invitationId: inv.invitationId }, bearer(me)));
              } catch (e) {
                toast(describeError(e), "error");
              }
              received.delete(inv.invitationId);
              renderInvites(me);
            },
          },
          "Decline",
        ),
      ),
    ),
  );
}

/** Starts the one event stream of this page (idempotent); it reconnects by itself. */
export function startPlayerEvents(): void {
  if (started) return;
  started = true;
  void (async () => {
    let backoff = 500;
    for (;;) {
      let me: Identity;
      try {
        me = await ensureIdentity();
      } catch {
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 5000);
        continue;
      }
      try {
        for await (const ev of games.watchPlayerEvents({}, bearer(me))) {
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
              toast(`${playerName(inv.invitee)} declined`);
            }
            renderInvites(me);
          } else if (k.case === "gameStarted") {
            if (awaiting.has(k.value.gameId)) goToGame(k.value.gameId);
          }
        }
      } catch (e) {
        const code = ConnectError.from(e).code;
        if (code === Code.Unauthenticated) {
          setIdentity(null);
          resetIdentity();
        }
      }
      connected = false;
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 5000);
    }
  })();
}
