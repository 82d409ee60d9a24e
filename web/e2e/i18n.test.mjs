// The message catalogues: every key of English in Vietnamese and Russian, with the plural forms each
// language needs and the same placeholders, and every t("key") of the source in English
// (tools/check-i18n.mjs, also run by `npm run build`). The check itself is checked on a broken copy.
import assert from "node:assert/strict";
import { test } from "node:test";
import { checkCatalogues } from "../tools/check-i18n.mjs";

test("every catalogue has every key, plural form and placeholder", () => {
  const { langs, keys, problems } = checkCatalogues();
  assert.deepEqual(problems, []);
  assert.deepEqual(langs.sort(), ["en", "ru", "vi"]);
  assert.ok(keys > 300, `only ${keys} keys`);
});

test("a missing key, a missing Russian plural form and a lost placeholder are found", () => {
  const { problems } = checkCatalogues({
    patch: (lang, flat) => {
      if (lang === "vi") flat.delete("game.resign");
      if (lang === "ru") flat.delete("lobby.online_few");
      if (lang === "ru") flat.set("game.toMove", "Ход");
    },
  });
  assert.ok(problems.includes("vi: missing game.resign"), problems.join("\n"));
  assert.ok(problems.includes("ru: lobby.online lacks its plural form _few"), problems.join("\n"));
  assert.ok(problems.some((p) => p.startsWith("ru: game.toMove has placeholders")), problems.join("\n"));
});
