// End-to-end: the built client served by a real draughtsd, driven in Debian's headless Chromium.
// Run with `npm run test:e2e` after `npm run build` (scripts/test.sh does both); artefacts (board
// screenshots, measured first paint) go to web/test-output/.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { availableParallelism, loadavg } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  launchBrowser,
  newPage,
  ONGOING,
  outDir,
  playerToken,
  playRandomMove,
  startDraughtsd,
  startRedis,
  statusOf,
  waitForTurn,
  WEB,
} from "./harness.mjs";

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
  await page.waitForFunction(() => /\((guest|player), [^)]+\)/.test(document.querySelector("[data-testid=identity]")?.textContent ?? ""));
  return (await page.textContent("[data-testid=identity]")).match(/\((?:guest|player), ([^)]+)\)/)[1];
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
    await ann.click("[data-testid=resign]");
    await spectator.waitForFunction(() => Number(document.querySelector("[data-testid=status]").dataset.outcome) > 1);
    assert.match((await statusOf(spectator)).text, /white wins/);
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
    await page.goto(`${server.url}/#/`);
    await page.click("summary");
    await page.fill("[data-testid=player-token]", playerToken("e2e-analyst", "Analyst"));
    await page.click("[data-testid=sign-in]");
    await page.waitForFunction(() => document.querySelector("[data-testid=identity]").textContent.includes("player:e2e-analyst"));
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
    await guest.context().close();
    await page.context().close();
  });

  test("the game goes on after the server restarts", async () => {
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
      await page.waitForSelector("[data-testid=connection][data-state=live]", { state: "attached", timeout: 20_000 });
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
