// Checks the message catalogues (src/locales/<lang>.json) against the English one and the source:
// every key of English in every language, with each plural form the language needs (Intl.PluralRules:
// Russian one/few/many/other, Vietnamese other) and the same {{placeholders}}; no key English lacks;
// and every literal t("key") in src/ present in English. Exits 1 with the list of problems.
// Run by `npm run build` and by the e2e suite (e2e/i18n.test.mjs).
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const WEB = join(dirname(fileURLToPath(import.meta.url)), "..");
const LOCALES = join(WEB, "src", "locales");
const SUFFIXES = ["zero", "one", "two", "few", "many", "other"];

/** key -> text, nested objects flattened with dots. */
function flatten(obj, prefix = "", out = new Map()) {
  for (const [k, v] of Object.entries(obj)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v && typeof v === "object") flatten(v, key, out);
    else out.set(key, v);
  }
  return out;
}

/** Base keys (plural suffix removed) -> { plural, texts }. */
function entries(flat) {
  const out = new Map();
  for (const [key, text] of flat) {
    const m = key.match(new RegExp(`^(.*)_(${SUFFIXES.join("|")})$`));
    const base = m ? m[1] : key;
    const e = out.get(base) ?? { plural: false, forms: new Map() };
    if (m) e.plural = true;
    e.forms.set(m ? m[2] : "", text);
    out.set(base, e);
  }
  return out;
}

const placeholders = (text) => [...String(text).matchAll(/\{\{\s*(\w+)[^}]*\}\}/g)].map((m) => m[1]).sort().join(",");

/** `patch(lang, flatMap)` may change a catalogue before the check (the check's own test breaks one). */
export function checkCatalogues({ patch } = {}) {
  const problems = [];
  const langs = readdirSync(LOCALES).filter((f) => f.endsWith(".json")).map((f) => f.slice(0, -5));
  const load = (l) => {
    const flat = flatten(JSON.parse(readFileSync(join(LOCALES, `${l}.json`), "utf8")));
    patch?.(l, flat);
    return entries(flat);
  };
  const en = load("en");
  for (const lang of langs) {
    if (lang === "en") continue;
    const cat = load(lang);
    const needed = new Intl.PluralRules(lang).resolvedOptions().pluralCategories;
    for (const [base, e] of en) {
      const have = cat.get(base);
      if (!have) {
        problems.push(`${lang}: missing ${base}`);
        continue;
      }
      const want = new Set([...e.forms.values()].map(placeholders).filter((p) => p));
      if (e.plural) {
        for (const form of needed) if (!have.forms.has(form)) problems.push(`${lang}: ${base} lacks its plural form _${form}`);
      } else if (!have.forms.has("")) problems.push(`${lang}: ${base} is plural here, not in English`);
      for (const [form, text] of have.forms) {
        if (typeof text !== "string" || !text.trim()) problems.push(`${lang}: ${base}${form ? "_" + form : ""} is empty`);
        const p = placeholders(text);
        // A plural form may leave out {{count}} (Russian "one" covers 21, so it keeps it; Vietnamese has one form).
        const allowed = [...want].some((w) => w === p || w.split(",").filter((x) => x !== "count").join(",") === p);
        if (want.size && !allowed) problems.push(`${lang}: ${base}${form ? "_" + form : ""} has placeholders {${p}}, English {${[...want].join("|")}}`);
      }
    }
    for (const base of cat.keys()) if (!en.has(base)) problems.push(`${lang}: ${base} is not in English`);
  }
  // Every literal key used in the source exists in English.
  const src = join(WEB, "src");
  const files = readdirSync(src, { recursive: true }).filter((f) => /\.ts$/.test(f) && !String(f).startsWith("gen"));
  for (const f of files) {
    const text = readFileSync(join(src, f), "utf8");
    for (const m of text.matchAll(/\bt\(\s*"([\w.-]+)"/g)) if (!en.has(m[1])) problems.push(`src/${f}: t("${m[1]}") is not in English`);
  }
  return { langs, keys: en.size, problems };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { langs, keys, problems } = checkCatalogues();
  if (problems.length) {
    console.error(`i18n: ${problems.length} problem(s):\n  ${problems.join("\n  ")}`);
    process.exit(1);
  }
  console.log(`i18n: ${keys} keys, every one in ${langs.join(", ")}`);
}
