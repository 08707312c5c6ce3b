// Prints the rule groups of every PrometheusRule in a rendered manifest as one plain
// Prometheus rule file, for promtool (tests/integration/pipeline/deploy_validate.sh):
//   node tests/js/deploy/rules.mjs rendered.yaml > rules.yaml
import { readFileSync } from "node:fs";
import { parseAllDocuments, stringify } from "yaml";

const [file = "-"] = process.argv.slice(2);
const groups = [];
for (const doc of parseAllDocuments(readFileSync(file === "-" ? 0 : file, "utf8"))) {
  const o = doc.toJS();
  if (o?.kind === "PrometheusRule") groups.push(...(o.spec?.groups ?? []));
}
if (!groups.length) {
  console.error(`rules: no PrometheusRule in ${file}`);
  process.exit(1);
}
process.stdout.write(stringify({ groups }));
