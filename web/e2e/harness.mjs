// What the end-to-end tests share: free ports, a redis-server and draughtsd processes of their own
// (stopped by pid), Debian's Chromium through playwright-core, and helpers that play through the UI.
import { spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
export const WEB = resolve(here, "..");
export const OUT = join(WEB, "test-output");
export const TOKEN_SECRET = "e2e-only-guest-token-secret-0123456789abcdef";
export const JWT_KEY = "e2e-only-identity-provider-secret-0123456789";

export function draughtsdBinary() {
  if (process.env.DRAUGHTSD_BIN) return process.env.DRAUGHTSD_BIN;
  const target = process.env.CARGO_TARGET_DIR || resolve(WEB, "..", "target");
  for (const profile of ["release", "debug"]) {
    const p = join(target, profile, "draughtsd");
    if (existsSync(p)) return p;
  }
  throw new Error("no draughtsd binary: build it (cargo build -p draughtsd) or set DRAUGHTSD_BIN");
}

export function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.on("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

function portOpen(port) {
  return new Promise((res) => {
    const c = connect(port, "127.0.0.1");
    c.on("connect", () => {
      c.destroy();
      res(true);
    });
    c.on("error", () => res(false));
  });
}

async function waitFor(check, what, ms = 30_000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** A redis-server on a free port, data in memory only. */
export async function startRedis() {
  const port = await freePort();
  const proc = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
  await waitFor(() => portOpen(port), "redis-server");
  return { url: `redis://127.0.0.1:${port}`, stop: () => stopProcess(proc) };
}

function stopProcess(proc) {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((res) => {
    const t = setTimeout(() => proc.kill("SIGKILL"), 5000);
    proc.once("exit", () => {
      clearTimeout(t);
      res();
    });
    proc.kill("SIGTERM");
  });
}

/** draughtsd on `port` serving web/dist, on the given Redis (or in memory) and its own SQLite file; `env` adds settings. */
export async function startDraughtsd({ port, redisUrl, dataDir, env = {} } = {}) {
  port ??= await freePort();
  dataDir ??= mkdtempSync(join(tmpdir(), "draughts-e2e-"));
  const metrics = await freePort();
  const log = [];
  const proc = spawn(draughtsdBinary(), [], {
    env: {
      ...process.env,
      DRAUGHTS_LISTEN: `127.0.0.1:${port}`,
      DRAUGHTS_METRICS_LISTEN: `127.0.0.1:${metrics}`,
      DRAUGHTS_REDIS_URL: redisUrl ?? "memory://",
      DRAUGHTS_DATABASE_URL: `sqlite://${join(dataDir, "draughts.sqlite3")}?mode=rwc`,
      DRAUGHTS_WEB_DIR: join(WEB, "dist"),
      // No endgame tables built in the background of a debug server under test (minutes of a core).
      DRAUGHTS_ANALYSIS_BITBASES_BUILD: "none",
      DRAUGHTS_TOKEN_SECRET: TOKEN_SECRET,
      DRAUGHTS_JWT_KEY: JWT_KEY,
      // The tests play fast: the per-minute limits of a real player would slow them down.
      DRAUGHTS_RATE_LIMIT_GUEST_PER_MINUTE: "100000",
      DRAUGHTS_RATE_LIMIT_PLAYER_PER_MINUTE: "100000",
      DRAUGHTS_RATE_LIMIT_ANONYMOUS_PER_MINUTE: "100000",
      // A restart in the tests should not wait out the open watch streams.
      DRAUGHTS_SHUTDOWN_GRACE_MS: "300",
      RUST_LOG: process.env.RUST_LOG ?? "warn",
      ...env,
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  proc.stderr.on("data", (d) => {
    log.push(String(d));
    if (log.length > 200) log.shift();
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => {
    if (proc.exitCode !== null) throw new Error(`draughtsd exited: ${log.join("")}`);
    try {
      return (await fetch(url + "/")).ok;
    } catch {
      return false;
    }
  }, "draughtsd");
  return { url, port, dataDir, log, stop: () => stopProcess(proc), cleanup: () => rmSync(dataDir, { recursive: true, force: true }) };
}

export async function launchBrowser() {
  const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";
  return chromium.launch({ executablePath, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
}

/** Console errors and uncaught exceptions of every page opened by `newPage` since the last `takeConsoleErrors`. */
const consoleErrors = [];
/** Console errors a test expects (e.g. a stopped server's refused connections), by pattern. */
let expectedErrors = [];

/** Lets console errors matching `pattern` pass until the next `takeConsoleErrors` (one test). */
export function expectConsoleErrors(pattern) {
  expectedErrors.push(pattern);
}

/** The unexpected console errors since the last call (each test's afterEach asserts there are none). */
export function takeConsoleErrors() {
  const out = consoleErrors.splice(0).filter((e) => !expectedErrors.some((p) => p.test(e)));
  expectedErrors = [];
  return out;
}

/**
 * A new browser context (its own localStorage, so its own guest) with a phone- or desktop-sized page, in
 * `locale` (navigator.languages; English unless asked). Console errors and page errors are recorded.
 * `serviceWorkers: "block"` keeps the client's service worker out (`page.route` does not see the requests
 * a worker makes).
 */
export async function newPage(browser, { phone = false, locale = "en-US", serviceWorkers = "allow" } = {}) {
  const size = phone ? { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true } : { viewport: { width: 1100, height: 900 } };
  const ctx = await browser.newContext({ ...size, locale, serviceWorkers });
  const page = await ctx.newPage();
  page.on("pageerror", (e) => {
    console.error("page error:", e.message);
    consoleErrors.push(`page error at ${page.url()}: ${e.message}`);
  });
  page.on("console", (m) => {
    if (m.type() === "error") consoleErrors.push(`console error at ${page.url()}: ${m.text()} ${m.location()?.url ?? ""}`);
  });
  return page;
}

/** An HS256 player token of the test's identity provider (it carries the analysis scope). */
export function playerToken(sub, name) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString("base64url");
  const body = `${b64({ alg: "HS256", typ: "JWT" })}.${b64({ sub, name, exp: Math.floor(Date.now() / 1000) + 3600 })}`;
  return `${body}.${createHmac("sha256", JWT_KEY).update(body).digest("base64url")}`;
}

export const statusOf = (page) =>
  page.evaluate(() => {
    const s = document.querySelector("[data-testid=status]");
    return { ply: Number(s?.dataset.ply ?? -1), outcome: Number(s?.dataset.outcome ?? 0), text: s?.textContent ?? "", refused: Number(s?.dataset.refused ?? 0) };
  });

export const ONGOING = 1;

/** Waits until this page may move (a movable piece) or the game is over; true when it may move. */
export async function waitForTurn(page, timeout = 20_000) {
  try {
    await page.waitForFunction(
      () => document.querySelector("circle.piece.movable") || Number(document.querySelector("[data-testid=status]")?.dataset.outcome ?? 1) > 1,
      null,
      { timeout },
    );
  } catch (e) {
    // Say what the page showed, and keep a picture of it.
    const s = await statusOf(page).catch(() => null);
    const conn = await page.textContent("[data-testid=connection]").catch(() => null);
    const file = join(outDir("failures"), `turn-${Date.now()}.png`);
    await page.screenshot({ path: file }).catch(() => {});
    throw new Error(`no turn after ${timeout} ms at ${page.url()}: status ${JSON.stringify(s)}, connection "${conn}", screenshot ${file}`, { cause: e });
  }
  return (await statusOf(page)).outcome === ONGOING;
}

/** Plays one random legal move through clicks (piece, then landing squares / destination). */
export async function playRandomMove(page) {
  const before = (await statusOf(page)).ply;
  const from = await page.evaluate(() => {
    const all = [...document.querySelectorAll("g[data-sq]")].filter((g) => g.querySelector("circle.piece.movable"));
    return all[Math.floor(Math.random() * all.length)]?.getAttribute("data-sq");
  });
  if (!from) throw new Error("no movable piece");
  await page.click(`g[data-sq="${from}"]`);
  let landingFirst = false;
  for (let i = 0; i < 30; i++) {
    const refused = (await statusOf(page)).refused;
    const next = await page.evaluate((landingFirst) => {
      const pick = (sel) => {
        const all = [...document.querySelectorAll(sel)];
        return all[Math.floor(Math.random() * all.length)]?.getAttribute("data-sq");
      };
      return landingFirst ? (pick("g.landing") ?? pick("g.target")) : (pick("g.target") ?? pick("g.landing"));
    }, landingFirst);
    if (!next) break;
    await page.click(`g[data-sq="${next}"]`);
    const after = await page.evaluate(() => Number(document.querySelector("[data-testid=status]")?.dataset.ply ?? -1));
    if (after > before) return;
    // Several captures ended there: name the landing squares first.
    landingFirst = (await statusOf(page)).refused > refused;
    // Either the move is on its way (the board is read-only until the answer), or more squares are needed.
    const waiting = await page.evaluate(() => !document.querySelector("g.target, g.landing"));
    if (waiting) break;
  }
  // Generous: on two cores busy with builds a move took longer than 10 s to come back once.
  await page.waitForFunction((b) => Number(document.querySelector("[data-testid=status]")?.dataset.ply ?? -1) > b, before, { timeout: 30_000 });
}

export function outDir(...parts) {
  const d = join(OUT, ...parts);
  mkdirSync(d, { recursive: true });
  return d;
}
