// The bot of bot.mjs without its command line: `runBot` plays over gRPC-Web (what a browser speaks)
// on @connectrpc/connect-web with stubs generated from proto/ by protoc-gen-es (`buf generate
// ../../proto --template buf.gen.yaml` here writes ./gen). It uses nothing of Node: bot.mjs runs it
// from a terminal, and a page runs it once bundled (vite, esbuild), as web/e2e/examples.test.mjs does
// in Chromium. The same calls as examples/python/bot.py: Games.WatchPlayerEvents, AcceptInvitation for
// each invitation to the bot, then each game with the first legal move of Rules.ListMoves, waiting on
// Games.WatchGame.
//
// The token is an API key with the `bot` and `play` scopes. The server must serve gRPC-Web (draughtsd
// does, on its one port) and, for a page from another origin, allow it in CORS.

import { createClient } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { Auth } from "./gen/draughts/v1/auth_pb.js";
import { Color, Outcome } from "./gen/draughts/v1/common_pb.js";
import { Games, InvitationState } from "./gen/draughts/v1/games_pb.js";
import { Rules } from "./gen/draughts/v1/rules_pb.js";

/**
 * Plays every game it is invited to; resolves with the number of games played once `games` (> 0) are
 * over, and rejects on the first error it cannot go on from. `log` receives a line per step.
 */
export async function runBot({ server, token, games: wanted = 0, log = console.log }) {
  if (!token) throw new Error("a token (an API key with the bot scope) is required");
  const transport = createGrpcWebTransport({ baseUrl: server });
  const options = { headers: { authorization: `Bearer ${token}` } };
  const auth = createClient(Auth, transport);
  const games = createClient(Games, transport);
  const rules = createClient(Rules, transport);

  const me = (await auth.whoAmI({}, options)).player;
  log(`signed in as ${me.id} (bot: ${me.bot})`);

  const playing = new Set();
  let finished = 0;
  const stop = new AbortController();
  let settle;
  const done = new Promise((resolve, reject) => (settle = { resolve, reject }));

  async function play(gameId) {
    for (;;) {
      const view = await games.getGame({ gameId }, options);
      if (view.status.outcome !== Outcome.ONGOING) {
        log(`game ${gameId}: ${view.status.description}`);
        break;
      }
      const mine = view.white.id === me.id ? Color.WHITE : Color.BLACK;
      if (view.position.sideToMove === mine) {
        const legal = await rules.listMoves({ rules: view.rules, fen: view.position.fen }, options);
        const move = legal.moves[0]; // an engine chooses here
        try {
          await games.playMove(
            {
              gameId,
              move: { move: { case: "squares", value: { squares: move.path } } },
              expectedPly: view.moves.length,
            },
            options,
          );
        } catch (e) {
          log(`game ${gameId}: ${e.message}`); // stale or over: read it again
        }
        continue;
      }
      const plies = view.moves.length;
      for await (const event of games.watchGame({ gameId }, options)) {
        const kind = event.kind.case;
        if (kind === "finished" || (kind === "movePlayed" && event.kind.value.ply > plies)) break;
      }
    }
    finished += 1;
    if (wanted > 0 && finished >= wanted) {
      log(`${finished} games played`);
      stop.abort();
      settle.resolve(finished);
    }
  }

  function start(gameId) {
    if (playing.has(gameId)) return;
    playing.add(gameId);
    play(gameId).catch((e) => {
      log(`game ${gameId}: ${e.message}`);
      stop.abort();
      settle.reject(e);
    });
  }

  const events = (async () => {
    for await (const event of games.watchPlayerEvents({}, { ...options, signal: stop.signal })) {
      if (event.kind.case === "invitation") {
        const inv = event.kind.value;
        if (inv.invitee?.id === me.id && inv.state === InvitationState.PENDING) {
          const view = await games.acceptInvitation({ invitationId: inv.invitationId }, options);
          log(`accepted ${inv.invitationId} from ${inv.inviter.id}`);
          start(view.gameId);
        }
      } else if (event.kind.case === "gameStarted") {
        start(event.kind.value.gameId);
      }
    }
    // The server ended the stream (a restart, say): a bot that hears no more invitations says so.
    if (!stop.signal.aborted) throw new Error("the server ended the event stream");
  })();
  // The event stream ends with an error, or when the bot has played its games (aborted).
  events.catch((e) => {
    if (!stop.signal.aborted) settle.reject(e);
  });
  return done;
}
