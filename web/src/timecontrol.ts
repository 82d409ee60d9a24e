// Time controls offered by the lobby, and their text.
import { create } from "@bufbuild/protobuf";
import { TimeControlSchema, type TimeControl } from "./gen/draughts/v1/common_pb.js";
import { t } from "./i18n.js";

export const TIME_CONTROLS: { key: string; readonly label: string; make: () => TimeControl }[] = [
  ["1+0", 1, 0],
  ["3+2", 3, 2],
  ["5+3", 5, 3],
  ["10+5", 10, 5],
  ["15+10", 15, 10],
  ["30+0", 30, 0],
].map(([key, min, inc]) => ({
  key: key as string,
  get label() {
    return t("time.fischer", { min, inc });
  },
  make: () =>
    create(TimeControlSchema, {
      kind: { case: "fischer", value: { baseMs: BigInt(Number(min) * 60_000), incrementMs: BigInt(Number(inc) * 1000) } },
    }),
}));
TIME_CONTROLS.push({
  key: "corr1",
  get label() {
    return t("time.dayPerMove", { count: 1 });
  },
  make: () => create(TimeControlSchema, { kind: { case: "correspondence", value: { daysPerMove: 1 } } }),
});

export function timeControlText(tc: TimeControl | undefined): string {
  const k = tc?.kind;
  if (k?.case === "fischer") return `${Number(k.value.baseMs) / 60_000}+${Number(k.value.incrementMs) / 1000}`;
  if (k?.case === "correspondence") return t("time.daysShort", { count: k.value.daysPerMove });
  return "?";
}
