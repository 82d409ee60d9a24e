#!/usr/bin/env node
// protoc-gen-reference: a protoc/buf plugin (built on @bufbuild/protoplugin) that writes the API reference,
// one Markdown file, from the comments of proto/draughts/v1: every service and method (with its stream
// kinds), message (with each field's number, type and comment) and enum (with each value). Run by
// `npm run reference` (buf generate ../proto --template buf.reference.yaml); the test script checks that
// docs/api-reference.md is what the protos give.
import { createFileRegistry, create } from "@bufbuild/protobuf";
import { CodeGeneratorResponseSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { runNodeJs, getComments } from "@bufbuild/protoplugin";

// A comment's text: `// text` lines give " text"; one leading space is dropped from each line.
const text = (desc) => {
  const c = getComments(desc);
  return (c.leading ?? "")
    .split("\n")
    .map((line) => (line.startsWith(" ") ? line.slice(1) : line))
    .join("\n")
    .trim();
};

const oneLine = (s) => s.replace(/\s*\n\s*/g, " ").replace(/\|/g, "\\|");

function fieldType(f) {
  let t;
  switch (f.fieldKind) {
    case "message":
      t = f.message.typeName;
      break;
    case "enum":
      t = f.enum.typeName;
      break;
    case "map":
      t = `map<${scalarName(f.mapKey)}, ${f.mapKind === "message" ? f.message.typeName : f.mapKind === "enum" ? f.enum.typeName : scalarName(f.scalar)}>`;
      break;
    default:
      t = scalarName(f.scalar);
  }
  if (f.fieldKind === "list") {
    const inner = f.listKind === "message" ? f.message.typeName : f.listKind === "enum" ? f.enum.typeName : scalarName(f.scalar);
    t = `repeated ${inner}`;
  }
  if (f.oneof) t += ` (oneof ${f.oneof.name})`;
  return t;
}

const SCALARS = {
  1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32", 8: "bool",
  9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64", 17: "sint32", 18: "sint64",
};
const scalarName = (s) => SCALARS[s] ?? String(s);

function messages(out, list) {
  for (const m of list) {
    out.push(`### ${m.typeName}`, "");
    const doc = text(m);
    if (doc) out.push(doc, "");
    if (m.fields.length > 0) {
      out.push("| field | number | type | description |", "|---|---|---|---|");
      for (const f of m.fields) {
        out.push(`| \`${f.name}\` | ${f.number} | \`${fieldType(f)}\` | ${oneLine(text(f))} |`);
      }
      out.push("");
    }
    messages(out, m.nestedMessages);
    enums(out, m.nestedEnums);
  }
}

function enums(out, list) {
  for (const e of list) {
    out.push(`### enum ${e.typeName}`, "");
    const doc = text(e);
    if (doc) out.push(doc, "");
    out.push("| value | number | description |", "|---|---|---|");
    for (const v of e.values) out.push(`| \`${v.name}\` | ${v.number} | ${oneLine(text(v))} |`);
    out.push("");
  }
}

const plugin = {
  name: "protoc-gen-reference",
  version: "v1",
  run(request) {
    const registry = createFileRegistry(create(FileDescriptorSetSchema, { file: request.protoFile }));
    const out = [
      "# API reference: `draughts.v1`",
      "",
      "Generated from the comments of `proto/draughts/v1/*.proto` by `web/tools/protoc-gen-reference.mjs`",
      "(`cd web && npm run reference`); do not edit: the test script fails when this file and the protos",
      "differ. The guide is [api.md](api.md). Errors: each service's comment lists its status codes; every",
      "code comes from one table (`crates/proto/src/error.rs`).",
      "",
    ];
    const files = [...request.fileToGenerate].sort().map((name) => registry.getFile(name));
    out.push("## Services", "");
    for (const file of files) {
      for (const s of file.services) {
        out.push(`### service ${s.typeName} (\`${file.name}.proto\`)`, "");
        const doc = text(s);
        if (doc) out.push(doc, "");
        for (const m of s.methods) {
          const req = (m.methodKind === "client_streaming" || m.methodKind === "bidi_streaming" ? "stream " : "") + m.input.typeName;
          const res = (m.methodKind === "server_streaming" || m.methodKind === "bidi_streaming" ? "stream " : "") + m.output.typeName;
          out.push(`#### rpc ${m.name}(${req}) returns (${res})`, "");
          const mdoc = text(m);
          if (mdoc) out.push(mdoc, "");
        }
      }
    }
    out.push("## Messages", "");
    for (const file of files) messages(out, file.messages);
    out.push("## Enums", "");
    for (const file of files) enums(out, file.enums);
    const content = out.join("\n").replace(/\n{3,}/g, "\n\n").trimEnd() + "\n";
    return create(CodeGeneratorResponseSchema, {
      supportedFeatures: 1n,
      file: [{ name: "api-reference.md", content }],
    });
  },
};

runNodeJs(plugin);
