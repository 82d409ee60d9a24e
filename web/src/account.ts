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

/** Where to go after signing in: the page that sent the player here (`?next=#/...`), else the lobby. */
function nextPage(): string {
  const n = hashQuery().get("next") ?? "";
  return n.startsWith("#/") && !/^#\/(signin|signup)/.test(n) ? n : "#/";
}

const SCOPES: [AuthScope, string][] = [
  [AuthScope.PLAY, "play"],
  [AuthScope.ANALYSIS, "analysis"],
];
const scopeText = (s: AuthScope[]) => s.map((x) => SCOPES.find(([v]) => v === x)?.[1] ?? AuthScope[x]?.toLowerCase() ?? String(x)).join(", ");

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
    const display = h("input", { maxlength: 32, placeholder: "empty: your username", value: me?.kind === "guest" ? (localStorage.getItem("draughts.name") ?? "") : "", "data-testid": "display-name" });
    const f = form("signup", [field("Username (3-20 letters, digits, _ or -)", username), field("Password (at least 8 characters)", password), field("Display name (optional)", display)], "Create account", async () => {
      const r = await signUp(username.value.trim(), password.value, display.value.trim());
      toast(r.adoptedGuestId ? `Welcome, ${r.id.name}: your games as a guest are now your account's` : `Welcome, ${r.id.name}`);
      location.hash = next;
    });
    body = [
      h("h2", {}, "Create an account"),
      h("p", { class: "hint" }, "An account keeps your games and ratings, works in every browser, and may ask for analysis of its games."),
      me?.kind === "guest" ? h("p", { "data-testid": "adopt-note" }, `You play as the guest ${me.name || me.id}: its games, games in progress and ratings move to the new account.`) : "",
      f.el,
      h("p", {}, "Have an account? ", h("a", { href: other, "data-testid": "to-signin" }, "Sign in")),
    ];
  } else {
    const f = form("signin", [field("Username", username), field("Password", password)], "Sign in", async () => {
      const id = await signIn(username.value.trim(), password.value);
      toast(`Signed in as ${id.name}`);
      location.hash = next;
    });
    const token = h("input", { placeholder: "player token or personal token (dp_…)", autocomplete: "off", "data-testid": "player-token" });
    body = [
      h("h2", {}, "Sign in"),
      me?.kind === "guest" ? h("p", { class: "hint" }, `You play as the guest ${me.name || me.id}; its games stay with the guest. To keep them, `, h("a", { href: other }, "create an account"), " instead.") : "",
      f.el,
      h("p", {}, "No account? ", h("a", { href: other, "data-testid": "to-signup" }, "Create one")),
      h(
        "details",
        { "data-testid": "token-sign-in" },
        h("summary", {}, "Advanced: sign in with a token"),
        h("p", { class: "hint" }, "A signed player token of the platform's identity provider, or a personal token of an account (for testing scripts' scopes)."),
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
            "Use this token",
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
  const box = h("div", { class: "account-page settings", "data-testid": "settings" }, "Loading…");
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
        h("h2", {}, "Settings"),
        h("p", {}, "Settings are for accounts. ", h("a", { href: "#/signup?next=%23%2Fsettings" }, "Create an account"), " or ", h("a", { href: "#/signin?next=%23%2Fsettings" }, "sign in"), "."),
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
    const nameForm = form("update-account", [field("Display name", name)], "Save", async () => {
      const a = await auth.updateAccount({ displayName: name.value.trim() }, bearer(me));
      setIdentity({ ...me, name: a.player?.displayName ?? me.name });
      me = currentIdentity() ?? me;
      window.dispatchEvent(new CustomEvent("draughts:name"));
      toast("Display name saved");
    });

    const current = h("input", { type: "password", autocomplete: "current-password", required: true, "data-testid": "current-password" });
    const fresh = h("input", { type: "password", autocomplete: "new-password", required: true, minlength: 8, maxlength: 128, "data-testid": "new-password" });
    const pwForm = form("change-password", [field("Current password", current), field("New password (at least 8 characters)", fresh)], "Change password", async () => {
      const s = await auth.changePassword({ currentPassword: current.value, newPassword: fresh.value }, bearer(me));
      replaceSession(s);
      toast("Password changed: your other sessions have ended");
    });

    const delPassword = h("input", { type: "password", autocomplete: "current-password", required: true, "data-testid": "delete-password" });
    const delSure = h("input", { type: "checkbox", required: true, "data-testid": "delete-confirm" });
    const delForm = form("delete-account", [h("label", {}, delSure, " I understand: my sign-in, sessions, tokens and personal data are removed; my finished games stay, shown as “Deleted player”."), field("Password, to confirm", delPassword)], "Delete my account", async () => {
      await auth.deleteAccount({ password: delPassword.value }, bearer(me));
      forgetAccount();
      location.hash = "#/";
      toast("Your account was deleted");
    });

    box.replaceChildren(
      h("h2", {}, "Settings"),
      h(
        "section",
        {},
        h("h3", {}, "Account"),
        h(
          "p",
          { "data-testid": "account-info" },
          "Username ",
          h("b", { "data-testid": "account-username" }, account.username),
          ` · id ${account.player?.id} · since ${dateText(account.createdAtMs)} · `,
          h("a", { href: profileHref(account.player?.id ?? "") }, "public profile"),
        ),
        account.adoptedGuestIds.length ? h("p", { class: "hint" }, `Guests that became this account: ${account.adoptedGuestIds.join(", ")}`) : "",
        nameForm.el,
      ),
      h("section", {}, h("h3", {}, "Password"), pwForm.el),
      tokensSection(me),
      exportSection(me),
      h("section", { class: "danger" }, h("h3", {}, "Delete the account"), delForm.el),
    );
  })();

  return () => {
    closed = true;
  };
}

/** Personal tokens: create (label, scopes, expiry; the token shown once), list with last use, revoke. */
function tokensSection(me: Identity): HTMLElement {
  const list = h("ul", { class: "tokens", "data-testid": "tokens" });
  const label = h("input", { required: true, maxlength: 40, placeholder: "e.g. my bot", "data-testid": "token-label" });
  const checks = SCOPES.map(([scope, text]) => ({ scope, box: h("input", { type: "checkbox", checked: scope === AuthScope.PLAY, "data-testid": `token-scope-${text}` }), text }));
  const expiry = h(
    "select",
    { "data-testid": "token-expiry" },
    ...[
      ["0", "never expires"],
      [String(30 * 86400), "30 days"],
      [String(365 * 86400), "1 year"],
    ].map(([v, t]) => h("option", { value: v }, t)),
  );
  const created = h("div", { class: "token-created", "data-testid": "token-created" });

  const row = (t: PersonalToken) =>
    h(
      "li",
      { "data-testid": "token", "data-token-id": t.tokenId },
      h("b", {}, t.label),
      ` · ${scopeText(t.scopes)} · created ${dateText(t.createdAtMs)} · ${t.expiresAtMs ? `expires ${dateText(t.expiresAtMs)}` : "never expires"} · `,
      h("span", { "data-testid": "token-last-used" }, t.lastUsedAtMs ? `last used ${dateText(t.lastUsedAtMs, true)}` : "never used"),
      " ",
      h(
        "button",
        {
          "data-testid": "revoke-token",
          onclick: async () => {
            try {
              await auth.revokePersonalToken({ tokenId: t.tokenId }, bearer(me));
              toast(`Token “${t.label}” revoked`);
              await load();
            } catch (e) {
              toast(describeError(e), "error");
            }
          },
        },
        "Revoke",
      ),
    );

  async function load() {
    try {
      const r = await retrying(() => auth.listPersonalTokens({}, bearer(me)));
      list.replaceChildren(...(r.tokens.length ? r.tokens.map(row) : [h("li", { class: "hint" }, "No personal tokens.")]));
      list.dataset.count = String(r.tokens.length);
    } catch (e) {
      list.replaceChildren(h("li", { class: "error" }, describeError(e)));
    }
  }

  const f = form(
    "create-token",
    [field("Label", label), h("div", { class: "row" }, "Scopes: ", ...checks.map((c) => h("label", { class: "inline" }, c.box, ` ${c.text}`)), expiry)],
    "Create token",
    async () => {
      const scopes = checks.filter((c) => c.box.checked).map((c) => c.scope);
      if (!scopes.length) throw new Error("pick at least one scope");
      const r = await auth.createPersonalToken({ label: label.value.trim(), scopes, expiresInSecs: BigInt(expiry.value) }, bearer(me));
      const shown = h("input", { readonly: true, class: "link", "data-testid": "new-token", onclick: (e: Event) => (e.target as HTMLInputElement).select() });
      shown.value = r.token;
      created.replaceChildren(
        h("p", {}, `Token “${r.info?.label}” (${scopeText(r.info?.scopes ?? [])}): copy it now, it is not shown again. Send it as `, h("code", {}, "authorization: Bearer <token>"), "."),
        h("div", { class: "row" }, shown, h("button", { type: "button", onclick: () => void navigator.clipboard?.writeText(r.token).then(() => toast("Token copied")) }, "Copy")),
      );
      label.value = "";
      await load();
    },
  );
  void load();
  return h("section", {}, h("h3", {}, "Personal tokens"), h("p", { class: "hint" }, "For your scripts and bots: they act as your account with the scopes you choose (at most 20)."), f.el, created, list);
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
          state.textContent = `${r.games} game(s) exported`;
          state.dataset.games = String(r.games);
        } catch (e) {
          state.textContent = describeError(e);
        } finally {
          button.disabled = false;
        }
      },
    },
    "Export my data (PDN)",
  );
  return h("section", {}, h("h3", {}, "Your data"), h("p", { class: "hint" }, "Every finished game of yours as one PDN file. Ratings are on your profile."), h("div", { class: "row" }, button, state));
}
