// A challenge (#/invite/ID), by link or to a named player: its inviter waits here for the acceptance (or
// sees it declined, with the reason); the invited player, or anyone for a link, may accept.
import { Color } from "./gen/draughts/v1/common_pb.js";
import { DeclineReason, InvitationState, type Invitation } from "./gen/draughts/v1/games_pb.js";
import { bearer, Code, ConnectError, describeError, ensureIdentity, games, matchmaking, playerName, retrying } from "./api.js";
import { h, toast } from "./dom.js";
import { awaiting } from "./events.js";
import { rulesLabel } from "./variants.js";
import { timeControlText } from "./timecontrol.js";

export function invitePage(root: HTMLElement, id: string): () => void {
  const box = h("div", { class: "invite-page" }, "Loading the invitation…");
  root.replaceChildren(box);
  let closed = false;
  let timer = 0;

  const describe = (inv: Invitation) =>
    h(
      "p",
      {},
      `${playerName(inv.inviter)} plays ${rulesLabel(inv.rules)}, ${timeControlText(inv.timeControl)}, `,
      inv.inviterColor === Color.WHITE ? "as White" : inv.inviterColor === Color.BLACK ? "as Black" : "colours drawn at random",
      inv.rated ? ", rated" : ", casual",
    );

  async function show() {
    const me = await ensureIdentity();
    const inv = await retrying(() => games.getInvitation({ invitationId: id }, bearer(me)));
    if (closed) return;
    if (inv.state === InvitationState.ACCEPTED) {
      location.hash = `#/game/${inv.gameId || id}`;
      return;
    }
    if (inv.state !== InvitationState.PENDING) {
      const why = inv.state === InvitationState.DECLINED && inv.declineReason ? ` (${DeclineReason[inv.declineReason].toLowerCase().replace(/_/g, " ")})` : "";
      box.replaceChildren(
        h("h2", {}, "Challenge"),
        describe(inv),
        h("p", { "data-testid": "invitation-state", "data-state": InvitationState[inv.state].toLowerCase() }, `This invitation is ${InvitationState[inv.state].toLowerCase()}${why}.`),
        h("a", { href: "#/" }, "Back to the lobby"),
      );
      return;
    }
    if (inv.inviter?.id === me.id) {
      awaiting.add(id);
      const link = `${location.origin}/#/invite/${id}`;
      const named = inv.invitee?.id;
      box.replaceChildren(
        h("h2", {}, "Your challenge"),
        describe(inv),
        named
          ? h("p", { "data-testid": "challenged" }, `${playerName(inv.invitee)} (${named}) is asked; the game starts when they accept.`)
          : h("p", {}, "Send this link to your opponent; the game starts when they accept:"),
        h("input", { readonly: true, value: link, class: "link", "data-testid": "challenge-url", onclick: (e: Event) => (e.target as HTMLInputElement).select() }),
        h("div", { class: "row" },
          h("button", { onclick: () => void navigator.clipboard?.writeText(link).then(() => toast("Link copied")) }, "Copy link"),
          h("button", {
            onclick: async () => {
              try {
                await retrying(() =>
                  matchmaking.cancel({ id }, bearer(me)).catch((e) => {
                    if (ConnectError.from(e).code === Code.Unimplemented) return games.cancelInvitation({ invitationId: id }, bearer(me));
                    throw e;
                  }),
                );
                awaiting.delete(id);
                location.hash = "#/";
              } catch (e) {
                toast(describeError(e), "error");
              }
            },
          }, "Cancel"),
        ),
        h("p", { class: "waiting", "data-testid": "waiting" }, "Waiting for an opponent…"),
      );
      // The player event stream brings the acceptance; a slow re-read covers a stream that was down.
      timer = window.setTimeout(() => void show().catch(() => {}), 15_000);
      return;
    }
    box.replaceChildren(
      h("h2", {}, "You are challenged"),
      describe(inv),
      h("button", {
        class: "primary",
        "data-testid": "accept",
        onclick: async () => {
          try {
            const g = await retrying(() =>
              matchmaking.accept({ id }, bearer(me)).catch((e) => {
                if (ConnectError.from(e).code === Code.Unimplemented) return games.acceptInvitation({ invitationId: id }, bearer(me));
                throw e;
              }),
            );
            location.hash = `#/game/${g.gameId}`;
          } catch (e) {
            toast(describeError(e), "error");
          }
        },
      }, "Accept and play"),
      h("a", { href: "#/" }, "No thanks"),
    );
  }

  // The player event stream reports this invitation's changes (accepted, declined, cancelled).
  const onEvent = (e: Event) => {
    const inv = (e as CustomEvent<Invitation>).detail;
    if (inv.invitationId !== id || inv.state === InvitationState.PENDING) return;
    clearTimeout(timer);
    show().catch((err) => (box.textContent = describeError(err)));
  };
  window.addEventListener("draughts:invitation", onEvent);
  show().catch((e) => (box.textContent = describeError(e)));
  return () => {
    closed = true;
    clearTimeout(timer);
    window.removeEventListener("draughts:invitation", onEvent);
  };
}
