// Merges `BENCH <name> <value> <unit> [baseline=<v> ratio=<r>]` lines from stdin into
// latest.json (one entry per figure, keyed by name) and rewrites latest.md from it.
// usage: node merge-results.mjs <benchmark> <latest.json> <latest.md>
import fs from 'node:fs';
import os from 'node:os';

const [bench, jsonPath, mdPath] = process.argv.slice(2);
const input = fs.readFileSync(0, 'utf8');
let doc = { machine: {}, figures: {} };
if (fs.existsSync(jsonPath)) {
  try { doc = JSON.parse(fs.readFileSync(jsonPath, 'utf8')); } catch { /* start over */ }
}
doc.figures ??= {};
doc.machine = {
  cpus: os.cpus().length,
  cpu_model: os.cpus()[0]?.model ?? 'unknown',
  memory_gib: Math.round(os.totalmem() / 2 ** 30),
  os: `${os.type()} ${os.release()}`,
};
const now = new Date().toISOString();
for (const line of input.split('\n')) {
  const m = line.match(/^BENCH\s+(\S+)\s+(\S+)\s+(\S+)(.*)$/);
  if (!m) continue;
  const [, name, value, unit, rest] = m;
  const fig = { name, value: Number(value), unit, benchmark: bench, measured_at: now };
  const base = rest.match(/baseline=(\S+)/);
  const ratio = rest.match(/ratio=(\S+)/);
  const baseName = rest.match(/baseline_name=(\S+)/);
  if (base) fig.baseline = Number(base[1]);
  if (baseName) fig.baseline_name = baseName[1];
  if (ratio) fig.ratio = Number(ratio[1]);
  doc.figures[name] = fig;
}
fs.writeFileSync(jsonPath, JSON.stringify(doc, null, 2) + '\n');

const rows = Object.values(doc.figures).sort((a, b) =>
  (a.benchmark + a.name).localeCompare(b.benchmark + b.name));
const fmt = (v) => (v === undefined ? '' : Number.isInteger(v) ? String(v) : v.toPrecision(4));
let md = `Machine: ${doc.machine.cpus} cores (${doc.machine.cpu_model}), ` +
  `${doc.machine.memory_gib} GiB, ${doc.machine.os}. Reproduce with \`make bench\`.\n\n`;
md += '| benchmark | figure | value | unit | baseline | ratio |\n|---|---|---|---|---|---|\n';
for (const f of rows) {
  md += `| ${f.benchmark} | ${f.name} | ${fmt(f.value)} | ${f.unit} | ` +
    `${f.baseline_name ? f.baseline_name + ' ' : ''}${fmt(f.baseline)} | ${fmt(f.ratio)} |\n`;
}
fs.writeFileSync(mdPath, md);
