// End-to-end, as a player meets the client: the lobby and a game page in each language (texts from the
// catalogues), the language chosen from the browser and kept, a Vietnamese visitor on a phone in a game
// against the computer in two taps, drag-and-drop with the destinations shown while dragging, a move
// typed on the keyboard, the move animation and sounds, the result banner, the spectator's notice, the
// service worker (offline page, no API call cached), and a screenshot of each main page in
// web/test-output/screens/ (gitignored) for a look before a release. No console error in any test.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, afterEach, before, describe, test } from "node:test";
import { expectConsoleErrors, launchBrowser, newPage, outDir, playRandomMove, startDraughtsd, startRedis, statusOf, takeConsoleErrors, waitForTurn, WEB } from "./harness.mjs";

const catalogue = (lang) => JSON.parse(readFileSync(join(WEB, "src", "locales", `${lang}.json`), "utf8"));
const CAT = { en: catalogue("en"), vi: catalogue("vi"), ru: catalogue("ru") };
const LOCALE = { en: "en-GB", vi: "vi-VN", ru: "ru-RU" };

let redis;
let server;
let browser;

before(async () => {
  redis = await startRedis();
  server = await startDraughtsd({ redisUrl: redis.url });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.stop();
  server?.cleanup();
  await redis?.stop();
});

const shot = (page, name) => page.screenshot({ path: join(outDir("screens"), `${name}.png`), fullPage: true });

async function gameId(page) {
  await page.waitForURL(/#\/game\//);
  return page.url().split("#/game/")[1];
}

/** Opens the lobby and starts a game against the computer at the beginner level (one tap). */
async function beginnerGame(page, variant) {
  await page.goto(`${server.url}/#/${variant ? `?variant=${variant}` : ""}`);
  await page.waitForSelector(".preview g[data-piece]");
  await page.click("[data-testid=play-ai-beginner]");
  const id = await gameId(page);
  await page.waitForSelector("[data-testid=status][data-ply]");
  return id;
}

/** Centre of a square's group on the screen (read again if the board was redrawn in between). */
async function centre(page, sq) {
  for (let i = 0; i < 40; i++) {
    const b = await page.locator(`g[data-sq="${sq}"]`).boundingBox();
    if (b) return { x: b.x + b.width / 2, y: b.y + b.height / 2 };
    await page.waitForTimeout(50);
  }
  throw new Error(`square ${sq} has no box`);
}

/**
 * Texts whose colour does not keep WCAG AA contrast with the background behind them (4.5:1, 3:1 for large
 * text); disabled controls and the board's SVG left out. Returns "element "text" ratio" lines.
 */
const lowContrast = (page) => page.evaluate(() => {
  const parse = (c) => { const m = c.match(/rgba?\(([^)]+)\)/); if (!m) return null; const p = m[1].split(/[ ,/]+/).filter(Boolean).map(Number); return { r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1 }; };
  const lum = ({ r, g, b }) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; }; return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const bgOf = (el) => { for (let e = el; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor); if (c && c.a > 0.5) return c; } return { r: 255, g: 255, b: 255, a: 1 }; };
  const out = [];
  for (const el of document.querySelectorAll("body *")) {
    if (el.closest("svg") || el.closest("[hidden]")) continue;
    const text = [...el.childNodes].filter((n) => n.nodeType === 3).map((n) => n.textContent.trim()).join("");
    if (!text) continue;
    const cs = getComputedStyle(el);
    if (cs.visibility === "hidden" || cs.display === "none" || el.closest(":disabled") || el.closest(".toast")) continue;
    if (Number(cs.opacity) < 1 && el.closest("[data-live=false]")) continue;
    const fg = parse(cs.color); const bg = bgOf(el);
    const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    const ratio = (a + 0.05) / (b + 0.05);
    const large = parseFloat(cs.fontSize) >= 24 || (parseFloat(cs.fontSize) >= 18.66 && Number(cs.fontWeight) >= 700);
    if (ratio < (large ? 3 : 4.5)) out.push(`${el.tagName.toLowerCase()}.${el.className} "${text.slice(0, 30)}" ${ratio.toFixed(2)}`);
  }
  return out;
});

describe("the client as players meet it", () => {
  afterEach(() => assert.deepEqual(takeConsoleErrors(), [], "console errors"));

  for (const lang of ["en", "vi", "ru"]) {
    test(`the lobby and a game page in ${lang}, chosen from the browser's language`, async () => {
      const page = await newPage(browser, { locale: LOCALE[lang] });
      await page.goto(`${server.url}/#/`);
      await page.waitForSelector(".preview g[data-piece]");
      const c = CAT[lang];
      assert.equal(await page.getAttribute("html", "lang"), lang);
      assert.equal(await page.inputValue("[data-testid=language]"), lang);
      // Playing first: quick pairing, then the computer's named levels, then the custom game.
      const order = await page.evaluate(() => [...document.querySelectorAll(".setup h2")].map((e) => e.textContent));
      assert.deepEqual(order, [c.seek.title, c.lobby.computerTitle, c.lobby.customTitle]);
      for (const k of ["beginner", "intermediate", "strong"]) assert.equal(await page.textContent(`[data-testid=play-ai-${k}]`), c.lobby.levels[k]);
      // The rule sets named as the sites write them.
      const international = await page.textContent("[data-testid=variant] option[value=international]");
      assert.equal(international, c.variant.international);
      await page.waitForSelector("[data-testid=pools][data-loaded=true]");
      await page.waitForSelector("[data-testid=lobby-online]");
      await shot(page, `lobby-${lang}`);
      // A game page: the status, the buttons and the computer's mark in this language.
      await page.click("[data-testid=play-ai-beginner]");
      await gameId(page);
      await page.waitForSelector("[data-testid=resign]");
      assert.equal(await page.textContent("[data-testid=resign]"), c.game.resign);
      assert.match(await page.textContent("[data-testid=status]"), new RegExp(c.game.yourMove));
      const computerSide = (await page.locator("[data-testid=computer-black]").count()) ? "black" : "white";
      assert.equal(await page.textContent(`[data-testid=computer-${computerSide}]`), c.game.computer);
      await shot(page, `game-${lang}`);
      // A move each (a game resigned before that is aborted), then resigned: the banner says who won and why.
      assert.ok(await waitForTurn(page));
      await playRandomMove(page);
      assert.ok(await waitForTurn(page));
      await page.click("[data-testid=resign]");
      await page.waitForSelector("[data-testid=result-banner]:not([hidden])");
      const text = await page.textContent("[data-testid=result-text]");
      assert.match(text, new RegExp(c.game.youLost));
      assert.match(text, new RegExp(c.reason.resignation));
      await shot(page, `result-${lang}`);
      await page.context().close();
    });
  }

  test("the language is switched from any page and kept across visits", async () => {
    const page = await newPage(browser, { locale: "en-US" });
    await page.goto(`${server.url}/#/leaderboard`);
    await page.waitForSelector("[data-testid=lb-state][data-loaded=true]");
    await page.selectOption("[data-testid=language]", "ru");
    await page.waitForFunction((t) => document.querySelector(".leaderboard h2")?.textContent === t, CAT.ru.nav.leaderboard);
    assert.equal(await page.evaluate(() => localStorage.getItem("draughts.lang")), "ru");
    await page.reload();
    await page.waitForSelector("[data-testid=lb-state][data-loaded=true]");
    assert.equal(await page.textContent(".leaderboard h2"), CAT.ru.nav.leaderboard);
    assert.equal(await page.getAttribute("html", "lang"), "ru");
    // A Russian first visit starts at Russian draughts.
    await page.goto(`${server.url}/#/`);
    await page.waitForSelector(".preview[data-variant=russian] g[data-piece]");
    await shot(page, "leaderboard-ru");
    await page.context().close();
  });

  test("a Vietnamese visitor on a phone is in a game against the computer within two taps", async () => {
    const page = await newPage(browser, { phone: true, locale: "vi-VN" });
    await page.goto(`${server.url}/`);
    const beginner = page.locator("[data-testid=play-ai-beginner]");
    await beginner.waitFor();
    // The first screen is the lobby: the computer's buttons are on it, the preview board is not.
    const box = await beginner.boundingBox();
    assert.ok(box.y + box.height <= 844, `the beginner button is at ${box.y} px, below the first screen`);
    await page.waitForSelector(".preview g[data-piece]");
    const board = await page.locator(".preview svg").boundingBox();
    assert.ok(board.y >= 844, `the preview board starts at ${board.y} px, on the first screen`);
    assert.equal(await beginner.textContent(), CAT.vi.lobby.levels.beginner);
    // Nothing wider than the phone (long rule-set names included): no sideways scrolling.
    assert.ok((await page.evaluate(() => document.documentElement.scrollWidth)) <= 390, "the lobby fits the phone's width");
    await shot(page, "lobby-vi-phone");
    let taps = 0;
    await beginner.tap();
    taps++;
    await gameId(page);
    await page.waitForSelector("g[data-piece]");
    assert.ok(taps <= 2);
    assert.ok(await waitForTurn(page), "the visitor may move");
    assert.match(await page.textContent("[data-testid=status]"), new RegExp(CAT.vi.game.yourMove));
    await playRandomMove(page);
    assert.ok((await page.evaluate(() => document.documentElement.scrollWidth)) <= 390, "the game page fits the phone's width");
    await shot(page, "game-vi-phone");
    await page.context().close();
  });

  test("drag and drop: the destinations shown while dragging, the move played on release; a typed move", async () => {
    const page = await newPage(browser);
    await page.goto(`${server.url}/#/`);
    await page.waitForSelector(".preview g[data-piece]");
    await page.evaluate(() => (document.querySelector("[data-testid=more-options]").open = true));
    await page.selectOption("[data-testid=variant]", "english");
    await page.waitForSelector(".preview[data-variant=english] g[data-piece]");
    await page.selectOption("[data-testid=color]", "white");
    await page.click("[data-testid=play-ai-beginner]");
    await gameId(page);
    assert.ok(await waitForTurn(page));
    const from = await page.evaluate(() => document.querySelector("g[data-sq] circle.piece.movable").closest("g").dataset.sq);
    const a = await centre(page, from);
    await page.mouse.move(a.x, a.y);
    await page.mouse.down();
    await page.mouse.move(a.x + 10, a.y - 10, { steps: 3 });
    // While dragging: the piece follows the pointer and the legal destinations are shown.
    await page.waitForSelector(`svg.board[data-dragging="${from}"]`);
    const targets = await page.evaluate(() => [...document.querySelectorAll("g.target")].map((g) => g.dataset.sq));
    assert.ok(targets.length > 0, "destinations shown while dragging");
    assert.equal(await page.locator("g.drag-ghost").count(), 1);
    const b = await centre(page, targets[0]);
    await page.mouse.move(b.x, b.y, { steps: 5 });
    await page.mouse.up();
    await page.waitForFunction(() => Number(document.querySelector("[data-testid=status]").dataset.ply) >= 1);
    assert.equal(await page.locator("g.drag-ghost").count(), 0);
    assert.match(await page.textContent("[data-testid=moves] button.mv"), new RegExp(`^\\d+-\\d+$`));
    // The computer's answer slides in (the board counts its animations).
    await page.waitForFunction(() => Number(document.querySelector("svg.board").dataset.animations ?? 0) >= 1, null, { timeout: 20_000 });
    // Keyboard: the move typed as square names (the first legal one, as the client numbers its squares).
    assert.ok(await waitForTurn(page));
    const typed = await page.evaluate(() => {
      const g = document.querySelector("g[data-sq] circle.piece.movable").closest("g");
      return g.getAttribute("aria-label").split(" ")[0];
    });
    await page.click(`g[data-sq="${await page.evaluate(() => document.querySelector("g[data-sq] circle.piece.movable").closest("g").dataset.sq)}"]`);
    const to = await page.evaluate(() => document.querySelector("g.target").getAttribute("aria-label").split(" ")[0]);
    const before = (await statusOf(page)).ply;
    // A square that does not exist is refused with a message, nothing sent.
    const refused = (await statusOf(page)).refused;
    await page.fill("[data-testid=typed-move]", "zz-99");
    await page.press("[data-testid=typed-move]", "Enter");
    assert.equal((await statusOf(page)).refused, refused + 1);
    assert.match(await page.textContent("[data-testid=toast]"), /no square zz/);
    assert.equal((await statusOf(page)).ply, before);
    await page.fill("[data-testid=typed-move]", `${typed}-${to}`);
    await page.press("[data-testid=typed-move]", "Enter");
    await page.waitForFunction((b) => Number(document.querySelector("[data-testid=status]").dataset.ply) > b, before);
    // Keyboard only: Tab to a movable piece's square, Enter, then Tab to a destination, Enter.
    assert.ok(await waitForTurn(page));
    const plyNow = (await statusOf(page)).ply;
    await page.focus("g[data-sq][tabindex='0']:has(circle.piece.movable)");
    await page.keyboard.press("Enter");
    await page.waitForSelector("g.target[tabindex='0']");
    await page.focus("g.target[tabindex='0']");
    await page.keyboard.press("Enter");
    await page.waitForFunction((b) => Number(document.querySelector("[data-testid=status]").dataset.ply) > b, plyNow);
    await page.context().close();
  });

  test("sounds are off by default and play once switched on; a spectator is told they are watching", async () => {
    const page = await newPage(browser);
    await beginnerGame(page, "english");
    assert.equal(await page.isChecked("[data-testid=sound]"), false);
    assert.equal(await page.evaluate(() => localStorage.getItem("draughts.sound")), null);
    await page.check("[data-testid=sound]");
    assert.ok(await waitForTurn(page));
    const before = await page.evaluate(() => window.__draughtsSounds.count);
    await playRandomMove(page);
    await page.waitForFunction((b) => window.__draughtsSounds.count > b, before);
    // Someone else opens the game's link: read-only, and told so.
    const id = page.url().split("#/game/")[1];
    const spectator = await newPage(browser, { locale: "ru-RU" });
    await spectator.goto(`${server.url}/#/game/${id}`);
    await spectator.waitForSelector("[data-testid=watching]:not([hidden])");
    assert.ok((await spectator.textContent("[data-testid=watching]")).startsWith(CAT.ru.game.watching));
    // The server's count of spectators, in Russian plural: one.
    await spectator.waitForFunction(() => document.querySelector("[data-testid=watching]").dataset.spectators === "1");
    assert.equal(await spectator.textContent("[data-testid=watching]"), `${CAT.ru.game.watching} · 1 ${CAT.ru.game.spectators_one.replace("{{count}} ", "")}`);
    assert.equal(await spectator.locator("circle.piece.movable").count(), 0);
    assert.equal(await page.isHidden("[data-testid=watching]"), true);
    await shot(spectator, "spectator-ru");
    await spectator.context().close();
    await page.context().close();
  });

  test("premoves (on from the game page): picked while the opponent is to move, played when the turn comes", async () => {
    // English, White men on 21 and 32, Black men on 1 and 4: far apart, so White's premove stays legal.
    const ann = await newPage(browser);
    await ann.goto(`${server.url}/#/?variant=english&fen=${encodeURIComponent("W:W21,32:B1,4")}`);
    await ann.waitForSelector(".preview[data-variant=english] g[data-piece]");
    await ann.selectOption("[data-testid=color]", "white");
    await ann.click("[data-testid=challenge-link]");
    await ann.waitForSelector("[data-testid=challenge-url]");
    const bob = await newPage(browser);
    await bob.goto(await ann.inputValue("[data-testid=challenge-url]"));
    await bob.click("[data-testid=accept]");
    await gameId(bob);
    await gameId(ann);
    const sqOf = (page, n) => page.evaluate((n) => [...document.querySelectorAll("g[data-sq]")].find((g) => (g.getAttribute("aria-label") ?? "").startsWith(`${n} (`))?.dataset.sq, n);
    assert.ok(await waitForTurn(ann));
    const s21 = await sqOf(ann, 21);
    const s32 = await sqOf(ann, 32);
    // Where 21 may go (read while it is White's turn), then 32 moves.
    await ann.click(`g[data-sq="${s21}"]`);
    const to = await ann.evaluate(() => document.querySelector("g.target").dataset.sq);
    await ann.click(`g[data-sq="${s21}"]`);
    await ann.click(`g[data-sq="${s32}"]`);
    await ann.click("g.target");
    await ann.waitForFunction(() => Number(document.querySelector("[data-testid=status]").dataset.ply) === 1);
    // Black to move: White picks a premove, shown on the board.
    await ann.check("[data-testid=premove]");
    await ann.click(`g[data-sq="${s21}"]`);
    await ann.click(`g[data-sq="${to}"]`);
    await ann.waitForSelector(`[data-testid=premove-state][data-premove="${s21}-${to}"]`);
    assert.equal(await ann.locator("rect.premove").count(), 2);
    // Black moves; White's premove is played by itself.
    assert.ok(await waitForTurn(bob));
    await playRandomMove(bob);
    await ann.waitForFunction(() => Number(document.querySelector("[data-testid=status]").dataset.ply) === 3);
    const last = await ann.evaluate(() => [...document.querySelectorAll("[data-testid=moves] button.mv")].pop().textContent);
    assert.match(last, /^21-\d+$/);
    assert.equal(await ann.textContent("[data-testid=premove-state]"), "");
    assert.equal(await ann.evaluate(() => localStorage.getItem("draughts.premoves")), "on");
    await bob.context().close();
    await ann.context().close();
  });

  test("every text of the lobby, a game page and the result keeps its contrast; a screenshot of each other page", async () => {
    const page = await newPage(browser);
    await page.goto(`${server.url}/#/`);
    await page.waitForSelector("[data-testid=pools][data-loaded=true]");
    await page.waitForSelector("[data-testid=lobby-online]");
    await page.evaluate(() => (document.querySelector("[data-testid=more-options]").open = true));
    assert.deepEqual(await lowContrast(page), [], "lobby");
    await page.click("[data-testid=play-ai-beginner]");
    await gameId(page);
    assert.ok(await waitForTurn(page));
    await playRandomMove(page);
    assert.ok(await waitForTurn(page));
    assert.deepEqual(await lowContrast(page), [], "game page");
    await page.click("[data-testid=resign]");
    await page.waitForSelector("[data-testid=result-banner]:not([hidden])");
    assert.deepEqual(await lowContrast(page), [], "result");
    // The other pages, kept for a look: profile, sign-up, sign-in, tournaments, a challenge's page.
    const me = await page.getAttribute("[data-testid=nav-profile]", "data-player");
    for (const [name, hash, ready] of [
      ["profile", `#/profile/${encodeURIComponent(me)}`, "[data-testid=profile][data-loaded=true]"],
      ["signup", "#/signup", "[data-testid=signup]"],
      ["signin", "#/signin", "[data-testid=signin]"],
      ["tournaments", "#/tournaments", "[data-testid=tournament-list][data-loaded]"],
    ]) {
      await page.goto(`${server.url}/${hash}`);
      await page.waitForSelector(ready);
      assert.deepEqual(await lowContrast(page), [], name);
      await shot(page, `${name}-en`);
    }
    await page.goto(`${server.url}/#/`);
    await page.waitForSelector(".preview g[data-piece]");
    await page.click("[data-testid=challenge-link]");
    await page.waitForSelector("[data-testid=challenge-url]");
    assert.deepEqual(await lowContrast(page), [], "challenge");
    await shot(page, "challenge-en");
    await page.context().close();
  });

  test("a server's refusal in the reader's words: accepting a challenge cancelled meanwhile", async () => {
    const ann = await newPage(browser);
    await ann.goto(`${server.url}/#/`);
    await ann.waitForSelector(".preview g[data-piece]");
    await ann.click("[data-testid=challenge-link]");
    await ann.waitForSelector("[data-testid=challenge-url]");
    const link = await ann.inputValue("[data-testid=challenge-url]");
    const bob = await newPage(browser, { locale: "ru-RU" });
    await bob.goto(link);
    await bob.waitForSelector("[data-testid=accept]");
    await ann.click("[data-testid=cancel-invitation]");
    await ann.waitForURL((u) => u.hash === "#/");
    await bob.click("[data-testid=accept]");
    await bob.waitForFunction(() => document.querySelector("[data-testid=toast].show"));
    const error = await bob.evaluate(() => window.__draughtsCalls.filter((c) => c.error).pop());
    assert.match(error.error, /cancelled/, "the server refused it in its own words");
    assert.equal(await bob.textContent("[data-testid=toast]"), CAT.ru.errors.invitationCancelled);
    await bob.context().close();
    await ann.context().close();
  });

  test("installable: a manifest, a service worker that never caches API calls, an offline page", async () => {
    const page = await newPage(browser);
    await page.goto(`${server.url}/#/`);
    const manifest = await (await fetch(`${server.url}/manifest.webmanifest`)).json();
    assert.equal(manifest.start_url, "/");
    assert.ok(manifest.icons.some((i) => i.sizes === "512x512"));
    await page.evaluate(() => navigator.serviceWorker.ready.then(() => true));
    await page.reload();
    await page.waitForFunction(() => !!navigator.serviceWorker.controller);
    // The page talks to the API under the worker's control.
    await page.waitForSelector("[data-testid=pools][data-loaded=true]");
    await page.waitForSelector("[data-testid=lobby-online]");
    const cached = await page.evaluate(async () => {
      const out = [];
      for (const k of await caches.keys()) for (const r of await (await caches.open(k)).keys()) out.push(new URL(r.url).pathname);
      return out;
    });
    assert.ok(cached.includes("/offline.html"), cached.join(" "));
    assert.deepEqual(cached.filter((p) => p.startsWith("/draughts.")), [], "no API call cached");
    // Offline, a navigation gets the offline page. The page's open event stream (and its reconnects) fail
    // while offline, which the browser reports as console errors: expected here, and only the network's.
    expectConsoleErrors(/ERR_INTERNET_DISCONNECTED/);
    await page.context().setOffline(true);
    await page.goto(`${server.url}/?offline-check`).catch(() => {});
    await page.waitForSelector("[data-testid=offline]");
    assert.match(await page.textContent("h1"), /offline/);
    await shot(page, "offline");
    await page.context().setOffline(false);
    await page.context().close();
  });
});
