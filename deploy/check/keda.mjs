// Validates every KEDA ScaledObject of a rendered manifest (stdin) against KEDA's CRD schema (the
// validator @kubernetes-models/keda generates from it), then checks what the schema leaves open: the
// target is a Deployment of the same manifest, and each redis-streams trigger names its stream, its
// consumer group, an address and a lag or pending-entries threshold.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject";

const docs = parseAllDocuments(readFileSync(0, "utf8")).map((d) => d.toJS()).filter(Boolean);
const deployments = new Set(docs.filter((d) => d.kind === "Deployment").map((d) => d.metadata.name));
const scaled = docs.filter((d) => d.kind === "ScaledObject");
const problems = [];
if (scaled.length === 0) problems.push("no ScaledObject in the manifest");
for (const doc of scaled) {
  const name = doc.metadata?.name ?? "?";
  try {
    new ScaledObject(doc).validate();
  } catch (e) {
    problems.push(`ScaledObject ${name}: ${e.message}`);
    continue;
  }
  const target = doc.spec.scaleTargetRef;
  if ((target.kind ?? "Deployment") !== "Deployment" || !deployments.has(target.name)) {
    problems.push(`ScaledObject ${name}: target ${target.name} is not a Deployment of this manifest`);
  }
  for (const [i, trigger] of doc.spec.triggers.entries()) {
    if (trigger.type !== "redis-streams") continue;
    const m = trigger.metadata ?? {};
    for (const key of ["stream", "consumerGroup"]) {
      if (!m[key]) problems.push(`ScaledObject ${name} trigger ${i}: no ${key}`);
    }
    if (!m.address && !m.addressFromEnv && !m.host) {
      problems.push(`ScaledObject ${name} trigger ${i}: no address`);
    }
    if (!m.lagCount && !m.pendingEntriesCount) {
      problems.push(`ScaledObject ${name} trigger ${i}: neither lagCount nor pendingEntriesCount`);
    }
  }
}
if (problems.length > 0) {
  for (const p of problems) console.error(p);
  process.exit(1);
}
console.log(`${scaled.length} ScaledObject(s) valid against KEDA's schema`);
