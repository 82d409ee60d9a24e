// The API clients (generated from proto/ by protoc-gen-es; gRPC-Web transport of connect-web), the
// browser's identities (a guest token, an account's session, or a pasted token) and one retry rule.
//
// An account's session is a short-lived access token and a single-use refresh token (Auth.SignUp,
// SignIn, RefreshSession). The session is kept in localStorage and IndexedDB (it lives across reloads
// and is shared by the tabs of this browser); the access token is refreshed shortly before it expires,
// and once more when a call is refused as UNAUTHENTICATED. A refresh token works only once: one refresh
// at a time, across tabs too (navigator.locks, or a lease in localStorage where that is missing), and the
// session is read again once the lock is held (another tab may have refreshed meanwhile). A refresh the
// server refuses (the token reused or revoked) ends the session: the browser becomes a guest again and
// says so.
import { Code, ConnectError, createClient, type CallOptions, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { Auth, AuthScope, type Session } from "./gen/draughts/v1/auth_pb.js";
import { Games } from "./gen/draughts/v1/games_pb.js";
import { Rules } from "./gen/draughts/v1/rules_pb.js";
import { Analysis } from "./gen/draughts/v1/analysis_pb.js";
import { Matchmaking } from "./gen/draughts/v1/matchmaking_pb.js";
import { Ratings } from "./gen/draughts/v1/ratings_pb.js";
import { Tournaments } from "./gen/draughts/v1/tournaments_pb.js";
import type { ErrorReason, Player } from "./gen/draughts/v1/common_pb.js";
import { t } from "./i18n.js";

// Same origin as the page: draughtsd serves both, so no CORS is involved.
// The last calls and whether they were answered (for a look from the browser's console or a test).
const calls: { method: string; at: number; ms?: number; error?: string }[] = [];
(window as unknown as { __draughtsCalls: typeof calls }).__draughtsCalls = calls;
const recordCalls: Interceptor = (next) => async (req) => {
  const c: (typeof calls)[number] = { method: req.method.name, at: Math.round(performance.now()) };
  calls.push(c);
  if (calls.length > 40) calls.shift();
  try {
    return await next(req);
  } catch (e) {
    c.error = ConnectError.from(e).rawMessage;
    throw e;
  } finally {
    c.ms = Math.round(performance.now()) - c.at;
  }
};

/** Access tokens of this browser's account sessions: a call carrying one gets the session's current one. */
const accessTokens = new Set<string>();

/**
 * Calls made with an account's access token: the token is swapped for the session's current one
 * (refreshed first when it is about to expire), and a unary call refused as UNAUTHENTICATED is sent
 * once more after a refresh.
 */
const sessionAuth: Interceptor = (next) => async (req) => {
  const auth = req.header.get("authorization") ?? "";
  const token = auth.startsWith("Bearer ") ? auth.slice(7) : "";
  if (!token || !accessTokens.has(token)) return next(req);
  let s = await freshSession();
  if (!s) throw new ConnectError(t("session.signInAgain"), Code.Unauthenticated);
  req.header.set("authorization", `Bearer ${s.accessToken}`);
  try {
    return await next(req);
  } catch (e) {
    const err = ConnectError.from(e);
    if (err.code !== Code.Unauthenticated || req.stream) throw e;
    s = await refreshSession(s.accessToken);
    if (!s) throw e;
    req.header.set("authorization", `Bearer ${s.accessToken}`);
    return await next(req);
  }
};
const transport = createGrpcWebTransport({ baseUrl: location.origin, interceptors: [sessionAuth, recordCalls] });

export const auth: Client<typeof Auth> = createClient(Auth, transport);
export const games: Client<typeof Games> = createClient(Games, transport);
export const rules: Client<typeof Rules> = createClient(Rules, transport);
export const analysis: Client<typeof Analysis> = createClient(Analysis, transport);
export const matchmaking: Client<typeof Matchmaking> = createClient(Matchmaking, transport);
export const ratings: Client<typeof Ratings> = createClient(Ratings, transport);
export const tournaments: Client<typeof Tournaments> = createClient(Tournaments, transport);

/** A credential this browser holds. */
export interface Identity {
  token: string;
  id: string;
  name: string;
  /**
   * Guest tokens come from Auth.CreateGuest; accounts sign in with a username and password (the token
   * is the session's access token); player tokens are pasted (an identity provider's, or an account's
   * personal token).
   */
  kind: "guest" | "account" | "player";
  expiresAtMs: number;
  /** The account's username (accounts only). */
  username?: string;
  /** What the server lets it do (WhoAmI's scopes), once checked. */
  scopes?: AuthScope[];
}

/** An account's session as this browser keeps it. */
interface StoredSession {
  accessToken: string;
  accessExpiresAtMs: number;
  refreshToken: string;
  refreshExpiresAtMs: number;
  /** When this browser wrote it (the newest copy wins; see writeSession). */
  savedAtMs?: number;
  /** When this browser got the access token (its lifetime decides how early it is refreshed). */
  obtainedAtMs: number;
  id: string;
  name: string;
  username: string;
  scopes?: AuthScope[];
}

const KEY = "draughts.identity";
const SESSION = "draughts.session";
/** When the session was last ended in this browser (so that an older copy of it is not used again). */
const SIGNED_OUT = "draughts.signed-out";
const HOTSEAT = "draughts.hotseat.";
const LOCK = "draughts.refresh-lock";
/** Refresh this long before the access token expires (a third of its lifetime when that is shorter). */
const MARGIN_MS = 60_000;
const margin = (s: StoredSession) => Math.min(MARGIN_MS, Math.max((s.accessExpiresAtMs - (s.obtainedAtMs || 0)) / 3, 1_000));

function load(key: string): Identity | null {
  try {
    const raw = localStorage.getItem(key);
    if (!raw) return null;
    const id = JSON.parse(raw) as Identity;
    if (id.expiresAtMs && id.expiresAtMs < Date.now() + 60_000) return null;
    return id;
  } catch {
    return null;
  }
}

function readSession(): StoredSession | null {
  try {
    const raw = localStorage.getItem(SESSION);
    if (!raw) return null;
    const s = JSON.parse(raw) as StoredSession;
    if (!s.refreshToken || (s.refreshExpiresAtMs && s.refreshExpiresAtMs < Date.now())) return null;
    accessTokens.add(s.accessToken);
    return s;
  } catch {
    return null;
  }
}

/** The account this tab last saw in storage ("" for none). */
let seenAccount = "";

/**
 * Keeps the session: in localStorage (read synchronously by every call) and in IndexedDB, the copy the
 * refresh trusts. localStorage is not kept consistent between a browser's processes at once: a tab in
 * another process may read the old refresh token for a moment after this one wrote the new one, and
 * using that old token would end the session. IndexedDB's transactions are committed in one place, so
 * a tab that takes the refresh lock after this one let go of it reads what this one wrote.
 */
function writeSession(s: StoredSession | null): Promise<void> {
  seenAccount = s?.id ?? "";
  const at = Date.now();
  if (s) {
    s = { ...s, savedAtMs: at };
    accessTokens.add(s.accessToken);
    localStorage.setItem(SESSION, JSON.stringify(s));
  } else {
    localStorage.removeItem(SESSION);
    localStorage.setItem(SIGNED_OUT, String(at));
  }
  scheduleRefresh();
  return idbPut(SESSION, { at, session: s }).catch(() => {});
}

/**
 * The session as last written by any tab: the newer of IndexedDB's copy and this tab's localStorage
 * (which may lag behind another process's write, or be ahead of a write to IndexedDB that a closed page
 * did not finish).
 */
async function latestSession(): Promise<StoredSession | null> {
  const kept = await idbGet<{ at: number; session: StoredSession | null }>(SESSION).catch(() => undefined);
  let local: StoredSession | null = null;
  try {
    local = JSON.parse(localStorage.getItem(SESSION) ?? "null") as StoredSession | null;
  } catch {
    local = null;
  }
  const localAt = local?.savedAtMs ?? Number(localStorage.getItem(SIGNED_OUT) ?? 0);
  if (kept && kept.at > localAt) {
    // This tab's localStorage lags behind: bring it up to date.
    if (kept.session) localStorage.setItem(SESSION, JSON.stringify(kept.session));
    else {
      localStorage.removeItem(SESSION);
      localStorage.setItem(SIGNED_OUT, String(kept.at));
    }
  }
  return readSession();
}

let db: Promise<IDBDatabase> | null = null;
function idb(): Promise<IDBDatabase> {
  if (!db) {
    db = new Promise((resolve, reject) => {
      const open = indexedDB.open("draughts", 1);
      open.onupgradeneeded = () => open.result.createObjectStore("kv");
      open.onsuccess = () => resolve(open.result);
      open.onerror = () => reject(open.error);
    });
    db.catch(() => (db = null));
  }
  return db;
}

async function idbGet<T>(key: string): Promise<T | undefined> {
  const d = await idb();
  return new Promise((resolve, reject) => {
    const r = d.transaction("kv", "readonly").objectStore("kv").get(key);
    r.onsuccess = () => resolve(r.result as T | undefined);
    r.onerror = () => reject(r.error);
  });
}

async function idbPut(key: string, value: unknown): Promise<void> {
  const d = await idb();
  return new Promise((resolve, reject) => {
    const tx = d.transaction("kv", "readwrite");
    tx.objectStore("kv").put(value, key);
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error);
  });
}

function stored(s: Session, scopes?: AuthScope[]): StoredSession {
  // The expiry on this browser's clock: the token's lifetime (its `exp` less its `iat`) from now, so
  // that a clock set wrong does not make every token look expired, or never expiring.
  const claims = jwtClaims(s.accessToken);
  const lifetime = claims.exp && claims.iat ? (claims.exp - claims.iat) * 1000 : Number(s.accessExpiresAtMs) - Date.now();
  return {
    accessToken: s.accessToken,
    accessExpiresAtMs: Date.now() + lifetime,
    refreshToken: s.refreshToken,
    refreshExpiresAtMs: Number(s.refreshExpiresAtMs),
    obtainedAtMs: Date.now(),
    id: s.player?.id ?? "",
    name: s.player?.displayName ?? s.username,
    username: s.username,
    scopes,
  };
}

function accountIdentity(s: StoredSession): Identity {
  return { token: s.accessToken, id: s.id, name: s.name, kind: "account", expiresAtMs: s.accessExpiresAtMs, username: s.username, scopes: s.scopes };
}

/** This browser's identity: the account signed in, else the guest or pasted token (null: none yet). */
export function currentIdentity(): Identity | null {
  const s = readSession();
  return s ? accountIdentity(s) : load(KEY);
}

/** Keeps a guest or pasted-token identity (an account's session is kept by the sign-in calls). */
export function setIdentity(id: Identity | null): void {
  if (id?.kind === "account") {
    const s = readSession();
    if (s && s.id === id.id) writeSession({ ...s, name: id.name, scopes: id.scopes ?? s.scopes });
    return;
  }
  if (id) localStorage.setItem(KEY, JSON.stringify(id));
  else localStorage.removeItem(KEY);
}

export function bearer(id: Identity | null): CallOptions {
  return id ? { headers: { authorization: `Bearer ${id.token}` } } : {};
}

/** Milliseconds to wait before retrying a call refused for its rate limit (from `retry-after`). */
function retryAfterMs(err: ConnectError): number {
  const s = Number(err.metadata.get("retry-after") ?? "1");
  return Math.min(Math.max(Number.isFinite(s) ? s : 1, 1), 60) * 1000;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Runs a call, waiting out RESOURCE_EXHAUSTED (the server's `retry-after`) up to three times. */
export async function retrying<T>(f: () => Promise<T>, onWait?: (ms: number) => void): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await f();
    } catch (e) {
      const err = ConnectError.from(e);
      if (err.code !== Code.ResourceExhausted || attempt >= 3) throw err;
      const ms = retryAfterMs(err);
      onWait?.(ms);
      await sleep(ms);
    }
  }
}

/** Makes a new guest (anonymous call) and returns its identity. */
export async function newGuest(displayName: string): Promise<Identity> {
  const r = await retrying(() => auth.createGuest({ displayName }));
  return {
    token: r.token,
    id: r.player?.id ?? "",
    name: r.player?.displayName ?? "",
    kind: "guest",
    expiresAtMs: Number(r.expiresAtMs),
    scopes: [AuthScope.PLAY],
  };
}

let pending: Promise<Identity> | null = null;
/** Whether ensureIdentity is deciding the identity now (it then makes the guest itself). */
let checking = false;

/** This browser's identity, checked with WhoAmI once per page load; a new guest when it has none. */
export function ensureIdentity(): Promise<Identity> {
  if (pending) return pending;
  checking = true;
  const gen = generation;
  pending = (async () => {
    const have = readSession() ? await freshSession().then((s) => (s ? accountIdentity(s) : null)) : currentIdentity();
    if (have) {
      try {
        const who = await retrying(() => auth.whoAmI({}, bearer(have)));
        const checked = { ...have, id: who.player?.id ?? have.id, name: who.player?.displayName ?? have.name, scopes: who.scopes };
        // Signed in or out meanwhile (e.g. on the sign-in page before this first check ended): that wins.
        const now = gen !== generation ? currentIdentity() : null;
        if (now) return now;
        setIdentity(checked);
        return checked.kind === "account" ? (currentIdentity() ?? checked) : checked;
      } catch (e) {
        // A token the server no longer accepts (expired, another secret after a restart): start again.
        if (ConnectError.from(e).code !== Code.Unauthenticated) throw e;
        if (have.kind === "account" && readSession()) endSession(t("session.endedSignIn"));
      }
    }
    const guest = await newGuest(localStorage.getItem("draughts.name") ?? "");
    const now = gen !== generation ? currentIdentity() : null;
    if (now) return now;
    setIdentity(guest);
    return guest;
  })().finally(() => (checking = false));
  pending.catch(() => (pending = null));
  return pending;
}

/** Forgets the checked identity (after UNAUTHENTICATED): the next ensureIdentity makes or checks one. */
export function resetIdentity(): void {
  pending = null;
}

/**
 * A call was refused as UNAUTHENTICATED with this identity: an account tries a refresh (and ends its
 * session when that is refused); a guest or pasted token is dropped. The next ensureIdentity decides.
 */
export async function identityRefused(id: Identity): Promise<void> {
  if (id.kind === "account") {
    const s = readSession();
    if (s && s.id === id.id && (await refreshSession(s.accessToken).catch(() => s))) return;
  } else {
    const now = load(KEY);
    if (now && now.token === id.token) setIdentity(null);
  }
  resetIdentity();
}

/** Counts the identity's changes: an identity check that began before one does not overwrite it. */
let generation = 0;

/** Tells the page that the identity changed (sign-in, sign-out, a session ended, another tab). */
function identityChanged(): void {
  generation++;
  window.dispatchEvent(new CustomEvent("draughts:identity"));
}

/** Ends this browser's session without asking the server (it refused the session), with a notice. */
function endSession(message: string): void {
  writeSession(null);
  if (!checking) resetIdentity();
  notice = message;
  identityChanged();
}

let notice = "";
/** A message about the session to show once (e.g. "your session has ended"), then forgotten. */
export function takeNotice(): string {
  const n = notice;
  notice = "";
  return n;
}

// --- the refresh: one at a time, across tabs ------------------------------------------------------

/** Runs `f` holding the browser-wide refresh lock (navigator.locks, else a lease in localStorage). */
async function withRefreshLock<T>(f: () => Promise<T>): Promise<T> {
  if (navigator.locks?.request) return navigator.locks.request(LOCK, { mode: "exclusive" }, f) as Promise<T>;
  const me = Math.random().toString(36).slice(2);
  const lease = () => {
    try {
      return JSON.parse(localStorage.getItem(LOCK) ?? "null") as { owner: string; until: number } | null;
    } catch {
      return null;
    }
  };
  for (let i = 0; i < 200; i++) {
    const l = lease();
    if (!l || l.until < Date.now()) {
      localStorage.setItem(LOCK, JSON.stringify({ owner: me, until: Date.now() + 10_000 }));
      await sleep(40);
      if (lease()?.owner === me) {
        try {
          return await f();
        } finally {
          if (lease()?.owner === me) localStorage.removeItem(LOCK);
        }
      }
    }
    await sleep(50 + Math.random() * 50);
  }
  return f();
}

let inflight: Promise<StoredSession | null> | null = null;
/** RefreshSession calls this page made (for a look from a test: one refresh across tabs). */
const refreshes = { count: 0 };
Object.defineProperty(window, "__draughtsRefreshes", { get: () => refreshes.count });

/**
 * Trades the stored refresh token for a new session, unless the stored session is already fresh and is
 * not the one whose access token `failed` (then another tab or call refreshed it meanwhile; `early`: the
 * timer's refresh, a little before the calls would need it). Null when
 * the server refused the refresh (the session has ended) or there is no session.
 */
export function refreshSession(failed?: string, early = false): Promise<StoredSession | null> {
  if (inflight) return inflight;
  inflight = withRefreshLock(async () => {
    const s = await latestSession();
    if (!s) {
      // Another tab signed out (or the session lapsed) and this tab's localStorage has yet to show it.
      if (readSession()) endSession(t("session.ended"));
      return null;
    }
    if (s.accessToken !== failed && s.accessExpiresAtMs > Date.now() + margin(s) * (early ? 1.2 : 0.5)) return s;
    try {
      refreshes.count++;
      const r = await auth.refreshSession({ refreshToken: s.refreshToken });
      const next = { ...stored(r, s.scopes) };
      // Written (committed) before the lock is let go: the next holder reads this refresh token.
      await writeSession(next);
      return next;
    } catch (e) {
      const err = ConnectError.from(e);
      if (err.code !== Code.Unauthenticated && err.code !== Code.InvalidArgument) throw err;
      // Refused (reused, revoked or expired): the session is over, unless another tab replaced it.
      const now = await latestSession();
      if (!now || now.refreshToken === s.refreshToken) {
        endSession(t("session.endedWhy", { why: err.rawMessage || t("session.refused") }));
        return null;
      }
      return now;
    }
  }).finally(() => (inflight = null));
  return inflight;
}

/** The stored session with an access token good for at least a little while (refreshed if needed). */
async function freshSession(): Promise<StoredSession | null> {
  const s = readSession();
  if (!s) return null;
  if (s.accessExpiresAtMs > Date.now() + margin(s) / 2) return s;
  return refreshSession();
}

let refreshTimer = 0;
/** Refreshes the access token shortly before it expires (every tab schedules; the lock lets one do it). */
function scheduleRefresh(): void {
  clearTimeout(refreshTimer);
  const s = readSession();
  if (!s) return;
  const m = margin(s);
  const wait = Math.max(s.accessExpiresAtMs - Date.now() - m + Math.random() * (m / 10), 1_000);
  refreshTimer = window.setTimeout(() => {
    refreshSession(undefined, true).catch(() => {}).finally(scheduleRefresh);
  }, wait);
}
seenAccount = readSession()?.id ?? "";
scheduleRefresh();

// Another tab signed in, out, or refreshed: follow it (a refresh of the same account changes nothing here).
window.addEventListener("storage", (e) => {
  if (e.key !== SESSION && e.key !== null) return;
  scheduleRefresh();
  const now = readSession()?.id ?? "";
  if (now !== seenAccount) {
    seenAccount = now;
    resetIdentity();
    identityChanged();
  }
});

// --- signing in and out -----------------------------------------------------------------------------

/** Starts using an account's session (after SignUp, SignIn or ChangePassword). */
function useSession(s: Session): Identity {
  const st = stored(s, [AuthScope.PLAY, AuthScope.ANALYSIS]);
  writeSession(st);
  // A guest that signed up became the account (its token stops working); one that signed in is left.
  if (s.adoptedGuestId) setIdentity(null);
  const id = accountIdentity(st);
  pending = Promise.resolve(id);
  identityChanged();
  return id;
}

let adoptedAt = 0;

/** When this page's sign-up adopted a guest (the server moves its finished games within seconds). */
export function adoptedRecently(): boolean {
  return Date.now() - adoptedAt < 15_000;
}

/** Registers an account; a guest playing in this browser becomes the account (its games move along). */
export async function signUp(username: string, password: string, displayName: string): Promise<{ id: Identity; adoptedGuestId: string }> {
  const cur = currentIdentity();
  const s = await auth.signUp({ username, password, displayName }, cur?.kind === "guest" ? bearer(cur) : {});
  if (s.adoptedGuestId) adoptedAt = Date.now();
  return { id: useSession(s), adoptedGuestId: s.adoptedGuestId };
}

export async function signIn(username: string, password: string): Promise<Identity> {
  return useSession(await auth.signIn({ username, password }));
}

/** A new session after a password change (the server ended every other one). */
export function replaceSession(s: Session): Identity {
  return useSession(s);
}

/** Ends the session (server and browser) and goes back to a new guest. */
export async function signOut(): Promise<void> {
  const s = readSession();
  if (s) await auth.signOut({ refreshToken: s.refreshToken }).catch(() => {});
  forgetAccount();
}

/** Forgets the account in this browser (signed out, or deleted): the next identity is a new guest. */
export function forgetAccount(): void {
  writeSession(null);
  setIdentity(null);
  resetIdentity();
  identityChanged();
}

/** Signs in with a pasted token: an identity provider's player token, or an account's personal token. */
export async function signInWithPlayerToken(token: string): Promise<Identity> {
  const who = await auth.whoAmI({}, { headers: { authorization: `Bearer ${token}` } });
  const exp = jwtExpiry(token);
  const id: Identity = {
    token,
    id: who.player?.id ?? "",
    name: who.player?.displayName ?? "",
    kind: who.player?.guest ? "guest" : "player",
    expiresAtMs: exp,
    scopes: who.scopes,
  };
  writeSession(null);
  setIdentity(id);
  pending = Promise.resolve(id);
  identityChanged();
  return id;
}

function jwtClaims(token: string): { exp?: number; iat?: number } {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(part)) as { exp?: number; iat?: number };
  } catch {
    return {};
  }
}

function jwtExpiry(token: string): number {
  const exp = jwtClaims(token).exp;
  return exp ? exp * 1000 : 0;
}

/** Whether this identity may ask for analysis (the `analysis` scope). */
export function canAnalyse(id: Identity | null): boolean {
  if (!id) return false;
  if (id.scopes) return id.scopes.includes(AuthScope.ANALYSIS);
  return id.kind !== "guest";
}

/** The second player's identity of a hot-seat game (kept in this browser only). */
export function hotseatIdentity(gameId: string): Identity | null {
  return load(HOTSEAT + gameId);
}

export function setHotseatIdentity(gameId: string, id: Identity): void {
  localStorage.setItem(HOTSEAT + gameId, JSON.stringify(id));
}

/** The trailer naming a refusal's `ErrorReason` (common.proto), e.g. "ERROR_REASON_NOT_YOUR_TURN". */
const REASON_TRAILER = "draughts-reason";
/** Refusals the server names, in the client's own texts. */
const REASONS: Partial<Record<keyof typeof ErrorReason, ErrorKey>> = {
  NOT_YOUR_TURN: "errors.notYourTurn",
  GAME_OVER: "errors.gameOver",
  ENDED_ON_TIME: "errors.endedOnTime",
  STALE_PLY: "errors.stale",
  DRAW_ALREADY_OFFERED: "errors.drawAlreadyOffered",
  INVITATION_EXPIRED: "errors.invitationExpired",
  INVITATION_CANCELLED: "errors.invitationCancelled",
  INVITATION_DECLINED: "errors.invitationDeclined",
  INVITE_SELF: "errors.inviteSelf",
  NOT_A_PLAYER: "errors.notAPlayer",
  NO_SUCH_GAME: "errors.noGame",
  NO_SUCH_TOURNAMENT: "errors.noTournament",
  TOURNAMENT_OVER: "errors.tournamentOver",
  TOURNAMENT_PASSWORD: "errors.tournamentPassword",
  TOURNAMENT_ACCOUNTS_ONLY: "errors.tournamentAccountsOnly",
  TOURNAMENT_RATING_RANGE: "errors.tournamentRatingRange",
  TOURNAMENT_FULL: "errors.tournamentFull",
  NOT_AN_ENTRANT: "errors.notAnEntrant",
  TOURNAMENT_STARTED: "errors.tournamentStarted",
  NOT_THE_CREATOR: "errors.notTheCreator",
  BAD_CREDENTIALS: "errors.badCredentials",
  USERNAME_TAKEN: "errors.usernameTaken",
  TOO_MANY_ATTEMPTS: "errors.tooManyAttempts",
  RATE_LIMITED: "errors.rateLimited",
  CREDENTIALS_EXPIRED: "errors.credentialsExpired",
  SESSION_ENDED: "errors.sessionEnded",
};
/** Status codes the client words whatever the message. */
const BY_CODE: Partial<Record<Code, ErrorKey>> = {
  [Code.Aborted]: "errors.conflict",
  [Code.Unavailable]: "errors.unavailable",
  [Code.DeadlineExceeded]: "errors.timeout",
  [Code.Internal]: "errors.internal",
};
type ErrorKey =
  | "errors.notYourTurn"
  | "errors.gameOver"
  | "errors.endedOnTime"
  | "errors.stale"
  | "errors.drawAlreadyOffered"
  | "errors.invitationExpired"
  | "errors.invitationCancelled"
  | "errors.invitationDeclined"
  | "errors.inviteSelf"
  | "errors.notAPlayer"
  | "errors.conflict"
  | "errors.noGame"
  | "errors.noTournament"
  | "errors.tournamentOver"
  | "errors.tournamentPassword"
  | "errors.tournamentAccountsOnly"
  | "errors.tournamentRatingRange"
  | "errors.tournamentFull"
  | "errors.notAnEntrant"
  | "errors.tournamentStarted"
  | "errors.notTheCreator"
  | "errors.badCredentials"
  | "errors.usernameTaken"
  | "errors.tooManyAttempts"
  | "errors.rateLimited"
  | "errors.credentialsExpired"
  | "errors.sessionEnded"
  | "errors.unavailable"
  | "errors.timeout"
  | "errors.internal";

/** An error as the player reads it: the client's own text where the server names the reason or the code says it all. */
export function describeError(e: unknown): string {
  // The client's own refusals (thrown as plain errors) are already worded.
  if (!(e instanceof ConnectError) && e instanceof Error) return e.message;
  const err = ConnectError.from(e);
  const msg = err.rawMessage;
  const reason = err.metadata.get(REASON_TRAILER)?.replace(/^ERROR_REASON_/, "");
  const known = (reason ? REASONS[reason as keyof typeof ErrorReason] : undefined) ?? BY_CODE[err.code];
  const text = known ? t(known) : msg || Code[err.code] || String(e);
  const retry = err.metadata.get("retry-after");
  if (err.code === Code.ResourceExhausted && retry) return `${text} ${t("errors.retryIn", { count: Number(retry) })}`;
  return text;
}

export function playerName(p: Player | undefined): string {
  if (!p) return "?";
  return p.displayName || p.id;
}

/** The page of a player's profile. */
export function profileHref(playerId: string): string {
  return `#/profile/${encodeURIComponent(playerId)}`;
}

export { Code, ConnectError };
