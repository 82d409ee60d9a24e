// Accounts: sign up (a guest playing here becomes the account, with its games), sign in (or, as an
// advanced option, a pasted token), and the account's settings: display name, password, personal
// tokens, an export of everything the server keeps, and deleting the account.
import { AuthScope, type PersonalToken } from "./gen/draughts/v1/auth_pb.js";
import {
  auth,
  bearer,
  currentIdentity,
  describeError,
  ensureIdentity,
  forgetAccount,
  profileHref,
  replaceSession,
  retrying,
  setIdentity,
  signIn,
  signInWithPlayerToken,
  signUp,
  type Identity,
} from "./api.js";
import { dateText, h, hashQuery, toast } from "./dom.js";
import { t } from "./i18n.js";

/** Where to go after signing in: the page that sent the player here (`?next=#/...`), else the lobby. */
function nextPage(): string {
  const n = hashQuery().get("next") ?? "";
  return n.startsWith("#/") && !/^#\/(signin|signup)/.test(n) ? n : "#/";
}

const SCOPES: [AuthScope, string, () => string][] = [
  [AuthScope.PLAY, "play", () => t("account.scopePlay")],
  [AuthScope.ANALYSIS, "analysis", () => t("account.scopeAnalysis")],
];
const scopeText = (s: AuthScope[]) => s.map((x) => SCOPES.find(([v]) => v === x)?.[2]() ?? AuthScope[x]?.toLowerCase() ?? String(x)).join(", ");

/** A form whose submit button is disabled while `f` runs; errors go to its error line. */
function form(testid: string, fields: HTMLElement[], submit: string, f: () => Promise<void>): { el: HTMLFormElement; error: HTMLElement } {
  const error = h("div", { class: "error", "data-testid": `${testid}-error` });
  const button = h("button", { type: "submit", class: "primary", "data-testid": `${testid}-submit` }, submit);
  const el = h(
    "form",
    {
      class: "account-form",
      "data-testid": testid,
      onsubmit: async (e: Event) => {
        e.preventDefault();
        button.disabled = true;
        error.textContent = "";
        try {
          await f();
        } catch (err) {
          error.textContent = describeError(err);
        } finally {
          button.disabled = false;
        }
      },
    },
    ...fields,
    h("div", { class: "row" }, button),
    error,
  );
  return { el, error };
}

const field = (label: string, input: HTMLInputElement) => h("label", {}, label, h("br"), input);

/** #/signin and #/signup. */
export function accountPage(root: HTMLElement, mode: "signin" | "signup"): () => void {
  const me = currentIdentity();
  const next = nextPage();
  const username = h("input", { autocomplete: "username", required: true, minlength: 3, maxlength: 20, "data-testid": "username" });
  const password = h("input", { type: "password", autocomplete: mode === "signup" ? "new-password" : "current-password", required: true, minlength: mode === "signup" ? 8 : 1, maxlength: 128, "data-testid": "password" });
  const other = `${mode === "signup" ? "#/signin" : "#/signup"}?next=${encodeURIComponent(next)}`;
  let body: (HTMLElement | string)[];
  if (mode === "signup") {
    const display = h("input", { maxlength: 32, placeholder: t("account.displayNamePlaceholder"), value: me?.kind === "guest" ? (localStorage.getItem("draughts.name") ?? "") : "", "data-testid": "display-name" });
    const f = form("signup", [field(t("account.usernameRule"), username), field(t("account.passwordRule"), password), field(t("account.displayNameOptional"), display)], t("account.createAccount"), async () => {
      const r = await signUp(username.value.trim(), password.value, display.value.trim());
      toast(r.adoptedGuestId ? t("account.welcomeAdopted", { name: r.id.name }) : t("account.welcome", { name: r.id.name }));
      location.hash = next;
    });
    body = [
      h("h2", {}, t("account.createTitle")),
      h("p", { class: "hint" }, t("account.createHint")),
      me?.kind === "guest" ? h("p", { "data-testid": "adopt-note" }, t("account.adoptNote", { name: me.name || me.id })) : "",
      f.el,
      h("p", {}, t("account.haveAccount"), " ", h("a", { href: other, "data-testid": "to-signin" }, t("nav.signIn"))),
    ];
  } else {
    const f = form("signin", [field(t("account.username"), username), field(t("account.password"), password)], t("nav.signIn"), async () => {
      const id = await signIn(username.value.trim(), password.value);
      toast(t("account.signedInAs", { name: id.name }));
      location.hash = next;
    });
    const token = h("input", { placeholder: t("account.tokenPlaceholder"), autocomplete: "off", "data-testid": "player-token" });
    body = [
      h("h2", {}, t("nav.signIn")),
      me?.kind === "guest" ? h("p", { class: "hint" }, t("account.guestStays", { name: me.name || me.id }), " ", h("a", { href: other }, t("account.createInstead"))) : "",
      f.el,
      h("p", {}, t("account.noAccount"), " ", h("a", { href: other, "data-testid": "to-signup" }, t("account.createOne"))),
      h(
        "details",
        { "data-testid": "token-sign-in" },
        h("summary", {}, t("account.tokenSummary")),
        h("p", { class: "hint" }, t("account.tokenHint")),
        h(
          "div",
          { class: "row" },
          token,
          h(
            "button",
            {
              "data-testid": "sign-in",
              onclick: async () => {
                try {
                  await signInWithPlayerToken(token.value.trim());
                  location.hash = next;
                } catch (e) {
                  toast(describeError(e), "error");
                }
              },
            },
            t("account.useToken"),
          ),
        ),
      ),
    ];
  }
  root.replaceChildren(h("div", { class: "account-page" }, ...body));
  username.focus();
  return () => {};
}

/** #/settings: the signed-in account's settings. */
export function settingsPage(root: HTMLElement): () => void {
  let closed = false;
  const box = h("div", { class: "account-page settings", "data-testid": "settings" }, t("common.loading"));
  root.replaceChildren(box);

  void (async () => {
    let me: Identity;
    try {
      me = await ensureIdentity();
    } catch (e) {
      box.textContent = describeError(e);
      return;
    }
    if (closed) return;
    if (me.kind !== "account") {
      box.replaceChildren(
        h("h2", {}, t("nav.settings")),
        h("p", {}, t("account.settingsForAccounts"), " ", h("a", { href: "#/signup?next=%23%2Fsettings" }, t("account.createTitle")), " · ", h("a", { href: "#/signin?next=%23%2Fsettings" }, t("nav.signIn"))),
        exportSection(me),
      );
      return;
    }
    const account = await retrying(() => auth.getAccount({}, bearer(me))).catch((e) => {
      box.textContent = describeError(e);
      return null;
    });
    if (!account || closed) return;

    const name = h("input", { value: account.player?.displayName ?? "", maxlength: 32, required: true, "data-testid": "settings-display-name" });
    const nameForm = form("update-account", [field(t("account.displayName"), name)], t("common.save"), async () => {
      const a = await auth.updateAccount({ displayName: name.value.trim() }, bearer(me));
      setIdentity({ ...me, name: a.player?.displayName ?? me.name });
      me = currentIdentity() ?? me;
      window.dispatchEvent(new CustomEvent("draughts:name"));
      toast(t("account.nameSaved"));
    });

    const current = h("input", { type: "password", autocomplete: "current-password", required: true, "data-testid": "current-password" });
    const fresh = h("input", { type: "password", autocomplete: "new-password", required: true, minlength: 8, maxlength: 128, "data-testid": "new-password" });
    const pwForm = form("change-password", [field(t("account.currentPassword"), current), field(t("account.newPassword"), fresh)], t("account.changePassword"), async () => {
      const s = await auth.changePassword({ currentPassword: current.value, newPassword: fresh.value }, bearer(me));
      replaceSession(s);
      toast(t("account.passwordChanged"));
    });

    const delPassword = h("input", { type: "password", autocomplete: "current-password", required: true, "data-testid": "delete-password" });
    const delSure = h("input", { type: "checkbox", required: true, "data-testid": "delete-confirm" });
    const delForm = form("delete-account", [h("label", {}, delSure, " ", t("account.deleteUnderstand")), field(t("account.passwordConfirm"), delPassword)], t("account.deleteMine"), async () => {
      await auth.deleteAccount({ password: delPassword.value }, bearer(me));
      forgetAccount();
      location.hash = "#/";
      toast(t("account.deleted"));
    });

    box.replaceChildren(
      h("h2", {}, t("nav.settings")),
      h(
        "section",
        {},
        h("h3", {}, t("account.account")),
        h(
          "p",
          { "data-testid": "account-info" },
          t("account.username"),
          " ",
          h("b", { "data-testid": "account-username" }, account.username),
          ` · id ${account.player?.id} · ${t("account.since", { date: dateText(account.createdAtMs) })} · `,
          h("a", { href: profileHref(account.player?.id ?? "") }, t("account.publicProfile")),
        ),
        account.adoptedGuestIds.length ? h("p", { class: "hint" }, t("account.adoptedGuests", { ids: account.adoptedGuestIds.join(", ") })) : "",
        nameForm.el,
      ),
      h("section", {}, h("h3", {}, t("account.password")), pwForm.el),
      tokensSection(me),
      exportSection(me),
      h("section", { class: "danger" }, h("h3", {}, t("account.deleteTitle")), delForm.el),
    );
  })();

  return () => {
    closed = true;
  };
}

/** Personal tokens: create (label, scopes, expiry; the token shown once), list with last use, revoke. */
function tokensSection(me: Identity): HTMLElement {
  const list = h("ul", { class: "tokens", "data-testid": "tokens" });
  const label = h("input", { required: true, maxlength: 40, placeholder: t("account.tokenLabelPlaceholder"), "data-testid": "token-label" });
  const checks = SCOPES.map(([scope, key, text]) => ({ scope, box: h("input", { type: "checkbox", checked: scope === AuthScope.PLAY, "data-testid": `token-scope-${key}` }), text: text() }));
  const expiry = h(
    "select",
    { "data-testid": "token-expiry" },
    ...[
      ["0", t("account.neverExpires")],
      [String(30 * 86400), t("account.days30")],
      [String(365 * 86400), t("account.year1")],
    ].map(([v, text]) => h("option", { value: v }, text)),
  );
  const created = h("div", { class: "token-created", "data-testid": "token-created" });

  const row = (tok: PersonalToken) =>
    h(
      "li",
      { "data-testid": "token", "data-token-id": tok.tokenId },
      h("b", {}, tok.label),
      ` · ${scopeText(tok.scopes)} · ${t("account.created", { date: dateText(tok.createdAtMs) })} · ${tok.expiresAtMs ? t("account.expires", { date: dateText(tok.expiresAtMs) }) : t("account.neverExpires")} · `,
      h("span", { "data-testid": "token-last-used" }, tok.lastUsedAtMs ? t("account.lastUsed", { date: dateText(tok.lastUsedAtMs, true) }) : t("account.neverUsed")),
      " ",
      h(
        "button",
        {
          "data-testid": "revoke-token",
          onclick: async () => {
            try {
              await auth.revokePersonalToken({ tokenId: tok.tokenId }, bearer(me));
              toast(t("account.tokenRevoked", { label: tok.label }));
              await load();
            } catch (e) {
              toast(describeError(e), "error");
            }
          },
        },
        t("account.revoke"),
      ),
    );

  async function load() {
    try {
      const r = await retrying(() => auth.listPersonalTokens({}, bearer(me)));
      list.replaceChildren(...(r.tokens.length ? r.tokens.map(row) : [h("li", { class: "hint" }, t("account.noTokens"))]));
      list.dataset.count = String(r.tokens.length);
    } catch (e) {
      list.replaceChildren(h("li", { class: "error" }, describeError(e)));
    }
  }

  const f = form(
    "create-token",
    [field(t("account.label"), label), h("div", { class: "row" }, t("account.scopes"), " ", ...checks.map((c) => h("label", { class: "inline" }, c.box, ` ${c.text}`)), expiry)],
    t("account.createToken"),
    async () => {
      const scopes = checks.filter((c) => c.box.checked).map((c) => c.scope);
      if (!scopes.length) throw new Error(t("account.pickScope"));
      const r = await auth.createPersonalToken({ label: label.value.trim(), scopes, expiresInSecs: BigInt(expiry.value) }, bearer(me));
      const shown = h("input", { readonly: true, class: "link", "data-testid": "new-token", onclick: (e: Event) => (e.target as HTMLInputElement).select() });
      shown.value = r.token;
      created.replaceChildren(
        h("p", {}, t("account.tokenShownOnce", { label: r.info?.label ?? "", scopes: scopeText(r.info?.scopes ?? []) }), " ", h("code", {}, "authorization: Bearer <token>")),
        h("div", { class: "row" }, shown, h("button", { type: "button", onclick: () => void navigator.clipboard?.writeText(r.token).then(() => toast(t("account.tokenCopied"))) }, t("common.copy"))),
      );
      label.value = "";
      await load();
    },
  );
  void load();
  return h("section", {}, h("h3", {}, t("account.tokensTitle")), h("p", { class: "hint" }, t("account.tokensHint")), f.el, created, list);
}

/** Everything the server keeps about the caller, downloaded as PDN. */
function exportSection(me: Identity): HTMLElement {
  const state = h("span", { "data-testid": "export-state" });
  const button = h(
    "button",
    {
      "data-testid": "export",
      onclick: async () => {
        button.disabled = true;
        try {
          const r = await retrying(() => auth.exportAccountData({}, bearer(me)));
          const who = r.account?.username || r.player?.id || "player";
          const a = h("a", { href: URL.createObjectURL(new Blob([r.pdn], { type: "application/x-draughts-pdn" })), download: `draughts-${who.replace(/[^\w.-]/g, "_")}.pdn` });
          document.body.append(a);
          a.click();
          a.remove();
          setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
          state.textContent = t("account.exported", { count: Number(r.games) });
          state.dataset.games = String(r.games);
        } catch (e) {
          state.textContent = describeError(e);
        } finally {
          button.disabled = false;
        }
      },
    },
    t("account.export"),
  );
  return h("section", {}, h("h3", {}, t("account.yourData")), h("p", { class: "hint" }, t("account.exportHint")), h("div", { class: "row" }, button, state));
}
