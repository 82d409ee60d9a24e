// A bot over gRPC-Web (what a browser speaks), on @connectrpc/connect-web with stubs generated from
// proto/ by protoc-gen-es (`buf generate ../../proto --template buf.gen.yaml` here writes ./gen).
// It runs in Node 18+ as it is (fetch), and in a browser page once bundled (vite, esbuild): the
// same calls as examples/python/bot.py: Games.WatchPlayerEvents, AcceptInvitation for each invitation
// to the bot, then each game with the first legal move of Rules.ListMoves, waiting on Games.WatchGame.
//
//   node bot.mjs --server http://127.0.0.1:50051 --token dk_... [--games N]
//
// The token is an API key with the `bot` and `play` scopes. The server must serve gRPC-Web (draughtsd
// does, on its one port) and, for a page from another origin, allow it in CORS.

import { createClient } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { Auth } from "./gen/draughts/v1/auth_pb.js";
import { Color, Outcome } from "./gen/draughts/v1/common_pb.js";
import { Games, InvitationState } from "./gen/draughts/v1/games_pb.js";
import { Rules } from "./gen/draughts/v1/rules_pb.js";

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
}

const server = arg("server", "http://127.0.0.1:50051");
const token = arg("token", process.env.DRAUGHTS_TOKEN);
const wanted = Number(arg("games", "0"));
if (!token) throw new Error("--token (an API key with the bot scope) is required");

const transport = createGrpcWebTransport({ baseUrl: server });
const options = { headers: { authorization: `Bearer ${token}` } };
const auth = createClient(Auth, transport);
const games = createClient(Games, transport);
const rules = createClient(Rules, transport);

const me = (await auth.whoAmI({}, options)).player;
console.log(`signed in as ${me.id} (bot: ${me.bot})`);

const playing = new Set();
let finished = 0;

async function play(gameId) {
  for (;;) {
    const view = await games.getGame({ gameId }, options);
    if (view.status.outcome !== Outcome.ONGOING) {
      console.log(`game ${gameId}: ${view.status.description}`);
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
        console.log(`game ${gameId}: ${e.message}`); // stale or over: read it again
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
    console.log(`${finished} games played`);
    process.exit(0);
  }
}

function start(gameId) {
  if (playing.has(gameId)) return;
  playing.add(gameId);
  play(gameId).catch((e) => {
    console.error(`game ${gameId}: ${e.message}`);
    process.exit(1);
  });
}

for await (const event of games.watchPlayerEvents({}, options)) {
  if (event.kind.case === "invitation") {
    const inv = event.kind.value;
    if (inv.invitee?.id === me.id && inv.state === InvitationState.PENDING) {
      const view = await games.acceptInvitation({ invitationId: inv.invitationId }, options);
      console.log(`accepted ${inv.invitationId} from ${inv.inviter.id}`);
      start(view.gameId);
    }
  } else if (event.kind.case === "gameStarted") {
    start(event.kind.value.gameId);
  }
}
