// End-to-end: the built client served by a real draughtsd, driven in Debian's headless Chromium.
// Run with `npm run test:e2e` after `npm run build` (scripts/test.sh does both); artefacts (board
// screenshots, measured first paint) go to web/test-output/.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { availableParallelism, loadavg } from "node:os";
import { join } from "node:path";
import { after, afterEach, before, describe, test } from "node:test";
import {
  expectConsoleErrors,
  launchBrowser,
  newPage,
  ONGOING,
  outDir,
  playerToken,
  playRandomMove,
  startDraughtsd,
  startRedis,
  statusOf,
  takeConsoleErrors,
  waitForTurn,
  WEB,
} from "./harness.mjs";

const EN = JSON.parse(readFileSync(join(WEB, "src", "locales", "en.json"), "utf8"));

const VARIANTS = {
  international: { size: 10, pieces: 40, mirrored: false },
  english: { size: 8, pieces: 24, mirrored: false },
  italian: { size: 8, pieces: 24, mirrored: true },
  russian: { size: 8, pieces: 24, mirrored: false },
  brazilian: { size: 8, pieces: 24, mirrored: false },
  spanish: { size: 8, pieces: 24, mirrored: true },
  czech: { size: 8, pieces: 24, mirrored: false },
  turkish: { size: 8, pieces: 32, mirrored: false, all: true },
  antidraughts: { size: 10, pieces: 40, mirrored: false },
  breakthrough: { size: 10, pieces: 40, mirrored: false },
  killer: { size: 10, pieces: 40, mirrored: false },
  pool: { size: 8, pieces: 24, mirrored: false },
  portuguese: { size: 8, pieces: 24, mirrored: true },
  frisian: { size: 10, pieces: 40, mirrored: false },
  frysk: { size: 10, pieces: 10, mirrored: false },
  canadian: { size: 12, pieces: 60, mirrored: false },
};

/** The variant keys of the proto's `Variant` enum (VARIANT_FOO = n -> "foo"), read from the proto. */
const PROTO_VARIANTS = [...readFileSync(join(WEB, "..", "proto", "draughts", "v1", "common.proto"), "utf8").matchAll(/^\s*VARIANT_(\w+)\s*=\s*\d+;/gm)]
  .map((m) => m[1].toLowerCase())
  .filter((k) => k !== "unspecified");

const pieces = (p) => p.evaluate(() => [...document.querySelectorAll("g[data-piece]")].map((g) => `${g.dataset.sq}:${g.dataset.piece}`).sort().join(" "));

/** A lobby number (players online, seeking, games in progress, lobby seeks) as the page shows it. */
const lobbyNumber = (page, testid) => page.evaluate((t) => Number(document.querySelector(`[data-testid=${t}]`)?.dataset.n ?? -1), testid);

/** Waits until a lobby number satisfies `ok` (WatchLobby sends a change within about 2 s). */
async function waitLobbyNumber(page, testid, ok, what, timeout = 15_000) {
  const end = Date.now() + timeout;
  let n = -1;
  while (Date.now() < end) {
    n = await lobbyNumber(page, testid);
    if (ok(n)) return n;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${testid} is ${n}, expected ${what}`);
}

/** Opens the lobby and toggles the quick-seek pools given by id (variant and casual/rated picked first). */
async function pickPools(page, ids) {
  await page.waitForSelector("[data-testid=pools][data-loaded=true]");
  for (const id of ids) {
    const [variant, , kind] = id.split("-");
    await page.selectOption("[data-testid=qs-variant]", variant);
    await page.selectOption("[data-testid=qs-rated]", kind);
    await page.click(`[data-testid=pool][data-pool="${id}"]`);
    assert.equal(await page.getAttribute(`[data-testid=pool][data-pool="${id}"]`, "aria-pressed"), "true");
  }
}

async function identityOf(page) {
  await page.waitForFunction(() => /\((guest|player|account), [^)]+\)/.test(document.querySelector("[data-testid=identity]")?.textContent ?? ""));
  return (await page.textContent("[data-testid=identity]")).match(/\((?:guest|player|account), ([^)]+)\)/)[1];
}

let redis;
let server;
let browser;
const metrics = {};

before(async () => {
  redis = await startRedis();
  server = await startDraughtsd({ redisUrl: redis.url });
  browser = await launchBrowser();
});

after(async () => {
  writeFileSync(join(outDir(), "metrics.json"), JSON.stringify(metrics, null, 2));
  await browser?.close();
  await server?.stop();
  server?.cleanup();
  await redis?.stop();
});

/** Sets the lobby's choices (the lobby keeps them in localStorage for the next visit). */
async function choose(page, { variant, time = "5+3", color = "white", level = "1" }) {
  await page.goto(`${server.url}/#/`);
  await page.selectOption("[data-testid=variant]", variant);
  await page.waitForSelector(`.preview[data-variant=${variant}] g[data-piece]`);
  // Levels 1-8, house rules, lobby offers and named challenges are under "more options".
  await page.evaluate(() => (document.querySelector("[data-testid=more-options]").open = true));
  await page.selectOption("[data-testid=time]", time);
  await page.selectOption("[data-testid=color]", color);
  await page.selectOption("[data-testid=level]", level);
}

async function gameId(page) {
  await page.waitForURL(/#\/game\//);
  return page.url().split("#/game/")[1];
}

/** Plays random moves through the UI while it is this page's turn, up to `plies` of its own. */
async function playOwnMoves(page, plies) {
  for (let i = 0; i < plies; i++) {
    if (!(await waitForTurn(page))) return false;
    await playRandomMove(page);
  }
  return (await statusOf(page)).outcome === ONGOING;
}

describe("web client", () => {
  // No console error in any test (a test that stops the server says which errors it expects).
  afterEach(() => assert.deepEqual(takeConsoleErrors(), [], "console errors"));

  test("the API reference is served beside the client", async () => {
    const answer = await fetch(`${server.url}/api-reference.md`);
    assert.equal(answer.status, 200);
    const body = await answer.text();
    assert.match(body, /^# API reference: `draughts\.v1`/);
    assert.match(body, /#### rpc SignUp\(draughts\.v1\.SignUpRequest\) returns \(draughts\.v1\.Session\)/);
  });

  test("first paint, and every variant's board drawn and kept as a screenshot", async () => {
    // First paint in five fresh browser contexts (no cache, a new guest each): the board of the lobby.
    const loads = [];
    for (let i = 0; i < 5; i++) {
      const fresh = await newPage(browser);
      await fresh.goto(`${server.url}/#/?variant=international`);
      await fresh.waitForSelector(".preview[data-variant=international] g[data-piece]");
      loads.push(
        await fresh.evaluate(() => ({
          firstContentfulPaintMs: Math.round(performance.getEntriesByName("first-contentful-paint")[0]?.startTime ?? -1),
          boardPaintedMs: Math.round(performance.getEntriesByName("board-painted")[0]?.startTime ?? -1),
          transferredBytes: performance.getEntriesByType("resource").reduce((n, r) => n + r.transferSize, 0) + performance.getEntriesByType("navigation")[0].transferSize,
        })),
      );
      await fresh.context().close();
    }
    metrics.firstLoads = loads;
    metrics.loadAverage = loadavg();
    // The median, not every load: on a shared machine a single load can wait for the CPU. The bar is
    // 1 s; on a machine with more runnable work than twice its cores (load average, 1 minute) the
    // figure is recorded and only a gross regression (3 s) fails.
    const board = loads.map((l) => l.boardPaintedMs).sort((a, b) => a - b);
    const busy = loadavg()[0] > 2 * availableParallelism();
    metrics.firstPaintBarMs = busy ? 3000 : 1000;
    assert.ok(board[0] > 0, "the board was painted");
    assert.ok(board[2] < metrics.firstPaintBarMs, `median board paint ${board[2]} ms (all: ${board.join(", ")}; load average ${loadavg()[0]})`);
    const page = await newPage(browser);
    const dir = outDir("boards");
    // Every variant of the proto is in this table and in the lobby's list, and the server has quick-
    // pairing pools for each.
    assert.deepEqual(Object.keys(VARIANTS).sort(), [...PROTO_VARIANTS].sort(), "the board table covers the proto's Variant enum");
    await page.goto(`${server.url}/#/`);
    assert.deepEqual(await page.$$eval("[data-testid=variant] option", (os) => os.map((o) => o.value)), PROTO_VARIANTS, "the lobby offers every variant");
    await page.waitForSelector("[data-testid=pools][data-loaded=true]");
    for (const variant of PROTO_VARIANTS) {
      await page.selectOption("[data-testid=qs-variant]", variant);
      assert.ok((await page.locator("[data-testid=pool]").count()) > 0, `the server has ${variant} pools`);
    }
    for (const [variant, want] of Object.entries(VARIANTS)) {
      await page.goto(`${server.url}/#/?variant=${variant}`);
      await page.waitForSelector(`.preview[data-variant=${variant}] g[data-piece]`);
      const seen = await page.evaluate(() => {
        const svg = document.querySelector(".preview svg.board");
        const sq = (name) => svg.querySelector(`g[data-sq="${name}"]`);
        const box = (name) => sq(name).getBoundingClientRect();
        return {
          size: Number(svg.dataset.size),
          squares: svg.querySelectorAll("g[data-sq]").length,
          pieces: svg.querySelectorAll("g[data-piece]").length,
          a1Dark: sq("a1").querySelector("rect").classList.contains("dark"),
          a1Turkish: sq("a1").querySelector("rect").classList.contains("turkish"),
          a1BottomLeft: box("a1").left <= box("b1").left && box("a1").top > box("a2").top,
          numbers: [...svg.querySelectorAll("text.num")].map((t) => t.textContent),
          coords: svg.querySelectorAll("text.coord").length,
        };
      });
      assert.equal(seen.size, want.size, variant);
      assert.equal(seen.squares, want.size * want.size, variant);
      assert.equal(seen.pieces, want.pieces, variant);
      assert.ok(seen.a1BottomLeft, `${variant}: a1 is White's bottom-left corner`);
      if (want.all) assert.ok(seen.a1Turkish, "turkish: every square is played on");
      else assert.equal(seen.a1Dark, !want.mirrored, `${variant}: a1 ${want.mirrored ? "light (mirrored board)" : "dark"}`);
      if (seen.numbers.length) {
        // Numbered boards show 1..N on the playable squares.
        const n = (want.size * want.size) / 2;
        assert.deepEqual([...seen.numbers].map(Number).sort((a, b) => a - b), Array.from({ length: n }, (_, i) => i + 1), variant);
      } else assert.ok(seen.coords >= 2 * want.size - 1, `${variant}: coordinates shown`);
      await page.locator(".preview svg.board").screenshot({ path: join(dir, `${variant}.png`) });
    }
    // A phone-sized screen: the board fits the width.
    const phone = await newPage(browser, { phone: true });
    await phone.goto(`${server.url}/#/?variant=international`);
    await phone.waitForSelector(".preview[data-variant=international] g[data-piece]");
    const width = await phone.evaluate(() => document.querySelector(".preview svg.board").getBoundingClientRect().width);
    assert.ok(width > 300 && width <= 390, `board ${width}px wide on a 390px screen`);
    await phone.screenshot({ path: join(dir, "phone-lobby.png") });
    await phone.context().close();
    await page.context().close();
  });

  for (const variant of ["english", "russian"]) {
    test(`a full game against the computer (${variant}, ai:1)`, async () => {
      const page = await newPage(browser);
      await choose(page, { variant, color: "white", level: "1" });
      await page.click("[data-testid=play-ai]");
      await gameId(page);
      await page.waitForSelector("g[data-piece]");
      assert.match(await page.textContent("[data-testid=name-black]"), /computer/);
      // Play up to 150 of our own moves; the game ends by the rules (or we resign at the cap).
      const stillOn = await playOwnMoves(page, 150);
      if (stillOn) await page.click("[data-testid=resign]");
      await page.waitForFunction(() => Number(document.querySelector("[data-testid=status]").dataset.outcome) > 1);
      const s = await statusOf(page);
      assert.ok(s.ply >= 2, `${s.ply} plies`);
      assert.match(s.text, /wins|draw/);
      const listed = await page.locator("[data-testid=moves] button.mv").count();
      assert.equal(listed, s.ply, "every move is in the move list");
      metrics[`game_${variant}`] = { plies: s.ply, result: s.text, resigned: stillOn };
      await page.screenshot({ path: join(outDir("games"), `${variant}-ai1.png`) });
      await page.context().close();
    });
  }

  test("an illegal click is refused and nothing is sent (on a phone-sized screen)", async () => {
    const page = await newPage(browser, { phone: true });
    // English: Black moves first; the player takes Black.
    await choose(page, { variant: "english", color: "black", level: "1" });
    await page.click("[data-testid=play-ai]");
    await gameId(page);
    await waitForTurn(page);
    assert.equal(await page.getAttribute("svg.board", "data-flipped"), "true", "Black's side at the bottom");
    // A white (the opponent's) piece, an empty square nothing can reach, then a move that is not legal.
    await page.click('g[data-sq="a3"]');
    await page.click('g[data-sq="d4"]');
    let s = await statusOf(page);
    assert.equal(s.ply, 0);
    assert.equal(s.refused, 2);
    await page.click('g[data-sq="d6"]'); // a black man that can move (to c5 or e5)
    await page.click('g[data-sq="d4"]'); // two rows ahead, nothing to capture: no move goes there
    s = await statusOf(page);
    assert.equal(s.ply, 0);
    assert.equal(s.refused, 3);
    assert.match(await page.textContent("[data-testid=toast]"), /Not a legal move/);
    await page.click('g[data-sq="c5"]');
    await page.waitForFunction(() => Number(document.querySelector("[data-testid=status]").dataset.ply) >= 1);
    await page.screenshot({ path: join(outDir("games"), "phone-game.png") });
    await page.context().close();
  });

  test("hot-seat: two players on one screen, a draw offered and accepted", async () => {
    const page = await newPage(browser);
    await choose(page, { variant: "international" });
    await page.click("[data-testid=hotseat]");
    await gameId(page);
    assert.match(await page.textContent("[data-testid=name-black]"), /Player 2/);
    for (let i = 0; i < 6; i++) {
      assert.ok(await waitForTurn(page));
      await playRandomMove(page);
    }
    assert.equal((await statusOf(page)).ply, 6);
    await page.click("[data-testid=offer-draw]");
    await page.click("[data-testid=accept-draw]");
    await page.waitForFunction(() => Number(document.querySelector("[data-testid=status]").dataset.outcome) === 4);
    // Rematch on the same screen: a new game with the colours swapped, both sides still here.
    await page.click("[data-testid=rematch]");
    await page.waitForFunction(() => document.querySelector("[data-testid=status]")?.dataset.ply === "0");
    assert.match(await page.textContent("[data-testid=name-white]"), /Player 2/);
    assert.ok(await waitForTurn(page));
    await page.context().close();
  });

  test("a capture named by its landing squares when two captures end on one square", async () => {
    const page = await newPage(browser);
    // English, White to move: the man on c1 (30) captures to c5 (14) over b2 and b4 by a3, or over d2
    // and d4 by e3: the destination alone is ambiguous.
    await page.goto(`${server.url}/#/?variant=english&fen=${encodeURIComponent("W:W30:B17,18,25,26")}`);
    await page.waitForSelector(".preview[data-variant=english] g[data-piece]");
    assert.equal(await page.locator(".preview g[data-piece]").count(), 5);
    await page.click("[data-testid=hotseat]");
    await gameId(page);
    assert.ok(await waitForTurn(page));
    await page.click('g[data-sq="c1"]');
    assert.deepEqual(await page.evaluate(() => [...document.querySelectorAll("g.landing")].map((g) => g.dataset.sq).sort()), ["a3", "e3"]);
    await page.click('g[data-sq="c5"]');
    let s = await statusOf(page);
    assert.equal(s.ply, 0, "nothing sent for an ambiguous destination");
    assert.equal(s.refused, 1);
    assert.match(await page.textContent("[data-testid=toast]"), /several captures end on 14/);
    await page.click('g[data-sq="a3"]');
    await page.click('g[data-sq="c5"]');
    await page.waitForFunction(() => Number(document.querySelector("[data-testid=status]").dataset.ply) === 1);
    const left = await page.evaluate(() => [...document.querySelectorAll("g[data-piece]")].map((g) => `${g.dataset.sq}:${g.dataset.piece}`).sort());
    assert.deepEqual(left, ["c5:white-man", "d2:black-man", "d4:black-man"]);
    assert.equal(await page.textContent("[data-testid=moves] button.mv"), "30x21x14");
    await page.context().close();
  });

  test("challenge by link, a spectator tab following the game, rematch offered and accepted", async () => {
    const ann = await newPage(browser);
    await choose(ann, { variant: "english", color: "black" });
    await ann.click("[data-testid=challenge-link]");
    await ann.waitForSelector("[data-testid=challenge-url]");
    const link = await ann.inputValue("[data-testid=challenge-url]");
    const bob = await newPage(browser);
    await bob.goto(link);
    await bob.click("[data-testid=accept]");
    const id = await gameId(bob);
    assert.equal(await gameId(ann), id, "the inviter follows into the game");
    const spectator = await newPage(browser);
    await spectator.goto(`${server.url}/#/game/${id}`);
    await spectator.waitForSelector("g[data-piece]");
    for (let i = 0; i < 3; i++) {
      for (const p of [ann, bob]) {
        assert.ok(await waitForTurn(p));
        await playRandomMove(p);
      }
    }
    const ply = (await statusOf(bob)).ply;
    assert.equal(ply, 6);
    await ann.waitForFunction((n) => Number(document.querySelector("[data-testid=status]").dataset.ply) === n, ply);
    await spectator.waitForFunction((n) => Number(document.querySelector("[data-testid=status]").dataset.ply) === n, ply).catch(async (e) => {
      throw new Error(`spectator at ${JSON.stringify(await statusOf(spectator))}, players at ${ply}; ${await spectator.evaluate(() => JSON.stringify(window.__draughtsCalls ?? []))}`, { cause: e });
    });
    assert.equal(await pieces(spectator), await pieces(ann), "the spectator sees the players' position");
    assert.equal(await spectator.locator("circle.piece.movable").count(), 0, "a spectator cannot move");
    assert.equal(await spectator.locator("[data-testid=resign]").count(), 0);
    // Counted by the server (GetGame's spectators: this one, not the players).
    await spectator.waitForFunction(() => document.querySelector("[data-testid=watching]").dataset.spectators === "1");
    assert.equal(await spectator.textContent("[data-testid=watching]"), "You are watching this game · 1 watching");
    assert.equal(await ann.isHidden("[data-testid=watching]"), true);
    await ann.click("[data-testid=resign]");
    await spectator.waitForFunction(() => Number(document.querySelector("[data-testid=status]").dataset.outcome) > 1);
    // The result in the client's words, on the status line and the banner (the spectator is no player).
    assert.equal((await statusOf(spectator)).text, "White wins · resignation");
    await spectator.waitForSelector("[data-testid=result-banner]:not([hidden])");
    assert.equal(await spectator.getAttribute("[data-testid=result-banner]", "data-kind"), "neutral");
    await bob.waitForSelector("[data-testid=result-banner][data-kind=won]");
    assert.match(await bob.textContent("[data-testid=result-text]"), /^You won · White wins · resignation/);
    await ann.click("[data-testid=rematch]");
    await bob.click("[data-testid=accept-invitation]");
    await bob.waitForURL((u) => u.hash.startsWith("#/game/") && !u.hash.endsWith(id));
    const next = await gameId(bob);
    await ann.waitForURL(new RegExp(next));
    for (const p of [ann, bob, spectator]) await p.context().close();
  });

  test("quick seek: the lobby counts the seeker, a closed stream withdraws it, two contexts paired into one game", async () => {
    const pools = ["english-5+0-casual", "russian-3+0-casual"];
    const watcher = await newPage(browser);
    await watcher.goto(`${server.url}/#/`);
    await watcher.waitForSelector("[data-testid=lobby-stats][data-live=true] [data-testid=lobby-seeking]");
    await watcher.selectOption("[data-testid=qs-variant]", "english");
    await watcher.selectOption("[data-testid=qs-rated]", "casual");
    await waitLobbyNumber(watcher, "lobby-seeking", (n) => n === 0, "0 before anyone seeks");
    const online = await lobbyNumber(watcher, "lobby-online");
    assert.ok(online >= 1, `the watcher is online (${online})`);

    // Ann seeks in two pools of two variants: the lobby counts her in each.
    const ann = await newPage(browser);
    await ann.goto(`${server.url}/#/`);
    await pickPools(ann, pools);
    await ann.click("[data-testid=seek]");
    await ann.waitForSelector("[data-testid=seek-state][data-state=waiting]");
    assert.match(await ann.textContent("[data-testid=seek-state]"), /Waiting for an opponent in 2 pools/);
    await waitLobbyNumber(watcher, "lobby-seeking", (n) => n === 2, "2 (one seeker in two pools)");
    await watcher.waitForSelector(`[data-pool="${pools[0]}"][data-seeking="1"]`);
    await ann.screenshot({ path: join(outDir("games"), "lobby-seeking.png"), fullPage: true });
    await waitLobbyNumber(watcher, "lobby-online", (n) => n >= 2, "at least the watcher and Ann online");
    // Cancelled by the player: withdrawn. (A seek that nothing withdrew would lapse 15 s after its
    // stream went away, so these waits stop at 8 s: the count must drop because of the withdrawal.)
    await ann.click("[data-testid=cancel-seek]");
    await ann.waitForSelector("[data-testid=seek-state][data-state=cancelled]");
    await waitLobbyNumber(watcher, "lobby-seeking", (n) => n === 0, "0 after the cancel", 8000);
    // A reload (the tab gone) closes the stream without a CancelSeek: withdrawn all the same.
    await ann.click("[data-testid=seek]");
    await ann.waitForSelector("[data-testid=seek-state][data-state=waiting]");
    await waitLobbyNumber(watcher, "lobby-seeking", (n) => n === 2, "2 after seeking again");
    const reloaded = Date.now();
    await ann.reload();
    await waitLobbyNumber(watcher, "lobby-seeking", (n) => n === 0, "0 once the stream is closed", 8000);
    metrics.quickSeekWithdrawnAfterReloadMs = Date.now() - reloaded;

    // Ann seeks again (the lobby remembered her pools), then Bob in one of them: paired.
    await ann.waitForSelector("[data-testid=pools][data-loaded=true]");
    await ann.click("[data-testid=seek]");
    await ann.waitForSelector("[data-testid=seek-state][data-state=waiting]");
    const bob = await newPage(browser);
    await bob.goto(`${server.url}/#/`);
    await pickPools(bob, [pools[0]]);
    await bob.click("[data-testid=seek]");
    const id = await gameId(bob);
    assert.equal(await gameId(ann), id, "both seekers are in the same game");
    for (const p of [ann, bob]) await p.waitForSelector("g[data-piece]");
    assert.equal(await pieces(ann), await pieces(bob));
    // English: Black moves first; Black's board is flipped.
    const annBlack = (await ann.getAttribute("svg.board", "data-flipped")) === "true";
    const [black, white] = annBlack ? [ann, bob] : [bob, ann];
    assert.equal(await white.getAttribute("svg.board", "data-flipped"), "false", "one plays White, the other Black");
    assert.ok(await waitForTurn(black));
    await playRandomMove(black);
    await white.waitForFunction(() => Number(document.querySelector("[data-testid=status]").dataset.ply) === 1);
    assert.equal(await pieces(white), await pieces(black), "the move is seen by the opponent");
    assert.equal(await white.textContent("[data-testid=moves] button.mv"), await black.textContent("[data-testid=moves] button.mv"));
    assert.match(await white.textContent("[data-testid=name-black]"), /\S/);
    // The lobby: nobody seeking, the game counted, the pool's typical wait known.
    await waitLobbyNumber(watcher, "lobby-seeking", (n) => n === 0, "0 after the pairing");
    await waitLobbyNumber(watcher, "lobby-games", (n) => n >= 1, "at least the paired game");
    await watcher.waitForFunction((pool) => Number(document.querySelector(`[data-pool="${pool}"]`)?.dataset.wait) > 0, pools[0], { timeout: 15_000 });
    metrics.quickSeek = { typicalWaitMs: Number(await watcher.getAttribute(`[data-pool="${pools[0]}"]`, "data-wait")) };
    await white.click("[data-testid=resign]");
    for (const p of [ann, bob, watcher]) await p.context().close();
  });

  test("a lobby seek accepted from another context; a challenge to a named player declined, then accepted", async () => {
    const ann = await newPage(browser);
    await choose(ann, { variant: "english", time: "3+2", color: "white" });
    // With a house rule: the seek carries it, and every list shows it.
    await ann.check("[data-testid=opt-no-mandatory-capture]");
    await ann.click("[data-testid=lobby-offer]");
    const mine = ann.locator("[data-testid=lobby-seek]", { has: ann.locator("[data-testid=cancel-lobby-seek]") });
    await mine.waitFor();
    const seekId = await mine.getAttribute("data-seek-id");
    assert.match(await mine.textContent(), /English[^(]* \(house rules: no mandatory capture\).*3\+2.*casual.*plays White/);
    const bob = await newPage(browser);
    await bob.goto(`${server.url}/#/`);
    // Bob's lobby lists it (WatchLobby's count of lobby seeks brings a new list).
    await bob.waitForSelector(`[data-seek-id="${seekId}"] [data-testid=accept-lobby-seek]`, { timeout: 15_000 });
    assert.match(await bob.textContent(`[data-seek-id="${seekId}"]`), /house rules: no mandatory capture/, "the accepter sees the terms");
    await bob.screenshot({ path: join(outDir("games"), "lobby-seeks.png"), fullPage: true });
    await bob.click(`[data-seek-id="${seekId}"] [data-testid=accept-lobby-seek]`);
    const id = await gameId(bob);
    assert.equal(id, seekId, "the game has the seek's id");
    assert.equal(await gameId(ann), id, "the seeker follows into the game");
    await ann.waitForSelector("g[data-piece]");
    assert.equal(await ann.getAttribute("svg.board", "data-flipped"), "false", "the seeker plays White as offered");

    // Carol challenges Dave by his id; Dave declines with a reason, then accepts a second challenge.
    const carol = await newPage(browser);
    const dave = await newPage(browser);
    await dave.goto(`${server.url}/#/`);
    const daveId = await identityOf(dave);
    await choose(carol, { variant: "russian", time: "1+0", color: "black" });
    await carol.fill("[data-testid=challenge-player-id]", daveId);
    await carol.click("[data-testid=challenge-player]");
    await carol.waitForSelector("[data-testid=challenged]");
    const invite = dave.locator("[data-testid=incoming-invitation]");
    await invite.waitFor({ timeout: 15_000 });
    assert.match(await invite.textContent(), /invites you: Russian, 1\+0/);
    await invite.locator("[data-testid=decline-reason]").selectOption(String(2)); // DECLINE_REASON_TOO_FAST
    await invite.locator("[data-testid=decline-invitation]").click();
    await carol.waitForSelector("[data-testid=invitation-state][data-state=declined]", { timeout: 15_000 });
    await carol.screenshot({ path: join(outDir("games"), "challenge-declined.png") });
    assert.match(await carol.textContent("[data-testid=invitation-state]"), /declined \(too fast\)/);
    await carol.goto(`${server.url}/#/`);
    await carol.fill("[data-testid=challenge-player-id]", daveId);
    await carol.fill("[data-testid=opt-move-limit]", "30");
    await carol.click("[data-testid=challenge-player]");
    await carol.waitForSelector("[data-testid=challenged]");
    // The invited player reads the house rule before accepting.
    await invite.waitFor({ timeout: 15_000 });
    assert.match(await invite.textContent(), /Russian \(house rules: draw after 30 moves each without progress\), 1\+0/);
    await dave.click("[data-testid=accept-invitation]", { timeout: 15_000 });
    const game = await gameId(dave);
    assert.equal(await gameId(carol), game, "the challenger follows into the game");
    await carol.waitForSelector("g[data-piece]");
    assert.equal(await carol.getAttribute("svg.board", "data-flipped"), "true", "the challenger plays Black as asked");
    for (const p of [ann, bob, carol, dave]) await p.context().close();
  });

  test("analysis of a finished game: evaluation graph and mistakes marked", async () => {
    const page = await newPage(browser);
    // A pasted identity-provider token: the sign-in page's advanced option.
    await page.goto(`${server.url}/#/signin`);
    await page.click("[data-testid=token-sign-in] summary");
    await page.fill("[data-testid=player-token]", playerToken("e2e-analyst", "Analyst"));
    await page.click("[data-testid=sign-in]");
    await page.waitForFunction(() => document.querySelector("[data-testid=identity]")?.textContent.includes("player:e2e-analyst"));
    await choose(page, { variant: "english", color: "white", level: "1" });
    await page.click("[data-testid=play-ai]");
    await gameId(page);
    await playOwnMoves(page, 8);
    if ((await statusOf(page)).outcome === ONGOING) await page.click("[data-testid=resign]");
    await page.waitForFunction(() => Number(document.querySelector("[data-testid=status]").dataset.outcome) > 1);
    const plies = (await statusOf(page)).ply;
    await page.click("[data-testid=analyse]");
    await page.waitForSelector("[data-testid=analysis-state][data-done=true]", { timeout: 30_000 });
    const seen = await page.evaluate(() => ({
      rows: document.querySelectorAll("[data-testid=analysis-moves] button.mv").length,
      judged: [...document.querySelectorAll("[data-testid=analysis-moves] button.mv")].map((b) => b.dataset.judgement),
      marks: document.querySelectorAll("[data-testid=eval-graph] circle.mark").length,
      curve: document.querySelector("[data-testid=eval-graph] polyline")?.getAttribute("points").split(" ").length,
      summary: document.querySelector("[data-testid=analysis-summary]").textContent,
    }));
    assert.equal(seen.rows, plies);
    assert.equal(seen.curve, plies + 1, "one point per ply and the start");
    assert.ok(seen.judged.every((j) => ["good", "inaccuracy", "mistake", "blunder"].includes(j)), seen.judged.join());
    assert.equal(seen.marks, seen.judged.filter((j) => j !== "good").length, "every mistake is marked on the graph");
    assert.match(seen.summary, /White: .*Black: /);
    metrics.analysis = { plies, marked: seen.marks };
    await page.click("[data-testid=analysis-moves] button.mv >> nth=0");
    await page.screenshot({ path: join(outDir("games"), "analysis.png") });
    // A guest may not queue analysis: the page says what is needed.
    const guest = await newPage(browser);
    await guest.goto(`${server.url}/#/analysis/${page.url().split("#/analysis/")[1]}`);
    await guest.waitForSelector("[data-testid=analysis-state][data-error=PermissionDenied]");
    // ... and offers an account in one click (accounts carry the analysis scope).
    assert.match(await guest.textContent("[data-testid=analysis-state]"), /Sign up to analyse/);
    assert.doesNotMatch(await guest.textContent("[data-testid=analysis-state]"), /identity provider/);
    await guest.context().close();
    await page.context().close();
  });

  test("the game goes on after the server restarts", async () => {
    // While the server is down the browser logs the refused connections.
    expectConsoleErrors(/ERR_CONNECTION_REFUSED|ERR_EMPTY_RESPONSE|ERR_CONNECTION_RESET|Failed to load resource|Failed to fetch/);
    const own = await startRedis();
    let srv = await startDraughtsd({ redisUrl: own.url });
    try {
      const page = await newPage(browser);
      await page.goto(`${srv.url}/#/`);
      await page.selectOption("[data-testid=variant]", "english");
      await page.waitForSelector(".preview[data-variant=english] g[data-piece]");
      await page.click("[data-testid=hotseat]");
      await gameId(page);
      for (let i = 0; i < 2; i++) {
        await waitForTurn(page);
        await playRandomMove(page);
      }
      // A quick seek open across the same restart: the client seeks again by itself.
      const seeker = await newPage(browser);
      await seeker.goto(`${srv.url}/#/`);
      await pickPools(seeker, ["international-10+0-casual"]);
      await seeker.click("[data-testid=seek]");
      await seeker.waitForSelector("[data-testid=seek-state][data-state=waiting]");
      const seekBefore = await seeker.getAttribute("[data-testid=seek-state]", "data-seek-id");
      await srv.stop();
      await page.waitForSelector("[data-testid=connection][data-state=reconnecting]");
      assert.match(await page.textContent("[data-testid=connection]"), /reconnecting/);
      await seeker.waitForSelector("[data-testid=seek-state][data-state=reconnecting]");
      srv = await startDraughtsd({ redisUrl: own.url, port: srv.port, dataDir: srv.dataDir });
      // Back: the page says so for a moment.
      await page.waitForSelector("[data-testid=connection][data-state=restored]", { state: "attached", timeout: 20_000 });
      assert.match(await page.textContent("[data-testid=connection]"), /Connection restored/);
      assert.ok(await waitForTurn(page));
      await playRandomMove(page);
      assert.equal((await statusOf(page)).ply, 3);
      await seeker.waitForSelector("[data-testid=seek-state][data-state=waiting]", { timeout: 20_000 });
      await seeker.waitForSelector('[data-pool="international-10+0-casual"][data-seeking="1"]', { timeout: 15_000 });
      metrics.seekAcrossRestart = { sameSeek: seekBefore === (await seeker.getAttribute("[data-testid=seek-state]", "data-seek-id")) };
      await seeker.context().close();
      await page.context().close();
    } finally {
      await srv.stop();
      srv.cleanup();
      await own.stop();
    }
  });
});

/** Console errors and uncaught exceptions of a page (the account flows must have none). */
function consoleErrors(page) {
  const errors = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(e.message));
  return errors;
}

/** Who the lobby says this page plays as: kind (guest, account, player) and player id. */
async function whoIs(page, kind) {
  await page.goto(`${server.url}/#/`);
  const want = kind ?? "guest|player|account";
  await page.waitForFunction((k) => new RegExp(`\\((${k}), [^)]+\\)`).test(document.querySelector("[data-testid=identity]")?.textContent ?? ""), want, { timeout: 15_000 }).catch(async (e) => {
    const seen = await page.evaluate(() => ({
      identity: document.querySelector("[data-testid=identity]")?.textContent,
      notice: document.querySelector("#notice")?.textContent,
      refreshes: window.__draughtsRefreshes,
      calls: window.__draughtsCalls,
      session: localStorage.getItem("draughts.session"),
    }));
    throw new Error(`not ${want}: ${JSON.stringify(seen)}`, { cause: e });
  });
  const m = (await page.textContent("[data-testid=identity]")).match(/\((guest|player|account), ([^)]+)\)/);
  return { kind: m[1], id: m[2] };
}

const storedSession = (page) => page.evaluate(() => JSON.parse(localStorage.getItem("draughts.session") ?? "null"));

/**
 * Makes the stored access token look about to expire: the next load refreshes the session. The page is
 * first taken off the client (a page of the origin without it): a live client would refresh at once,
 * and a reload that cuts off its answer loses the new refresh token (the server took the old one).
 */
const makeStale = async (page, refreshToken) => {
  // (The page's context blocks the service worker: a worker's requests bypass page.route.)
  await page.route("**/e2e-no-client", (r) => r.fulfill({ status: 200, contentType: "text/html", body: "<!doctype html><title>no client</title>" }));
  await page.goto(`${server.url}/e2e-no-client`);
  await page.evaluate((rt) => {
    const s = JSON.parse(localStorage.getItem("draughts.session"));
    s.accessExpiresAtMs = Date.now() + 5_000;
    s.obtainedAtMs = Date.now() - 900_000;
    if (rt) s.refreshToken = rt;
    s.savedAtMs = Date.now();
    localStorage.setItem("draughts.session", JSON.stringify(s));
  }, refreshToken);
};

const refreshCalls = (page) => page.evaluate(() => window.__draughtsRefreshes ?? 0);

describe("accounts", () => {
  afterEach(() => assert.deepEqual(takeConsoleErrors(), [], "console errors"));
  const username = `ann${Date.now() % 1_000_000}`;
  let password = "correct horse battery";
  const ctx = {};

  test("accounts: a guest who played signs up from the analysis button and keeps the game; the session survives a reload", async () => {
    const page = await newPage(browser, { serviceWorkers: "block" });
    const errors = consoleErrors(page);
    const guest = await whoIs(page, "guest");
    // A finished game as a guest (against the computer: casual).
    await choose(page, { variant: "english", color: "white", level: "1" });
    await page.click("[data-testid=play-ai]");
    const id = await gameId(page);
    await playOwnMoves(page, 2);
    if ((await statusOf(page)).outcome === ONGOING) await page.click("[data-testid=resign]");
    await page.waitForFunction(() => Number(document.querySelector("[data-testid=status]").dataset.outcome) > 1);
    // A guest may not analyse: the button offers an account instead, and comes back to the analysis.
    assert.equal(await page.locator("[data-testid=analyse]").count(), 0);
    await page.click("[data-testid=signup-to-analyse]");
    await page.waitForSelector("[data-testid=signup]");
    assert.match(await page.textContent("[data-testid=adopt-note]"), /move to the new account/);
    await page.fill("[data-testid=username]", username);
    await page.fill("[data-testid=password]", password);
    await page.fill("[data-testid=display-name]", "Ann");
    await page.click("[data-testid=signup-submit]");
    await page.waitForURL(new RegExp(`#/analysis/${id}`));
    await page.waitForSelector("[data-testid=analysis-state][data-done=true]", { timeout: 30_000 });
    const account = await whoIs(page, "account");
    assert.match(account.id, /^user:/);
    assert.notEqual(account.id, guest.id);
    assert.equal(await page.textContent("[data-testid=nav-profile]"), "Ann");
    // The guest's game is the account's now (the server moves finished games within a few seconds:
    // the lobby reads the list once per visit, so look again).
    for (let i = 0; i < 20 && !(await page.locator(`.my-games a[href="#/game/${id}"]`).count()); i++) {
      await page.waitForTimeout(500);
      await page.reload();
      await page.waitForSelector(".my-games h3");
    }
    assert.ok((await page.locator(`.my-games a[href="#/game/${id}"]`).count()) > 0, "the adopted game is listed");
    const s = await storedSession(page);
    assert.match(s.refreshToken, /\S/);
    assert.equal(s.id, account.id);
    // A reload keeps the session.
    await page.reload();
    assert.deepEqual(await whoIs(page, "account"), account);
    assert.equal(await page.locator("[data-testid=notice]").count(), 0);
    ctx.page = page;
    ctx.account = account;
    ctx.aiGame = id;
    ctx.errors = errors;
  });

  test("accounts: the access token is refreshed once for two tabs, and a reused refresh token ends the session", async () => {
    const { page, account } = ctx;
    // Two tabs of one browser, both holding a session that is about to expire, loaded at once: one
    // refresh (the refresh token is single-use: a second use would end the session).
    const before = await storedSession(page);
    await makeStale(page);
    const other = await page.context().newPage();
    const otherErrors = consoleErrors(other);
    await Promise.all([page.goto(`${server.url}/#/`), other.goto(`${server.url}/#/`)]);
    for (const p of [page, other]) assert.deepEqual(await whoIs(p, "account"), account);
    await page.waitForFunction((rt) => JSON.parse(localStorage.getItem("draughts.session")).refreshToken !== rt, before.refreshToken);
    assert.equal((await refreshCalls(page)) + (await refreshCalls(other)), 1, "one RefreshSession for both tabs");
    const after = await storedSession(page);
    assert.ok(after.accessExpiresAtMs > Date.now() + 60_000, "a fresh access token");
    // Both tabs still work with the new tokens (no reuse was detected).
    await page.reload();
    assert.deepEqual(await whoIs(page, "account"), account);
    await other.close();
    assert.deepEqual(otherErrors, []);
    // An old refresh token sent again (a thief's replay): the server ends the session, the page says so
    // and plays as a guest.
    await makeStale(page, before.refreshToken);
    await page.goto(`${server.url}/#/`);
    await page.waitForSelector("[data-testid=notice]", { timeout: 15_000 });
    assert.match(await page.textContent("[data-testid=notice]"), /session has ended/);
    assert.equal((await whoIs(page, "guest")).kind, "guest");
    assert.equal(await storedSession(page), null);
  });


  test("accounts sign out, sign in again, a rated game shown on the profile, the game page and the leaderboard", async () => {
    const { page, account } = ctx;
    await page.click("[data-testid=nav-signin]");
    await page.fill("[data-testid=username]", username.toUpperCase()); // any letter case
    await page.fill("[data-testid=password]", password);
    await page.click("[data-testid=signin-submit]");
    assert.deepEqual(await whoIs(page, "account"), account);
    assert.equal(await page.locator("[data-testid=notice]").count(), 0, "signed in again: the notice is gone");
    await page.click("[data-testid=nav-signout]");
    const guest = await whoIs(page, "guest");
    assert.notEqual(guest.id, account.id);
    assert.equal(await storedSession(page), null);
    // A wrong password is refused (the server names the reason; the client words it).
    await page.click("[data-testid=nav-signin]");
    await page.fill("[data-testid=username]", username);
    await page.fill("[data-testid=password]", "not the password");
    await page.click("[data-testid=signin-submit]");
    await page.waitForFunction(() => document.querySelector("[data-testid=signin-error]")?.textContent);
    assert.equal(await page.textContent("[data-testid=signin-error]"), EN.errors.badCredentials);
    await page.fill("[data-testid=password]", password);
    await page.click("[data-testid=signin-submit]");
    assert.deepEqual(await whoIs(page, "account"), account);

    // A rated game against a guest (by link), resigned by the guest.
    await choose(page, { variant: "english", color: "white" });
    await page.check("[data-testid=rated]");
    await page.click("[data-testid=challenge-link]");
    await page.waitForSelector("[data-testid=challenge-url]");
    // The opponent is signed in too (games with a guest are not rated): an identity-provider player.
    const bob = await newPage(browser);
    const bobErrors = consoleErrors(bob);
    await bob.goto(`${server.url}/#/signin`);
    await bob.click("[data-testid=token-sign-in] summary");
    await bob.fill("[data-testid=player-token]", playerToken("e2e-bob", "Bob"));
    await bob.click("[data-testid=sign-in]");
    assert.equal((await whoIs(bob, "player")).id, "player:e2e-bob");
    await bob.goto(await page.inputValue("[data-testid=challenge-url]"));
    await bob.click("[data-testid=accept]");
    const id = await gameId(bob);
    assert.equal(await gameId(page), id);
    // The names link to the profiles.
    await page.waitForSelector(`[data-testid=name-white] a[href="#/profile/${encodeURIComponent(account.id)}"]`);
    for (let i = 0; i < 2; i++) {
      for (const p of [bob, page]) {
        assert.ok(await waitForTurn(p));
        await playRandomMove(p);
      }
    }
    await bob.click("[data-testid=resign]");
    await page.waitForFunction(() => Number(document.querySelector("[data-testid=status]").dataset.outcome) === 2);
    await bob.context().close();
    assert.deepEqual(bobErrors, []);

    // The profile: name, account, since, the provisional rating, one point in the history, the game.
    // The ratings service applies the game when it reads the game's end from its stream, so the page is
    // read again until the rating and its game count are there (up to about 40 s: a loaded machine once
    // took longer than the 15 s this waited before).
    let rows = 0;
    let counted = false;
    for (let i = 0; i < 80 && !(rows && counted); i++) {
      await page.goto(`${server.url}/#/profile/${encodeURIComponent(account.id)}`);
      await page.waitForSelector("[data-testid=profile][data-loaded=true]");
      rows = await page.locator("[data-testid=profile-rating]").count();
      counted = /rated games: 1 /.test(await page.textContent("[data-testid=profile-meta]"));
      if (!(rows && counted)) await page.waitForTimeout(500);
    }
    assert.equal(await page.textContent("[data-testid=profile-name]"), "Ann");
    assert.match(await page.textContent("[data-testid=profile-meta]"), /account · user:.* since .*rated games: 1 \(1 won, 0 drawn, 0 lost\)/);
    const row = page.locator("[data-testid=profile-rating]").first();
    assert.equal(await row.getAttribute("data-category"), "english");
    assert.equal(await row.getAttribute("data-provisional"), "true");
    assert.match(await row.textContent(), /provisional/);
    await page.waitForSelector("[data-testid=rating-chart][data-loaded=true]");
    assert.equal(await page.getAttribute("[data-testid=rating-chart]", "data-points"), "1");
    assert.equal(await page.locator("[data-testid=rating-chart] svg polyline").count(), 1);
    await page.screenshot({ path: join(outDir("accounts"), "profile.png"), fullPage: true });
    await page.click(`[data-testid=profile-game][href="#/game/${id}"]`);
    await page.waitForURL(new RegExp(`#/game/${id}`));
    // The game page shows the rating next to the name (provisional: "?").
    await page.reload();
    await page.waitForSelector("[data-testid=rating-white]", { timeout: 15_000 });
    assert.match(await page.textContent("[data-testid=rating-white]"), /\(\d+\?\)/);
    assert.equal(await page.locator("[data-testid=analyse]").count(), 1, "an account may analyse");

    // The leaderboard: established ratings only (nobody yet), then another category picked.
    await page.click("[data-testid=nav-leaderboard]");
    await page.selectOption("[data-testid=lb-variant]", "english");
    await page.waitForURL(/#\/leaderboard\/english\/any-speed/);
    await page.waitForSelector("[data-testid=lb-state][data-loaded=true]");
    assert.equal(await page.getAttribute("[data-testid=lb-state]", "data-entries"), "0");
    assert.match(await page.textContent("[data-testid=lb-state]"), /Nobody has an established rating/);
    await page.selectOption("[data-testid=lb-variant]", "international");
    await page.waitForURL(/#\/leaderboard\/international\/blitz/);
    await page.waitForSelector("[data-testid=lb-state][data-loaded=true]");
    assert.equal(await page.isDisabled("[data-testid=lb-prev]"), true);
    ctx.ratedGame = id;
  });

  test("accounts settings: display name, personal tokens, export, password, delete", async () => {
    const { page, account } = ctx;
    await page.click("[data-testid=nav-settings]");
    await page.waitForSelector("[data-testid=account-username]");
    assert.equal(await page.textContent("[data-testid=account-username]"), username);
    await page.fill("[data-testid=settings-display-name]", "Ann Two");
    await page.click("[data-testid=update-account-submit]");
    await page.waitForFunction(() => document.querySelector("[data-testid=nav-profile]")?.textContent === "Ann Two");
    // A personal token with the play scope: shown once, listed, usable, revoked.
    await page.fill("[data-testid=token-label]", "my bot");
    await page.click("[data-testid=create-token-submit]");
    await page.waitForSelector("[data-testid=new-token]");
    const token = await page.inputValue("[data-testid=new-token]");
    assert.match(token, /^dp_[0-9a-f]{64}$/);
    await page.waitForSelector("[data-testid=tokens][data-count='1']");
    assert.match(await page.textContent("[data-testid=token]"), /my bot · play · .*never used/);
    const script = await newPage(browser);
    await script.goto(`${server.url}/#/signin`);
    await script.click("[data-testid=token-sign-in] summary");
    await script.fill("[data-testid=player-token]", token);
    await script.click("[data-testid=sign-in]");
    assert.equal((await whoIs(script, "player")).id, account.id, "the token acts as the account");
    await script.context().close();
    await page.click("[data-testid=revoke-token]");
    await page.waitForSelector("[data-testid=tokens][data-count='0']");
    // Export: the account's finished games as one PDN file.
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("[data-testid=export]")]);
    await page.waitForSelector("[data-testid=export-state][data-games]");
    assert.ok(Number(await page.getAttribute("[data-testid=export-state]", "data-games")) >= 2, "the adopted game and the rated one");
    const file = join(outDir("accounts"), download.suggestedFilename());
    await download.saveAs(file);
    assert.match(readFileSync(file, "utf8"), /\[/);
    assert.match(download.suggestedFilename(), new RegExp(`^draughts-${username}\\.pdn$`));
    // A new password: a new session, still signed in.
    const newPassword = "battery staple horse";
    await page.fill("[data-testid=current-password]", password);
    await page.fill("[data-testid=new-password]", newPassword);
    await page.click("[data-testid=change-password-submit]");
    await page.waitForSelector("[data-testid=toast]:has-text('Password changed')");
    password = newPassword;
    assert.deepEqual(await whoIs(page, "account"), account);
    // Delete: confirmed with the password; back to a guest, and the username signs in no more.
    await page.goto(`${server.url}/#/settings`);
    await page.check("[data-testid=delete-confirm]");
    await page.fill("[data-testid=delete-password]", password);
    await page.click("[data-testid=delete-account-submit]");
    assert.equal((await whoIs(page, "guest")).kind, "guest");
    await page.goto(`${server.url}/#/signin`);
    await page.fill("[data-testid=username]", username);
    await page.fill("[data-testid=password]", password);
    await page.click("[data-testid=signin-submit]");
    await page.waitForFunction(() => document.querySelector("[data-testid=signin-error]")?.textContent);
    // The finished games keep the player id, shown as a deleted player.
    await page.goto(`${server.url}/#/profile/${encodeURIComponent(account.id)}`);
    await page.waitForSelector("[data-testid=profile][data-loaded=true]");
    assert.equal(await page.textContent("[data-testid=profile-name]"), "Deleted player");
    assert.deepEqual(ctx.errors, [], "no console errors");
    await page.context().close();
  });

  test("accounts expiry: the access token refreshed before it expires, and once after an UNAUTHENTICATED refusal", async () => {
    // A server of its own with the shortest access tokens it allows (60 s).
    const srv = await startDraughtsd({ env: { DRAUGHTS_ACCESS_TOKEN_TTL_SECS: "60" } });
    try {
      // No service worker: its requests would bypass page.route below.
      const page = await newPage(browser, { serviceWorkers: "block" });
      const errors = consoleErrors(page);
      await page.goto(`${srv.url}/#/signup`);
      await page.fill("[data-testid=username]", `exp${Date.now() % 1_000_000}`);
      await page.fill("[data-testid=password]", "correct horse battery");
      await page.click("[data-testid=signup-submit]");
      await page.waitForFunction(() => /\(account, /.test(document.querySelector("[data-testid=identity]")?.textContent ?? ""));
      const first = await storedSession(page);
      // The page refreshes by itself about 20 s before the minute is up: no call failed meanwhile.
      await page.waitForFunction((rt) => JSON.parse(localStorage.getItem("draughts.session") ?? "{}").refreshToken !== rt, first.refreshToken, { timeout: 60_000, polling: 500 });
      const second = await storedSession(page);
      assert.ok(Date.now() < first.accessExpiresAtMs, "refreshed before the first access token expired");
      assert.equal(await refreshCalls(page), 1);
      // Past the first token's minute: the page still acts as the account (GetAccount needs it).
      await page.waitForTimeout(Math.max(first.accessExpiresAtMs + 2_000 - Date.now(), 0));
      await page.goto(`${srv.url}/#/settings`);
      await page.waitForSelector("[data-testid=account-username]");
      // An access token the server refuses that this browser believes good (the server accepts an
      // expired one for a minute of leeway, so a token with a broken signature stands in for it): the
      // call is refused as UNAUTHENTICATED, the session refreshed once, the call sent again.
      await page.route("**/e2e-no-client", (r) => r.fulfill({ status: 200, contentType: "text/html", body: "<!doctype html><title>no client</title>" }));
      await page.goto(`${srv.url}/e2e-no-client`);
      await page.evaluate((old) => {
        const s = JSON.parse(localStorage.getItem("draughts.session"));
        s.accessToken = old.slice(0, -4) + (old.endsWith("AAAA") ? "BBBB" : "AAAA");
        s.accessExpiresAtMs = Date.now() + 600_000;
        s.savedAtMs = Date.now();
        localStorage.setItem("draughts.session", JSON.stringify(s));
      }, first.accessToken);
      await page.goto(`${srv.url}/#/settings`);
      await page.waitForSelector("[data-testid=account-username]");
      assert.equal(await refreshCalls(page), 1, "one refresh after the refusal");
      const calls = await page.evaluate(() => window.__draughtsCalls.filter((c) => c.method === "WhoAmI" || c.method === "RefreshSession").map((c) => `${c.method}${c.error ? " refused" : ""}`));
      assert.deepEqual(calls.slice(0, 3), ["WhoAmI refused", "RefreshSession", "WhoAmI"], calls.join());
      assert.notEqual((await storedSession(page)).refreshToken, second.refreshToken);
      assert.deepEqual(errors, []);
      await page.context().close();
    } finally {
      await srv.stop();
      srv.cleanup();
    }
  });

  test("accounts leaderboard: established ratings ranked, with names and profile links, page by page", async () => {
    // A server of its own where one rated game makes a rating established (deviation under 340).
    const srv = await startDraughtsd({ env: { DRAUGHTS_RATINGS_PROVISIONAL_DEVIATION: "340" } });
    try {
      const players = [];
      for (const [sub, name] of [["lb-ann", "LB Ann"], ["lb-bob", "LB Bob"]]) {
        const p = await newPage(browser);
        const errors = consoleErrors(p);
        await p.goto(`${srv.url}/#/signin`);
        await p.click("[data-testid=token-sign-in] summary");
        await p.fill("[data-testid=player-token]", playerToken(sub, name));
        await p.click("[data-testid=sign-in]");
        await p.waitForFunction((id) => document.querySelector("[data-testid=identity]")?.textContent.includes(id), `player:${sub}`);
        players.push({ p, errors, id: `player:${sub}` });
      }
      const [ann, bob] = players;
      await ann.p.selectOption("[data-testid=variant]", "english");
      await ann.p.waitForSelector(".preview[data-variant=english] g[data-piece]");
      await ann.p.selectOption("[data-testid=color]", "white");
      await ann.p.check("[data-testid=rated]");
      await ann.p.click("[data-testid=challenge-link]");
      await ann.p.waitForSelector("[data-testid=challenge-url]");
      await bob.p.goto(await ann.p.inputValue("[data-testid=challenge-url]"));
      await bob.p.click("[data-testid=accept]");
      const id = await gameId(bob.p);
      await ann.p.waitForURL(new RegExp(id));
      for (let i = 0; i < 2; i++) {
        for (const p of [bob.p, ann.p]) {
          assert.ok(await waitForTurn(p));
          await playRandomMove(p);
        }
      }
      await bob.p.click("[data-testid=resign]");
      await ann.p.waitForFunction(() => Number(document.querySelector("[data-testid=status]").dataset.outcome) === 2);
      // The result banner of a rated game: who won, and each player's rating change once rated.
      for (const [p, won] of [[ann.p, true], [bob.p, false]]) {
        await p.waitForSelector(`[data-testid=result-banner][data-kind=${won ? "won" : "lost"}]`);
        await p.waitForSelector("[data-testid=rating-change][data-change]", { timeout: 20_000 });
        const change = Number(await p.getAttribute("[data-testid=rating-change]", "data-change"));
        assert.ok(won ? change > 0 : change < 0, `rating change ${change}`);
        assert.match(await p.textContent("[data-testid=rating-change]"), won ? /^Rating \+\d+ → \d+$/ : /^Rating −\d+ → \d+$/);
      }
      await ann.p.screenshot({ path: join(outDir("screens"), "result-rated-en.png") });
      // One player a page: the winner first, then the other; Next and Previous.
      const page = ann.p;
      let entries = 0;
      for (let i = 0; i < 30 && entries < 1; i++) {
        await page.goto(`${srv.url}/#/leaderboard/english/any-speed?size=1&try=${i}`);
        await page.waitForSelector("[data-testid=lb-state][data-loaded=true]");
        entries = Number(await page.getAttribute("[data-testid=lb-state]", "data-entries"));
        if (!entries) await page.waitForTimeout(500);
      }
      const entry = async () => ({
        rank: await page.textContent("[data-testid=lb-entry] td"),
        player: await page.getAttribute("[data-testid=lb-entry]", "data-player"),
        href: await page.getAttribute("[data-testid=lb-player]", "href"),
      });
      assert.deepEqual(await entry(), { rank: "1", player: ann.id, href: `#/profile/${encodeURIComponent(ann.id)}` });
      await page.screenshot({ path: join(outDir("accounts"), "leaderboard.png") });
      await page.click("[data-testid=lb-next]");
      await page.waitForFunction(() => document.querySelector("[data-testid=lb-entry] td")?.textContent === "2");
      assert.equal((await entry()).player, bob.id);
      await page.waitForFunction(() => document.querySelector("[data-testid=lb-state]")?.textContent === "Page 2");
      assert.equal(await page.isDisabled("[data-testid=lb-next]"), true, "the last page");
      await page.click("[data-testid=lb-prev]");
      await page.waitForFunction(() => document.querySelector("[data-testid=lb-entry] td")?.textContent === "1");
      assert.equal(await page.$("[data-testid=lb-bot]"), null, "people are not marked as BOTs");
      // The BOTs' leaderboard of the same category: neither player is a BOT, so nobody (the server
      // filters: the people's page above holds both); the page size is kept; back to the people's.
      await page.selectOption("[data-testid=lb-kind]", "bots");
      await page.waitForURL(/#\/leaderboard\/english\/any-speed\?size=1&try=\d+&bots=1$/);
      await page.waitForSelector("[data-testid=leaderboard][data-bots=true] [data-testid=lb-state][data-loaded=true]");
      assert.equal(await page.getAttribute("[data-testid=lb-state]", "data-entries"), "0");
      assert.equal(await page.textContent("[data-testid=lb-state]"), "No BOT has an established rating here yet.");
      await page.selectOption("[data-testid=lb-kind]", "people");
      await page.waitForURL(/#\/leaderboard\/english\/any-speed\?size=1&try=\d+$/);
      await page.waitForSelector("[data-testid=leaderboard][data-bots=false] [data-testid=lb-state][data-loaded=true]");
      assert.equal((await entry()).player, ann.id);
      // The winner's profile: ranked #1 (established), and the game page shows the rating with no "?".
      await page.click("[data-testid=lb-player]");
      await page.waitForSelector("[data-testid=profile][data-loaded=true]");
      assert.equal(await page.getAttribute("[data-testid=profile-rating]", "data-provisional"), "false");
      assert.match(await page.textContent("[data-testid=profile-rating]"), /#1/);
      await page.goto(`${srv.url}/#/game/${id}`);
      await page.reload();
      await page.waitForSelector("[data-testid=rating-white]", { timeout: 15_000 });
      assert.match(await page.textContent("[data-testid=rating-white]"), /^ \(\d+\)$/);
      for (const { p, errors } of players) {
        assert.deepEqual(errors, []);
        await p.context().close();
      }
    } finally {
      await srv.stop();
      srv.cleanup();
    }
  });

  test("accounts first move's own countdown in a fresh game", async () => {
    const page = await newPage(browser);
    const errors = consoleErrors(page);
    await choose(page, { variant: "international", time: "5+3" });
    await page.click("[data-testid=hotseat]");
    await gameId(page);
    assert.ok(await waitForTurn(page));
    // White to move first: its own countdown, next to its clock; none for Black yet.
    await page.waitForFunction(() => /first move: \d+ s/.test(document.querySelector("[data-testid=first-move-white]")?.textContent ?? ""));
    const left = Number(await page.getAttribute("[data-testid=first-move-white]", "data-left"));
    assert.ok(left > 0 && left < 300, `first move: ${left} s, less than the 5 min clock`);
    assert.equal(await page.textContent("[data-testid=first-move-black]"), "");
    // The clock itself does not run before both sides have moved: it shows the whole time, still.
    await page.waitForTimeout(1500);
    assert.equal(await page.textContent("[data-testid=clock-white]"), "5:00");
    assert.equal(await page.locator("[data-testid=clock-white].running").count(), 0);
    await page.screenshot({ path: join(outDir("accounts"), "first-move.png") });
    await playRandomMove(page);
    await page.waitForFunction(() => /first move: \d+ s/.test(document.querySelector("[data-testid=first-move-black]")?.textContent ?? ""));
    assert.equal(await page.textContent("[data-testid=first-move-white]"), "");
    assert.ok(await waitForTurn(page));
    await playRandomMove(page);
    // Both have moved: the clocks run, no countdown.
    await page.waitForFunction(() => !document.querySelector("[data-testid=first-move-black]")?.textContent && !document.querySelector("[data-testid=first-move-white]")?.textContent);
    await page.waitForSelector("[data-testid=clock-white].running");
    assert.deepEqual(errors, []);
    await page.context().close();
  });
});
