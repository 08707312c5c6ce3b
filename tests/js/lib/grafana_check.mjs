// Checks a Grafana dashboard against what the processes export:
//   node grafana_check.mjs <dashboard.json> <scraped /metrics file>...
// The dashboard must parse as JSON with a title, a uid, unique panel ids, a Prometheus
// datasource variable that every panel and query uses, and queries with balanced
// brackets; every metric a query names (cdc_*, a histogram's _bucket/_sum/_count
// included) must be a sample name of one of the scraped files, and every label a query
// selects on or groups by must be a label of one of the metrics it names (or one
// Prometheus adds: instance, job, le). Prints what it checked; exits 1 on a problem.
import fs from 'node:fs';

const [file, ...scrapes] = process.argv.slice(2);
if (!file || scrapes.length === 0) {
  console.error('usage: grafana_check.mjs <dashboard.json> <metrics file>...');
  process.exit(2);
}
const problems = [];

/* sample name -> set of label names, from Prometheus text files */
const samples = new Map();
for (const f of scrapes) {
  for (const line of fs.readFileSync(f, 'utf8').split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s/.exec(line);
    if (!m) continue;
    const labels = samples.get(m[1]) || new Set();
    for (const l of (m[3] || '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="/g)) labels.add(l[1]);
    samples.set(m[1], labels);
  }
}
const ADDED = new Set(['instance', 'job', 'le']);

let dash;
try {
  dash = JSON.parse(fs.readFileSync(file, 'utf8'));
} catch (e) {
  console.error(`grafana_check: ${file}: ${e.message}`);
  process.exit(1);
}
if (!dash.title || !dash.uid) problems.push('the dashboard needs a title and a uid');
const dsVar = (dash.templating?.list || []).find((v) => v.type === 'datasource' && v.query === 'prometheus');
if (!dsVar) problems.push('no datasource variable of type prometheus');
const dsRef = `\${${dsVar?.name}}`;

/* every panel, rows' nested ones too */
const panels = [];
(function walk(list) {
  for (const p of list || []) {
    panels.push(p);
    walk(p.panels);
  }
})(dash.panels);
const ids = new Set();
const exprs = [];
for (const p of panels) {
  if (ids.has(p.id)) problems.push(`panel id ${p.id} is used twice`);
  ids.add(p.id);
  if (!p.gridPos) problems.push(`panel "${p.title}" has no gridPos`);
  if (p.type === 'row') continue;
  if (p.datasource?.uid !== dsRef) problems.push(`panel "${p.title}": datasource is not ${dsRef}`);
  if (!p.targets?.length) problems.push(`panel "${p.title}" has no query`);
  for (const t of p.targets || []) {
    if (t.datasource?.uid !== dsRef) problems.push(`panel "${p.title}" query ${t.refId}: datasource is not ${dsRef}`);
    exprs.push({ panel: p.title, expr: t.expr || '' });
  }
}

const KEYWORDS = new Set(['sum', 'max', 'min', 'avg', 'count', 'rate', 'increase', 'irate', 'by', 'without', 'on',
  'ignoring', 'group_left', 'group_right', 'bool', 'histogram_quantile', 'and', 'or', 'unless', 'offset',
  'topk', 'bottomk', 'abs', 'clamp_min', 'clamp_max', 'delta', 'deriv', 'time', 'vector', 'scalar']);
const names = new Set();
for (const { panel, expr } of exprs) {
  const where = `panel "${panel}": ${expr}`;
  // brackets balance (outside strings)
  const bare = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  const stack = [];
  for (const ch of bare) {
    if ('([{'.includes(ch)) stack.push(ch);
    else if (')]}'.includes(ch) && stack.pop() !== { ')': '(', ']': '[', '}': '{' }[ch]) {
      problems.push(`${where}: unbalanced "${ch}"`);
      break;
    }
  }
  if (stack.length) problems.push(`${where}: unclosed "${stack.join('')}"`);
  // metrics named, with the labels selected on
  const used = [];
  for (const m of bare.matchAll(/\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{([^}]*)\})?/g)) {
    const name = m[1];
    if (KEYWORDS.has(name) || !name.startsWith('cdc_')) continue;
    names.add(name);
    used.push(name);
    if (!samples.has(name)) {
      problems.push(`${where}: no process exports "${name}"`);
      continue;
    }
    for (const l of (m[3] || '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)/g))
      if (!samples.get(name).has(l[1]) && !ADDED.has(l[1])) problems.push(`${where}: "${name}" has no label "${l[1]}"`);
  }
  if (used.length === 0) problems.push(`${where}: names no cdc_ metric`);
  // labels grouped by must come from the metrics named
  for (const g of bare.matchAll(/\b(?:by|without|on|ignoring)\s*\(([^)]*)\)/g)) {
    for (const l of g[1].split(',').map((s) => s.trim()).filter(Boolean)) {
      if (ADDED.has(l)) continue;
      if (!used.some((n) => samples.get(n)?.has(l))) problems.push(`${where}: no metric it names has label "${l}"`);
    }
  }
}

// every process kind is on the dashboard
for (const prefix of ['cdc_capture_', 'cdc_coordinator_', 'cdc_worker_'])
  if (![...names].some((n) => n.startsWith(prefix))) problems.push(`no panel shows a ${prefix}* metric`);

if (problems.length) {
  console.error(`grafana_check: ${file}:\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log(`grafana_check: ${file}: ${panels.length} panels, ${exprs.length} queries, ${names.size} metrics, all exported`);
