// Renders each case of the JSON on stdin ({template, cases: [data]}) with
// @huggingface/jinja (argv[2] is its npm prefix) and prints the outputs as a
// JSON list.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const require = createRequire(path.join(process.argv[2], "package.json"));
const { Template } = await import(require.resolve("@huggingface/jinja"));
const input = JSON.parse(readFileSync(0, "utf8"));
const tmpl = new Template(input.template);
process.stdout.write(JSON.stringify(input.cases.map((data) => tmpl.render(data))));
