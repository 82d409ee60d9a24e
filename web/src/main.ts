// The reference web client: hash routes over the API's gRPC-Web endpoint on this page's own origin.
import "./style.css";
import { accountPage, settingsPage } from "./account.js";
import { analysisPage } from "./analysis.js";
import { currentIdentity, describeError, ensureIdentity, profileHref, signOut, takeNotice } from "./api.js";
import { h, toast } from "./dom.js";
import { startPlayerEvents } from "./events.js";
import { gamePage } from "./game.js";
import { invitePage } from "./invite.js";
import { leaderboardPage, profilePage } from "./profile.js";
import { lobbyPage } from "./lobby.js";
import { createTournamentPage, tournamentPage, tournamentsPage } from "./tournaments.js";
import { LANGUAGES, language, setLanguage, t, type Language } from "./i18n.js";

const root = document.getElementById("app")!;
const nav = document.getElementById("nav")!;
const noticeBox = document.getElementById("notice")!;
let cleanup: () => void = () => {};

function route() {
  cleanup();
  const [path] = location.hash.replace(/^#/, "").split("?");
  const parts = path.split("/").filter(Boolean).map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  if (parts[0] === "game" && parts[1]) cleanup = gamePage(root, parts[1]);
  else if (parts[0] === "invite" && parts[1]) cleanup = invitePage(root, parts[1]);
  else if (parts[0] === "analysis" && parts[1]) cleanup = analysisPage(root, parts[1]);
  else if (parts[0] === "profile" && parts[1]) cleanup = profilePage(root, parts[1]);
  else if (parts[0] === "leaderboard") cleanup = leaderboardPage(root, parts[1], parts[2]);
  else if (parts[0] === "signin" || parts[0] === "signup") cleanup = accountPage(root, parts[0]);
  else if (parts[0] === "settings") cleanup = settingsPage(root);
  else if (parts[0] === "tournaments" && parts[1] === "new") cleanup = createTournamentPage(root);
  else if (parts[0] === "tournaments") cleanup = tournamentsPage(root, parts[1]);
  else if (parts[0] === "tournament" && parts[1]) cleanup = tournamentPage(root, parts[1]);
  else cleanup = lobbyPage(root);
}

/** The header's links: the leaderboard, and sign in / sign up, or the account's profile, settings, sign out. */
function renderNav() {
  const id = currentIdentity();
  const here = encodeURIComponent(location.hash || "#/");
  const links: (HTMLElement | string)[] = [
    h("a", { href: "#/tournaments", "data-testid": "nav-tournaments" }, t("nav.tournaments")),
    h("a", { href: "#/leaderboard", "data-testid": "nav-leaderboard" }, t("nav.leaderboard")),
  ];
  if (id?.kind === "account") {
    links.push(
      h("a", { href: profileHref(id.id), "data-testid": "nav-profile", "data-player": id.id }, id.name),
      h("a", { href: "#/settings", "data-testid": "nav-settings" }, t("nav.settings")),
      h(
        "button",
        {
          class: "link",
          "data-testid": "nav-signout",
          onclick: async () => {
            try {
              await signOut();
              location.hash = "#/";
              toast(t("nav.signedOut"));
            } catch (e) {
              toast(describeError(e), "error");
            }
          },
        },
        t("nav.signOut"),
      ),
    );
  } else if (id?.kind === "player") {
    // A pasted token: no session to end on the server, only this browser's copy to forget.
    links.push(
      h("a", { href: profileHref(id.id), "data-testid": "nav-profile", "data-player": id.id }, id.name || id.id),
      h("button", { class: "link", "data-testid": "nav-signout", onclick: () => void signOut().then(() => (location.hash = "#/")) }, t("nav.signOut")),
    );
  } else {
    if (id) links.push(h("a", { href: profileHref(id.id), "data-testid": "nav-profile", "data-player": id.id }, t("nav.guestName", { name: id.name || t("nav.guest") })));
    links.push(
      h("a", { href: `#/signin?next=${here}`, "data-testid": "nav-signin" }, t("nav.signIn")),
      h("a", { href: `#/signup?next=${here}`, "data-testid": "nav-signup", class: "button primary" }, t("nav.signUp")),
    );
  }
  links.push(languagePicker());
  nav.replaceChildren(...links);
}

/** The language picker, in the header of every page. */
function languagePicker(): HTMLElement {
  const sel = h(
    "select",
    { "data-testid": "language", "aria-label": t("nav.language"), class: "lang" },
    ...LANGUAGES.map((l) => h("option", { value: l.code, lang: l.code, selected: l.code === language() }, l.name)),
  );
  sel.addEventListener("change", () => setLanguage(sel.value as Language));
  return sel;
}

/** The page's own texts outside the routes (the header's tag line, the document's title). */
function renderStatic() {
  const tag = document.querySelector("header .tag");
  if (tag) tag.textContent = t("nav.tagline");
  const brand = document.querySelector("header .brand");
  if (brand) brand.textContent = t("nav.title");
  document.title = t("nav.title");
}

/** A message about the session (e.g. it ended) that stays until dismissed. */
function showNotice() {
  const text = takeNotice();
  // Signed in again: the notice about the ended session is done with.
  if (!text && currentIdentity()?.kind === "account") noticeBox.replaceChildren();
  if (!text) return;
  noticeBox.replaceChildren(
    h("span", { "data-testid": "notice" }, text),
    h("a", { href: "#/signin", onclick: () => noticeBox.replaceChildren() }, t("nav.signIn")),
    h("button", { class: "link", onclick: () => noticeBox.replaceChildren() }, t("common.dismiss")),
  );
}

window.addEventListener("hashchange", () => {
  route();
  renderNav();
});
// Signed in or out (here, in another tab, or a session the server ended): every page starts again.
window.addEventListener("draughts:identity", () => {
  showNotice();
  renderNav();
  route();
  void ensureIdentity()
    .then(renderNav)
    .catch(() => {});
});
window.addEventListener("draughts:name", renderNav);
// Another language: the header and the page are drawn again in it.
window.addEventListener("draughts:lang", () => {
  renderStatic();
  renderNav();
  route();
});
renderStatic();
route();
renderNav();
// The event stream needs an identity (a CreateGuest on a first visit): let the first paint go first.
setTimeout(() => {
  startPlayerEvents();
  void ensureIdentity()
    .then(() => {
      renderNav();
      showNotice();
    })
    .catch(() => {});
}, 300);

// Installable, with an offline page: the service worker (public/sw.js) never touches API calls. Only in
// the built client (Vite's dev server reloads modules itself).
if (import.meta.env.PROD && "serviceWorker" in navigator) {
  window.addEventListener("load", () => {
    navigator.serviceWorker.register("/sw.js").catch(() => {});
  });
}
