import { defineConfig } from "vite";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";

// Writes a `.gz` sibling of every text asset: draughtsd serves it to browsers that accept gzip.
/** @returns {import("vite").Plugin} */
function precompress() {
  return {
    name: "precompress-gzip",
    apply: "build",
    closeBundle() {
      const walk = (dir) => {
        for (const name of readdirSync(dir)) {
          const path = join(dir, name);
          if (statSync(path).isDirectory()) walk(path);
          else if (/\.(js|css|html|svg|json)$/.test(name)) {
            writeFileSync(`${path}.gz`, gzipSync(readFileSync(path), { level: 9 }));
          }
        }
      };
      walk("dist");
    },
  };
}

export default defineConfig({
  build: { target: "es2022", outDir: "dist", emptyOutDir: true },
  plugins: [precompress()],
  server: {
    // `npx vite`: the page on Vite's port, API calls proxied to a draughtsd (DRAUGHTS_API, default 50051).
    proxy: { "/draughts.v1.": { target: process.env.DRAUGHTS_API ?? "http://127.0.0.1:50051", changeOrigin: false } },
  },
});
