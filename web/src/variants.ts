// The variants the API names, and each one's board geometry read once from the server's start position.
import { create } from "@bufbuild/protobuf";
import { RuleSetSchema, Variant, type RuleSet } from "./gen/draughts/v1/common_pb.js";
import type { ListMovesResponse } from "./gen/draughts/v1/rules_pb.js";
import { retrying, rules as rulesApi } from "./api.js";
import { geometryFrom, type Geometry } from "./board.js";
import { t, tDynamic } from "./i18n.js";

// Each variant's name in the reader's language (the catalogues' `variant.<key>`, the rule-set names as
// the sites' own pages write them: "Cờ đam quốc tế", "Международные шашки"); a variant the proto adds
// later still appears (its key from the enum name, e.g. VARIANT_FRISIAN -> "frisian").

/** Every variant of the generated `Variant` enum, in its order (the lobby offers them all). */
export const VARIANTS: { key: string; variant: Variant; readonly label: string }[] = Object.values(Variant)
  .filter((v): v is Variant => typeof v === "number" && v !== Variant.UNSPECIFIED)
  .map((variant) => {
    const key = Variant[variant].toLowerCase();
    return {
      key,
      variant,
      get label() {
        return tDynamic(`variant.${key}`, key[0].toUpperCase() + key.slice(1));
      },
    };
  });

export function variantLabel(v: Variant | undefined): string {
  return VARIANTS.find((x) => x.variant === v)?.label ?? "?";
}

/** A rule set as players read it: the variant, then its house rules, if any (the terms of a game). */
export function rulesLabel(rules: RuleSet | undefined): string {
  const o = rules?.options;
  const house = [
    o?.noMandatoryCapture ? t("rules.noMandatoryCapture") : "",
    o?.promoteMidCapture ? t("rules.promoteMidCapture") : "",
    o?.moveLimit ? t("rules.moveLimit", { count: o.moveLimit }) : "",
  ].filter((x) => x);
  const label = variantLabel(rules?.variant);
  return house.length ? t("rules.withHouse", { label, house: house.join(", ") }) : label;
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
