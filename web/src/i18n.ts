// The client's languages: one catalogue per language (src/locales/<lang>.json, i18next with the
// browser's Intl.PluralRules for plurals: Russian has one/few/many), the language chosen from
// navigator.languages on a first visit, switchable from every page (the header's picker), kept in
// localStorage. `tools/check-i18n.mjs` (run by the build and the e2e suite) fails when a catalogue lacks
// a key, a plural form its language needs, or a placeholder of the English text.
import i18next from "i18next";
import en from "./locales/en.json";
import ru from "./locales/ru.json";
import vi from "./locales/vi.json";

declare module "i18next" {
  interface CustomTypeOptions {
    resources: { translation: typeof en };
  }
}

/** The languages offered, each named in itself. */
export const LANGUAGES = [
  { code: "en", name: "English" },
  { code: "vi", name: "Tiếng Việt" },
  { code: "ru", name: "Русский" },
] as const;
export type Language = (typeof LANGUAGES)[number]["code"];

const KEY = "draughts.lang";
const supported = (l: string | null | undefined): Language | null => {
  const base = (l ?? "").toLowerCase().split("-")[0];
  return LANGUAGES.some((x) => x.code === base) ? (base as Language) : null;
};

/** The language kept from an earlier visit, else the first of the browser's languages that we speak. */
export function detectLanguage(): Language {
  let kept: string | null = null;
  try {
    kept = localStorage.getItem(KEY);
  } catch {
    kept = null;
  }
  return supported(kept) ?? navigator.languages?.map(supported).find((l) => l) ?? supported(navigator.language) ?? "en";
}

void i18next.init({
  lng: detectLanguage(),
  fallbackLng: "en",
  supportedLngs: LANGUAGES.map((l) => l.code),
  resources: { en: { translation: en }, vi: { translation: vi }, ru: { translation: ru } },
  interpolation: { escapeValue: false },
  returnNull: false,
  initAsync: false,
});
document.documentElement.lang = i18next.language;

export const t = i18next.t.bind(i18next);

export function language(): Language {
  return supported(i18next.language) ?? "en";
}

/** A key built at run time (an enum's name): its text if the catalogue has it, else `fallback`. */
export function tDynamic(key: string, fallback: string, options: Record<string, unknown> = {}): string {
  return i18next.exists(key) ? String(i18next.t(key as never, options as never)) : fallback;
}

/** Switches the language, keeps it for the next visit and tells the page to draw itself again. */
export function setLanguage(l: Language): void {
  try {
    localStorage.setItem(KEY, l);
  } catch {
    // Private mode: the choice lasts for this page only.
  }
  void i18next.changeLanguage(l);
  document.documentElement.lang = l;
  window.dispatchEvent(new Event("draughts:lang"));
}
