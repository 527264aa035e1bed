// Checks Kubernetes manifests against the API's schemas, offline:
//
//   node validate_manifests.mjs TOOLS_DIR [--json] FILE.yaml...
//
// TOOLS_DIR is where `make deps` installed kubernetes-models, yaml and
// typescript (the Makefile's TOOLS_DIR). Every document of every file is
// checked twice:
//   1. by kubernetes-models' validator for its kind (the OpenAPI schema of
//      the Kubernetes release it was generated from: types, enums, formats,
//      required fields);
//   2. by the TypeScript compiler against the same kind's type, whose
//      excess-property check rejects field names the API does not have
//      (`hostPid` for `hostPID`), which the OpenAPI schemas let through.
// Exit status 0 when every document passes, 1 otherwise (each error printed
// with its file and document), 2 on bad usage. With --json, prints
// [{"file": ..., "doc": {...}}, ...] on stdout for the caller to inspect.

import { execFileSync } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const args = process.argv.slice(2);
if (args.length < 2) {
  console.error("usage: node validate_manifests.mjs TOOLS_DIR [--json] FILE.yaml...");
  process.exit(2);
}
const toolsDir = path.resolve(args.shift());
const json = args[0] === "--json";
if (json) args.shift();
const modules = path.join(toolsDir, "node_modules");
if (!fs.existsSync(path.join(modules, "kubernetes-models"))) {
  console.error(`${modules}: kubernetes-models is not installed there: run make deps`);
  process.exit(2);
}
const YAML = createRequire(path.join(modules, "resolve.js"))("yaml");

// "apps/v1" + "DaemonSet" -> the model's module, below node_modules.
function modelPath(apiVersion, kind) {
  return `kubernetes-models/${apiVersion}/${kind}`;
}

const errors = [];
const docs = [];
for (const file of args) {
  const parsed = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"));
  parsed.forEach((d, i) => {
    const where = `${file}: document ${i + 1}`;
    if (d.errors.length > 0) {
      for (const e of d.errors) errors.push(`${where}: YAML: ${e.message}`);
      return;
    }
    const doc = d.toJS();
    if (doc === null || doc === undefined) return;
    if (typeof doc.apiVersion !== "string" || typeof doc.kind !== "string") {
      errors.push(`${where}: no apiVersion and kind`);
      return;
    }
    docs.push({ file, where, doc });
  });
}

for (const d of docs) {
  const modulePath = path.join(modules, `${modelPath(d.doc.apiVersion, d.doc.kind)}.js`);
  if (!fs.existsSync(modulePath)) {
    errors.push(`${d.where}: ${d.doc.apiVersion} ${d.doc.kind} is not a kind of the Kubernetes API`);
    continue;
  }
  const Model = (await import(pathToFileURL(modulePath).href))[d.doc.kind];
  try {
    new Model(d.doc).validate();
  } catch (e) {
    errors.push(`${d.where} (${d.doc.kind} ${d.doc.metadata?.name}): ${e.message}`);
  }
}

// The TypeScript check: one declaration per document, in a file inside
// TOOLS_DIR so that its imports resolve to the installed models.
const checked = docs.filter((d) =>
  fs.existsSync(path.join(modules, `${modelPath(d.doc.apiVersion, d.doc.kind)}.d.ts`)));
if (checked.length > 0) {
  const dir = fs.mkdtempSync(path.join(toolsDir, "check-"));
  try {
    const lines = [];
    const where = [];
    checked.forEach((d, i) => {
      lines.push(`import type { I${d.doc.kind} as T${i} } from "${modelPath(d.doc.apiVersion, d.doc.kind)}";`);
    });
    checked.forEach((d, i) => {
      where.push([lines.length + 1, d.where]);
      lines.push(`export const doc${i}: T${i} = ${JSON.stringify(d.doc)};`);
    });
    const source = path.join(dir, "manifests.ts");
    fs.writeFileSync(source, lines.join("\n") + "\n");
    try {
      execFileSync(process.execPath, [
        path.join(modules, "typescript", "bin", "tsc"), "--noEmit", "--strict",
        "--module", "nodenext", "--moduleResolution", "nodenext", "--skipLibCheck", source,
      ], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    } catch (e) {
      // tsc prints "manifests.ts(LINE,COL): error ...": name the document.
      for (const line of String(e.stdout).split("\n").filter((l) => l.includes("error"))) {
        const m = line.match(/\((\d+),\d+\): (.*)$/);
        const doc = m ? where.filter(([l]) => l <= Number(m[1])).pop() : undefined;
        errors.push(doc ? `${doc[1]}: ${m[2]}` : line);
      }
      if (errors.length === 0) errors.push(`tsc failed: ${e.stderr || e.message}`);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

for (const e of errors) console.error(e);
if (json) console.log(JSON.stringify(docs.map((d) => ({ file: d.file, doc: d.doc }))));
process.exit(errors.length > 0 ? 1 : 0);
