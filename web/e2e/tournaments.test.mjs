// Tournaments in the client: the list, the create form (accounts only), a tournament's page with live
// standings, and each entrant's own game joined automatically once a round pairs it. A draughtsd that
// does not serve draughts.v1.Tournaments (the service is newer than the client's first server) must be
// said to lack it on the list page; the rest is then skipped, with the reason.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, afterEach, before, describe, test } from "node:test";
import { launchBrowser, newPage, outDir, playRandomMove, startDraughtsd, startRedis, takeConsoleErrors, WEB } from "./harness.mjs";

const EN = JSON.parse(readFileSync(join(WEB, "src", "locales", "en.json"), "utf8"));
const VI = JSON.parse(readFileSync(join(WEB, "src", "locales", "vi.json"), "utf8"));
const RU = JSON.parse(readFileSync(join(WEB, "src", "locales", "ru.json"), "utf8"));

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

/** Signs a new account up through the page. */
async function signUp(page, username) {
  await page.goto(`${server.url}/#/signup`);
  await page.fill("[data-testid=username]", username);
  await page.fill("[data-testid=password]", "correct horse battery");
  await page.click("[data-testid=signup-submit]");
  await page.waitForFunction(() => document.querySelector("[data-testid=nav-signout]"));
}

describe("tournaments", () => {
  afterEach(() => assert.deepEqual(takeConsoleErrors(), [], "console errors"));

  test("a Swiss tournament created, joined by two players, started: both are sent to their game; live standings", async (t) => {
    const ann = await newPage(browser);
    await ann.goto(`${server.url}/#/tournaments`);
    await ann.waitForSelector("[data-testid=tournament-list][data-loaded]");
    if ((await ann.getAttribute("[data-testid=tournament-list]", "data-loaded")) === "error") {
      // No Tournaments service on this server: the page says so in the reader's words.
      assert.equal(await ann.textContent("[data-testid=tournaments-unavailable]"), EN.tournament.unavailable);
      await ann.context().close();
      t.skip("this draughtsd serves no draughts.v1.Tournaments");
      return;
    }
    // Guests are told that accounts create tournaments.
    assert.equal(await ann.locator("[data-testid=new-tournament]").count(), 0);
    await signUp(ann, `tann${Date.now() % 1_000_000}`);
    await ann.goto(`${server.url}/#/tournaments`);
    await ann.click("[data-testid=new-tournament]");
    await ann.fill("[data-testid=t-name]", "E2E Swiss");
    await ann.selectOption("[data-testid=t-kind]", "swiss");
    await ann.selectOption("[data-testid=t-variant]", "english");
    await ann.fill("[data-testid=t-rounds]", "1");
    await ann.fill("[data-testid=t-start-in]", "30");
    await ann.click("[data-testid=t-create]");
    await ann.waitForURL(/#\/tournament\/t/);
    const url = ann.url();
    await ann.waitForSelector("[data-testid=tournament-state][data-state=upcoming]");
    assert.equal(await ann.textContent("[data-testid=tournament-name]"), "E2E Swiss");
    await ann.click("[data-testid=join-tournament]");
    await ann.waitForSelector("[data-testid=leave-tournament]");
    // A second player, a guest reading Vietnamese, joins from the list.
    const bob = await newPage(browser, { locale: "vi-VN" });
    await bob.goto(`${server.url}/#/tournaments/upcoming`);
    await bob.click(`[data-testid=tournament] a`);
    await bob.click("[data-testid=join-tournament]");
    await bob.waitForSelector("[data-testid=leave-tournament]");
    assert.equal(await bob.textContent("[data-testid=leave-tournament]"), VI.tournament.leave);
    await ann.waitForSelector("[data-testid=standings][data-rows='2']");
    await ann.screenshot({ path: join(outDir("screens"), "tournament-en.png"), fullPage: true });
    // Started by its creator: round 1 pairs the two, and both pages go to the game by themselves.
    await ann.click("[data-testid=start-tournament]");
    await ann.waitForURL(/#\/game\//, { timeout: 20_000 });
    await bob.waitForURL(/#\/game\//, { timeout: 20_000 });
    assert.equal(ann.url().split("#/game/")[1], bob.url().split("#/game/")[1]);
    const game = ann.url().split("#/game/")[1];
    // The tournament's page, opened again, lists the game in progress and links the player to theirs
    // (without sending them there by itself); the standings are live.
    await ann.goto(url);
    await ann.waitForSelector("[data-testid=pairing]");
    assert.equal(await ann.getAttribute("[data-testid=pairing]", "href"), `#/game/${game}`);
    assert.equal(await ann.getAttribute("[data-testid=my-game-link]", "href"), `#/game/${game}`);
    await ann.waitForSelector("[data-testid=tournament-live][data-state=live]");
    assert.equal(await ann.getAttribute("[data-testid=tournament-state]", "data-state"), "running");
    // A move each, then Bob resigns: the result reaches the standings live (a win for Ann).
    const annId = await ann.getAttribute("[data-testid=nav-profile]", "data-player");
    await ann.goto(`${server.url}/#/game/${game}`);
    for (let ply = 0; ply < 2; ply++) {
      // Whoever may move (the variant's first side, then the other).
      const mover = await Promise.any([ann, bob].map((p) => p.waitForSelector("circle.piece.movable", { timeout: 20_000 }).then(() => p)));
      await playRandomMove(mover);
    }
    await bob.click("[data-testid=resign]");
    await ann.goto(url);
    await ann.waitForFunction((id) => document.querySelector(`[data-testid=standing][data-player="${id}"] td:nth-child(6)`)?.textContent === "1", annId, { timeout: 20_000 });
    await ann.screenshot({ path: join(outDir("screens"), "tournament-running-en.png"), fullPage: true });
    await bob.context().close();
    await ann.context().close();
  });

  test("a private tournament: a wrong password is refused in the reader's language (Russian), the right one lets in", async (t) => {
    const ann = await newPage(browser);
    await ann.goto(`${server.url}/#/tournaments`);
    await ann.waitForSelector("[data-testid=tournament-list][data-loaded]");
    if ((await ann.getAttribute("[data-testid=tournament-list]", "data-loaded")) === "error") {
      await ann.context().close();
      t.skip("this draughtsd serves no draughts.v1.Tournaments");
      return;
    }
    await signUp(ann, `pann${Date.now() % 1_000_000}`);
    await ann.goto(`${server.url}/#/tournaments`);
    await ann.click("[data-testid=new-tournament]");
    await ann.fill("[data-testid=t-name]", "E2E Private");
    await ann.selectOption("[data-testid=t-kind]", "swiss");
    await ann.fill("[data-testid=t-rounds]", "1");
    await ann.fill("[data-testid=t-start-in]", "600");
    await ann.fill("[data-testid=t-password]", "open sesame");
    await ann.click("[data-testid=t-create]");
    await ann.waitForURL(/#\/tournament\/t/);
    const url = ann.url();
    // A guest reading Russian: the password field shows for a private event; a wrong password is
    // refused in Russian (the server names the reason; the client words it), the right one enters.
    const olga = await newPage(browser, { locale: "ru-RU" });
    await olga.goto(url);
    await olga.waitForSelector("[data-testid=tournament-password]:not([hidden])");
    await olga.fill("[data-testid=tournament-password]", "open sesam");
    await olga.click("[data-testid=join-tournament]");
    await olga.waitForFunction(() => document.querySelector("[data-testid=toast].show"));
    assert.equal(await olga.textContent("[data-testid=toast]"), RU.errors.tournamentPassword);
    await olga.fill("[data-testid=tournament-password]", "open sesame");
    await olga.click("[data-testid=join-tournament]");
    await olga.waitForSelector("[data-testid=leave-tournament]");
    assert.equal(await olga.textContent("[data-testid=leave-tournament]"), RU.tournament.leave);
    await olga.context().close();
    await ann.context().close();
  });

  test("an arena: two entrants paired by a wave, sent to their game; one goes berserk before their first move (half the clock, a badge on both pages)", async (t) => {
    const ann = await newPage(browser);
    await ann.goto(`${server.url}/#/tournaments`);
    await ann.waitForSelector("[data-testid=tournament-list][data-loaded]");
    if ((await ann.getAttribute("[data-testid=tournament-list]", "data-loaded")) === "error") {
      await ann.context().close();
      t.skip("this draughtsd serves no draughts.v1.Tournaments");
      return;
    }
    await signUp(ann, `aann${Date.now() % 1_000_000}`);
    await ann.goto(`${server.url}/#/tournaments`);
    await ann.click("[data-testid=new-tournament]");
    await ann.fill("[data-testid=t-name]", "E2E Arena");
    await ann.selectOption("[data-testid=t-kind]", "arena");
    await ann.selectOption("[data-testid=t-variant]", "english");
    await ann.selectOption("[data-testid=t-time]", "3+2");
    await ann.fill("[data-testid=t-start-in]", "0");
    assert.equal(await ann.isChecked("[data-testid=t-berserk]"), true, "arenas allow berserk by default");
    await ann.click("[data-testid=t-create]");
    await ann.waitForURL(/#\/tournament\/t/);
    const url = ann.url();
    await ann.click("[data-testid=join-tournament]");
    await ann.waitForSelector("[data-testid=leave-tournament]");
    const bob = await newPage(browser);
    await bob.goto(url);
    await bob.click("[data-testid=join-tournament]");
    // A wave pairs the two; both pages go to the game by themselves.
    await ann.waitForURL(/#\/game\//, { timeout: 30_000 });
    await bob.waitForURL(/#\/game\//, { timeout: 30_000 });
    assert.equal(ann.url().split("#/game/")[1], bob.url().split("#/game/")[1]);
    // Each player is offered berserk before their own first move; whoever is offered it first takes it.
    const [taker, other] = await Promise.any(
      [
        [ann, bob],
        [bob, ann],
      ].map(([p, q]) => p.waitForSelector("[data-testid=berserk]", { timeout: 20_000 }).then(() => [p, q])),
    );
    assert.equal(await taker.locator("[data-testid^=berserk-]").count(), 0, "nobody has gone berserk yet");
    await taker.click("[data-testid=berserk]");
    await taker.waitForSelector("[data-testid=berserk]", { state: "detached" });
    // The badge on both pages, on the taker's side; the taker's clock shows half of 3:00.
    const badge = await taker.waitForSelector("[data-testid^=berserk-]");
    const colour = (await badge.getAttribute("data-testid")).slice("berserk-".length);
    assert.ok(colour === "white" || colour === "black", colour);
    await other.waitForSelector(`[data-testid=berserk-${colour}]`, { timeout: 10_000 });
    await taker.waitForFunction((c) => document.querySelector(`[data-testid=clock-${c}]`)?.textContent === "1:30", colour, { timeout: 10_000 });
    await taker.screenshot({ path: join(outDir("screens"), "arena-berserk-en.png"), fullPage: true });
    await bob.context().close();
    await ann.context().close();
  });
});
