// A bot over gRPC-Web from the terminal (Node 18+): the command line around bot-core.mjs, which a
// browser page runs as it is once bundled (vite, esbuild). Stubs: `buf generate ../../proto --template
// buf.gen.yaml` here writes ./gen.
//
//   node bot.mjs --server http://127.0.0.1:50051 --token dk_... [--games N]
//
// The token is an API key with the `bot` and `play` scopes (or DRAUGHTS_TOKEN). With --games N it ends
// after N games (exit 0); without, it plays until stopped. Any error it cannot go on from: exit 1.

import { runBot } from "./bot-core.mjs";

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
}

try {
  await runBot({
    server: arg("server", "http://127.0.0.1:50051"),
    token: arg("token", process.env.DRAUGHTS_TOKEN),
    games: Number(arg("games", "0")),
  });
  process.exit(0);
} catch (e) {
  console.error(e.message);
  process.exit(1);
}
