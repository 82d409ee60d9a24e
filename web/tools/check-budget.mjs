// The first screen's budget: the JavaScript and CSS that dist/index.html loads (its module script, the
// chunks it preloads, its style sheets), gzip-compressed as draughtsd sends them, must stay under 150 KB
// (150 × 1024 bytes). Run by `npm run build` after Vite; exits 1 over budget. Later chunks (loaded on
// demand) do not count toward the first screen and are listed apart.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const DIST = join(dirname(fileURLToPath(import.meta.url)), "..", "dist");
export const BUDGET = 150 * 1024;

export function firstScreen() {
  const html = readFileSync(join(DIST, "index.html"), "utf8");
  const refs = [...html.matchAll(/<(?:script|link)\b[^>]*?(?:src|href)="\/?([^"]+\.(?:js|css))"/g)].map((m) => m[1]);
  const files = [...new Set(refs)].map((f) => {
    const raw = readFileSync(join(DIST, f));
    const gz = existsSync(join(DIST, `${f}.gz`)) ? readFileSync(join(DIST, `${f}.gz`)).length : gzipSync(raw, { level: 9 }).length;
    return { file: f, bytes: raw.length, gzip: gz };
  });
  const total = files.reduce((n, f) => n + f.gzip, 0);
  const all = readdirSync(join(DIST, "assets")).filter((f) => /\.(js|css)$/.test(f)).map((f) => `assets/${f}`);
  const later = all.filter((f) => !files.some((x) => x.file === f));
  return { files, total, later };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { files, total, later } = firstScreen();
  for (const f of files) console.log(`first screen: ${f.file} ${(f.bytes / 1024).toFixed(1)} KiB, ${(f.gzip / 1024).toFixed(1)} KiB gzipped`);
  if (later.length) console.log(`loaded later: ${later.join(", ")}`);
  const line = `first screen JS+CSS: ${(total / 1024).toFixed(1)} KiB gzipped (budget ${BUDGET / 1024} KiB)`;
  if (total > BUDGET) {
    console.error(`${line}: OVER BUDGET`);
    process.exit(1);
  }
  console.log(line);
}
