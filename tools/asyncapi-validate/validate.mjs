// Validate an AsyncAPI document with the official parser; exit 1 on any error-level diagnostic.
import { Parser, fromFile } from "@asyncapi/parser";

const path = process.argv[2];
if (!path) {
  console.error("usage: node validate.mjs DOCUMENT");
  process.exit(2);
}
const parser = new Parser();
const { document, diagnostics } = await fromFile(parser, path).parse();
const errors = diagnostics.filter((d) => d.severity === 0);
for (const d of diagnostics) {
  const where = (d.path || []).join(".");
  console.log(`${["error", "warning", "info", "hint"][d.severity]} ${d.code} ${where}: ${d.message}`);
}
if (!document || errors.length > 0) {
  console.error(`${path}: ${errors.length} error(s)`);
  process.exit(1);
}
console.log(`${path}: valid AsyncAPI ${document.version()}`);
