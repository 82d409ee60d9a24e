// A challenge (#/invite/ID), by link or to a named player: its inviter waits here for the acceptance (or
// sees it declined, with the reason); the invited player, or anyone for a link, may accept.
import { Color } from "./gen/draughts/v1/common_pb.js";
import { InvitationState, type Invitation } from "./gen/draughts/v1/games_pb.js";
import { bearer, Code, ConnectError, describeError, ensureIdentity, games, matchmaking, playerName, retrying } from "./api.js";
import { h, toast } from "./dom.js";
import { t, tDynamic } from "./i18n.js";
import { declineReasonText } from "./events.js";
import { awaiting } from "./events.js";
import { rulesLabel } from "./variants.js";
import { timeControlText } from "./timecontrol.js";

export function invitePage(root: HTMLElement, id: string): () => void {
  const box = h("div", { class: "invite-page" }, t("invite.loading"));
  root.replaceChildren(box);
  let closed = false;
  let timer = 0;

  const describe = (inv: Invitation) =>
    h(
      "p",
      {},
      t("invite.terms", {
        name: playerName(inv.inviter),
        rules: rulesLabel(inv.rules),
        time: timeControlText(inv.timeControl),
        color: inv.inviterColor === Color.WHITE ? t("invite.asWhite") : inv.inviterColor === Color.BLACK ? t("invite.asBlack") : t("invite.colorRandom"),
        rated: inv.rated ? t("common.rated") : t("common.casual"),
      }),
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
      const why = inv.state === InvitationState.DECLINED && inv.declineReason ? ` (${declineReasonText(inv.declineReason)})` : "";
      box.replaceChildren(
        h("h2", {}, t("invite.challenge")),
        describe(inv),
        h("p", { "data-testid": "invitation-state", "data-state": InvitationState[inv.state].toLowerCase() }, t("invite.state", { state: tDynamic(`invite.states.${InvitationState[inv.state].toLowerCase()}`, InvitationState[inv.state].toLowerCase()), why })),
        h("a", { href: "#/" }, t("common.backToLobby")),
      );
      return;
    }
    if (inv.inviter?.id === me.id) {
      awaiting.add(id);
      const link = `${location.origin}/#/invite/${id}`;
      const named = inv.invitee?.id;
      box.replaceChildren(
        h("h2", {}, t("invite.yours")),
        describe(inv),
        named
          ? h("p", { "data-testid": "challenged" }, t("invite.asked", { name: playerName(inv.invitee), id: named }))
          : h("p", {}, t("invite.sendLink")),
        h("input", { readonly: true, value: link, class: "link", "data-testid": "challenge-url", onclick: (e: Event) => (e.target as HTMLInputElement).select() }),
        h("div", { class: "row" },
          h("button", { onclick: () => void navigator.clipboard?.writeText(link).then(() => toast(t("invite.linkCopied"))) }, t("invite.copyLink")),
          h("button", {
            "data-testid": "cancel-invitation",
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
          }, t("common.cancel")),
        ),
        h("p", { class: "waiting", "data-testid": "waiting" }, t("invite.waiting")),
      );
      // The player event stream brings the acceptance; a slow re-read covers a stream that was down.
      timer = window.setTimeout(() => void show().catch(() => {}), 15_000);
      return;
    }
    box.replaceChildren(
      h("h2", {}, t("invite.challenged")),
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
      }, t("invite.acceptPlay")),
      h("a", { href: "#/" }, t("invite.noThanks")),
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
