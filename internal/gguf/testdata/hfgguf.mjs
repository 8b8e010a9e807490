// Prints, as JSON, what the npm package @huggingface/gguf (an independent
// GGUF reader) reads from a file: node hfgguf.mjs PACKAGE_PREFIX FILE.
import path from "node:path";
import { pathToFileURL } from "node:url";

const [prefix, file] = process.argv.slice(2);
const entry = path.join(prefix, "node_modules", "@huggingface", "gguf", "dist", "index.mjs");
const { gguf } = await import(pathToFileURL(entry).href);
const { metadata, typedMetadata, tensorInfos, tensorDataOffset } = await gguf(file, {
  allowLocalFile: true,
  typedMetadata: true,
});
const types = {};
for (const [key, v] of Object.entries(typedMetadata)) {
  types[key] = v.subType === undefined ? [v.type] : [v.type, v.subType];
}
const bigints = (_, v) => (typeof v === "bigint" ? v.toString() : v);
process.stdout.write(JSON.stringify({ metadata, types, tensorInfos, tensorDataOffset }, bigints));
