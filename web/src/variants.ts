// The variants the API names, and each one's board geometry read once from the server's start position.
import { create } from "@bufbuild/protobuf";
import { RuleSetSchema, Variant, type RuleSet } from "./gen/draughts/v1/common_pb.js";
import type { ListMovesResponse } from "./gen/draughts/v1/rules_pb.js";
import { retrying, rules as rulesApi } from "./api.js";
import { geometryFrom, type Geometry } from "./board.js";

// Labels of the variants known when this was written; a variant the proto adds later still appears
// (its key from the enum name, e.g. VARIANT_FRISIAN -> "frisian").
const LABELS: Record<string, string> = {
  international: "International (10×10)",
  english: "English / American checkers",
  italian: "Italian",
  russian: "Russian",
  brazilian: "Brazilian",
  spanish: "Spanish",
  czech: "Czech",
  turkish: "Turkish",
  antidraughts: "Antidraughts (losing, 10×10)",
  breakthrough: "Breakthrough (first king wins, 10×10)",
  killer: "Killer (10×10)",
  pool: "American pool checkers",
  portuguese: "Portuguese",
  frisian: "Frisian (10×10, orthogonal captures)",
  frysk: "Frysk! (Frisian, five men a side)",
  canadian: "Canadian (12×12)",
};

/** Every variant of the generated `Variant` enum, in its order (the lobby offers them all). */
export const VARIANTS: { key: string; variant: Variant; label: string }[] = Object.values(Variant)
  .filter((v): v is Variant => typeof v === "number" && v !== Variant.UNSPECIFIED)
  .map((variant) => {
    const key = Variant[variant].toLowerCase();
    return { key, variant, label: LABELS[key] ?? key[0].toUpperCase() + key.slice(1) };
  });

export function variantLabel(v: Variant | undefined): string {
  return VARIANTS.find((x) => x.variant === v)?.label ?? "?";
}

/** A rule set as players read it: the variant, then its house rules, if any (the terms of a game). */
export function rulesLabel(rules: RuleSet | undefined): string {
  const o = rules?.options;
  const house = [
    o?.noMandatoryCapture ? "no mandatory capture" : "",
    o?.promoteMidCapture ? "promotion mid-capture" : "",
    o?.moveLimit ? `draw after ${o.moveLimit} moves each without progress` : "",
  ].filter((x) => x);
  const label = variantLabel(rules?.variant);
  return house.length ? `${label} (house rules: ${house.join(", ")})` : label;
}

export function variantKey(v: Variant | undefined): string {
  return VARIANTS.find((x) => x.variant === v)?.key ?? "unknown";
}

const geometries = new Map<Variant, Promise<{ geometry: Geometry; start: ListMovesResponse }>>();

/** The geometry of a variant's board (one Rules.ListMoves of its start position, then cached). */
export function geometryOf(variant: Variant): Promise<{ geometry: Geometry; start: ListMovesResponse }> {
  let g = geometries.get(variant);
  if (!g) {
    g = retrying(() => rulesApi.listMoves({ rules: create(RuleSetSchema, { variant }) })).then((start) => ({
      start,
      geometry: geometryFrom(start.position!, start.moves[0]?.notation ?? ""),
    }));
    g.catch(() => geometries.delete(variant));
    geometries.set(variant, g);
  }
  return g;
}

export function ruleSet(variant: Variant, opts: { noMandatoryCapture?: boolean; promoteMidCapture?: boolean; moveLimit?: number }): RuleSet {
  return create(RuleSetSchema, {
    variant,
    options: {
      noMandatoryCapture: !!opts.noMandatoryCapture,
      promoteMidCapture: !!opts.promoteMidCapture,
      moveLimit: opts.moveLimit ?? 0,
    },
  });
}
