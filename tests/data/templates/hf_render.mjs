// Renders chat-template cases with @huggingface/jinja, the reference for our engine.
// usage: node hf_render.mjs <.../@huggingface/jinja/dist/index.js> <cases.json>
// cases.json: [{"template": "...", "context": {...}}, ...]
// stdout: [{"ok": true, "text": "..."} | {"ok": false, "error": "..."}, ...]
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [, , lib, casesPath] = process.argv;
const { Template } = await import(pathToFileURL(lib).href);
const cases = JSON.parse(readFileSync(casesPath, "utf8"));
const results = cases.map((c) => {
  try {
    return { ok: true, text: new Template(c.template).render(c.context) };
  } catch (e) {
    return { ok: false, error: String(e && e.message ? e.message : e) };
  }
});
process.stdout.write(JSON.stringify(results));
