// The API clients (generated from proto/ by protoc-gen-es; gRPC-Web transport of connect-web), the
// browser's identities (guest tokens, an optional identity-provider player token) and one retry rule.
import { Code, ConnectError, createClient, type CallOptions, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { Auth } from "./gen/draughts/v1/auth_pb.js";
import { Games } from "./gen/draughts/v1/games_pb.js";
import { Rules } from "./gen/draughts/v1/rules_pb.js";
import { Analysis } from "./gen/draughts/v1/analysis_pb.js";
import { Matchmaking } from "./gen/draughts/v1/matchmaking_pb.js";
import type { Player } from "./gen/draughts/v1/common_pb.js";

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
const transport = createGrpcWebTransport({ baseUrl: location.origin, interceptors: [recordCalls] });

export const auth: Client<typeof Auth> = createClient(Auth, transport);
export const games: Client<typeof Games> = createClient(Games, transport);
export const rules: Client<typeof Rules> = createClient(Rules, transport);
export const analysis: Client<typeof Analysis> = createClient(Analysis, transport);
export const matchmaking: Client<typeof Matchmaking> = createClient(Matchmaking, transport);

/** A credential this browser holds. */
export interface Identity {
  token: string;
  id: string;
  name: string;
  /** Guest tokens come from Auth.CreateGuest; player tokens from the identity provider (pasted). */
  kind: "guest" | "player";
  expiresAtMs: number;
}

const KEY = "draughts.identity";
const HOTSEAT = "draughts.hotseat.";

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

export function currentIdentity(): Identity | null {
  return load(KEY);
}

export function setIdentity(id: Identity | null): void {
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
  };
}

let pending: Promise<Identity> | null = null;

/** This browser's identity, checked with WhoAmI once per page load; a new guest when it has none. */
export function ensureIdentity(): Promise<Identity> {
  if (pending) return pending;
  pending = (async () => {
    const have = currentIdentity();
    if (have) {
      try {
        const who = await retrying(() => auth.whoAmI({}, bearer(have)));
        const checked = { ...have, id: who.player?.id ?? have.id, name: who.player?.displayName ?? have.name };
        setIdentity(checked);
        return checked;
      } catch (e) {
        // A token the server no longer accepts (expired, another secret after a restart): start again.
        if (ConnectError.from(e).code !== Code.Unauthenticated) throw e;
      }
    }
    const guest = await newGuest(localStorage.getItem("draughts.name") ?? "");
    setIdentity(guest);
    return guest;
  })();
  pending.catch(() => (pending = null));
  return pending;
}

/** Forgets the checked identity (after UNAUTHENTICATED): the next ensureIdentity makes or checks one. */
export function resetIdentity(): void {
  pending = null;
}

/** Signs in with an identity-provider player token (it carries the `analysis` scope). */
export async function signInWithPlayerToken(token: string): Promise<Identity> {
  const who = await auth.whoAmI({}, { headers: { authorization: `Bearer ${token}` } });
  const exp = jwtExpiry(token);
  const id: Identity = {
    token,
    id: who.player?.id ?? "",
    name: who.player?.displayName ?? "",
    kind: who.player?.guest ? "guest" : "player",
    expiresAtMs: exp,
  };
  setIdentity(id);
  pending = Promise.resolve(id);
  return id;
}

function jwtExpiry(token: string): number {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const claims = JSON.parse(atob(part)) as { exp?: number };
    return claims.exp ? claims.exp * 1000 : 0;
  } catch {
    return 0;
  }
}

/** The second player's identity of a hot-seat game (kept in this browser only). */
export function hotseatIdentity(gameId: string): Identity | null {
  return load(HOTSEAT + gameId);
}

export function setHotseatIdentity(gameId: string, id: Identity): void {
  localStorage.setItem(HOTSEAT + gameId, JSON.stringify(id));
}

export function describeError(e: unknown): string {
  const err = ConnectError.from(e);
  return err.rawMessage || Code[err.code] || String(e);
}

export function playerName(p: Player | undefined): string {
  if (!p) return "?";
  return p.displayName || p.id;
}

export { Code, ConnectError };
