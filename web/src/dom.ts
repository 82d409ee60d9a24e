// A few lines of DOM building instead of a framework (the bundle stays small).
import { language } from "./i18n.js";
type Child = Node | string | number | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, unknown> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") e.addEventListener(k.slice(2), v as EventListener);
    else if (k === "class") e.className = String(v);
    else if (k in e && typeof v !== "string") (e as unknown as Record<string, unknown>)[k] = v;
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) e.append(c instanceof Node ? c : String(c));
  return e;
}

/** Formats a clock: m:ss, with tenths under ten seconds. */
export function clockText(ms: number): string {
  ms = Math.max(0, ms);
  const s = Math.floor(ms / 1000);
  if (s < 10) return `0:0${s}.${Math.floor((ms % 1000) / 100)}`;
  if (s >= 3600) return `${Math.floor(s / 3600)}:${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}`;
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

let toastTimer = 0;
/** A short message at the bottom of the screen. */
export function toast(text: string, kind: "info" | "error" = "info"): void {
  const t = document.getElementById("toast")!;
  t.textContent = text;
  t.className = `toast show ${kind}`;
  clearTimeout(toastTimer);
  toastTimer = window.setTimeout(() => (t.className = "toast"), 4000);
}

/** A date as the reader's locale writes it ("" for 0: unknown). */
export function dateText(ms: number | bigint, withTime = false): string {
  const n = Number(ms);
  if (!n) return "";
  const d = new Date(n);
  return withTime ? d.toLocaleString(language()) : d.toLocaleDateString(language());
}

/** The `?a=b` part of the hash route. */
export function hashQuery(): URLSearchParams {
  return new URLSearchParams(location.hash.split("?")[1] ?? "");
}
