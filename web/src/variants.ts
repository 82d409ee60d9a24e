// The variants the API names, and each one's board geometry read once from the server's start position.
import { create } from "@bufbuild/protobuf";
import { RuleSetSchema, Variant, type RuleSet } from "./gen/draughts/v1/common_pb.js";
import type { ListMovesResponse } from "./gen/draughts/v1/rules_pb.js";
import { retrying, rules as rulesApi } from "./api.js";
import { geometryFrom, type Geometry } from "./board.js";

export const VARIANTS: { key: string; variant: Variant; label: string }[] = [
  { key: "international", variant: Variant.INTERNATIONAL, label: "International (10×10)" },
  { key: "english", variant: Variant.ENGLISH, label: "English / American checkers" },
  { key: "italian", variant: Variant.ITALIAN, label: "Italian" },
  { key: "russian", variant: Variant.RUSSIAN, label: "Russian" },
  { key: "brazilian", variant: Variant.BRAZILIAN, label: "Brazilian" },
  { key: "spanish", variant: Variant.SPANISH, label: "Spanish" },
  { key: "czech", variant: Variant.CZECH, label: "Czech" },
  { key: "turkish", variant: Variant.TURKISH, label: "Turkish" },
];

export function variantLabel(v: Variant | undefined): string {
  return VARIANTS.find((x) => x.variant === v)?.label ?? "?";
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
