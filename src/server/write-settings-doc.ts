/** `npm run docs:config`: writes docs/configuration.md from the settings schema (src/server/settings-doc.ts). */
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { CONFIGURATION_DOC, renderConfigurationDoc } from "./settings-doc.js";

const path = fileURLToPath(new URL(`../../${CONFIGURATION_DOC}`, import.meta.url));
writeFileSync(path, renderConfigurationDoc());
process.stdout.write(`wrote ${path}\n`);
