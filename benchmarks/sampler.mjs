// Light-weight sampler of a running local pipeline (one process, no forks per sample, so
// that measuring steals as little CPU as possible from the 2-core machine under test).
// Every interval it appends to <out dir>:
//   samples.tsv      <unix ms> <consumer lag, records (sum of the workers'
//                    cdc_worker_partition_lag_records)> <last committed epoch>
//                    <machine CPU busy %, all cores = 100 x cores>
//   proc.tsv         <unix ms> <name> <cpu ticks (utime + stime)> <rss kB> <peak rss kB>
//                    <open file descriptors> <threads>
//                    for every process in <procs dir>/*.pid, the development broker and
//                    PostgreSQL (postmaster + its children: backends, walsenders). For
//                    PostgreSQL the memory columns are the tree's proportional set size
//                    (Pss, /proc/<pid>/smaps_rollup): a sum of RSS would count the shared
//                    buffers once per backend that touched them.
//   checkpoints.jsonl  each checkpoint of the leader's /status, once (by epoch)
//   tables.tsv       <unix ms> <last committed epoch> <Iceberg table> <data files>
//                    <delete files> <bytes> <snapshots>: the health of every mirror and
//                    changelog the leader's /status reports (its current snapshot's totals)
// usage: node sampler.mjs <out dir> <procs dir> <servers dir> [interval ms]
// Stops on SIGTERM/SIGINT.
import fs from 'node:fs';
import path from 'node:path';

const [outDir, procsDir, serversDir, intervalArg] = process.argv.slice(2);
const interval = Number(intervalArg ?? 1000);
fs.mkdirSync(outDir, { recursive: true });
const samples = fs.openSync(path.join(outDir, 'samples.tsv'), 'a');
const procs = fs.openSync(path.join(outDir, 'proc.tsv'), 'a');
const ckpts = fs.openSync(path.join(outDir, 'checkpoints.jsonl'), 'a');
const tables = fs.openSync(path.join(outDir, 'tables.tsv'), 'a');
const seenEpochs = new Set();
let stop = false;
process.on('SIGTERM', () => { stop = true; });
process.on('SIGINT', () => { stop = true; });

const read = (p) => { try { return fs.readFileSync(p, 'utf8'); } catch { return null; } };

function usage(pid) {
  const stat = read(`/proc/${pid}/stat`);
  const status = read(`/proc/${pid}/status`);
  if (!stat || !status) return null;
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const kb = (k) => Number((status.match(new RegExp(`^${k}:\\s+(\\d+)`, 'm')) ?? [0, 0])[1]);
  let fds = 0;
  try { fds = fs.readdirSync(`/proc/${pid}/fd`).length; } catch { /* exited */ }
  return {
    ticks: Number(f[11]) + Number(f[12]), rss: kb('VmRSS'), hwm: kb('VmHWM'), ppid: Number(f[1]),
    fds, threads: kb('Threads'),
  };
}

// Proportional set size, kB (shared pages divided among the processes that map them).
function pss(pid) {
  const r = read(`/proc/${pid}/smaps_rollup`);
  const m = r && r.match(/^Pss:\s+(\d+)/m);
  return m ? Number(m[1]) : null;
}

function children(ppid) {
  const out = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const s = read(`/proc/${d}/stat`);
    if (s && Number(s.slice(s.lastIndexOf(')') + 2).split(' ')[1]) === ppid) out.push(Number(d));
  }
  return out;
}

function watchList() {
  const list = [];
  for (const f of fs.existsSync(procsDir) ? fs.readdirSync(procsDir) : []) {
    if (!f.endsWith('.pid')) continue;
    const pid = Number(read(path.join(procsDir, f)));
    if (pid) list.push({ name: f.slice(0, -4), pid, tree: false });
  }
  const k = Number(read(path.join(serversDir, 'kafka.pid')));
  if (k) list.push({ name: 'kafka-dev', pid: k, tree: false });
  const pg = Number(read(path.join(serversDir, 'pg.pid')));
  if (pg) list.push({ name: 'postgres', pid: pg, tree: true });
  return list;
}

// Exited children's CPU would vanish from a sum over live processes; PostgreSQL's
// backends live for the whole load (pgbench keeps its connections), so this is exact
// during the measured window.
function sampleProcs(now) {
  let text = '';
  for (const w of watchList()) {
    const pids = w.tree ? [w.pid, ...children(w.pid)] : [w.pid];
    let t = 0, r = 0, h = 0, fds = 0, th = 0, any = false;
    for (const p of pids) {
      const u = usage(p);
      if (!u) continue;
      any = true;
      t += u.ticks;
      const shared = w.tree ? pss(p) : null;
      r += shared ?? u.rss;
      h += shared ?? u.hwm;
      fds += u.fds;
      th += u.threads;
    }
    if (any) text += `${now}\t${w.name}\t${t}\t${r}\t${h}\t${fds}\t${th}\n`;
  }
  fs.writeSync(procs, text);
}

let lastCpu = null;
function machineBusy() {
  const l = read('/proc/stat').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const idle = l[3] + l[4];
  const total = l.reduce((a, b) => a + b, 0);
  const ncpu = (read('/proc/stat').match(/^cpu\d+/gm) ?? [1]).length;
  let busy = 0;
  if (lastCpu && total > lastCpu.total) {
    busy = (1 - (idle - lastCpu.idle) / (total - lastCpu.total)) * 100 * ncpu;
  }
  lastCpu = { idle, total };
  return busy;
}

async function get(url) {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(900) });
    return r.ok ? await r.text() : null;
  } catch {
    return null;
  }
}

async function sampleStatus(now) {
  let lag = 0;
  let epoch = 0;
  const files = fs.existsSync(procsDir) ? fs.readdirSync(procsDir) : [];
  const http = (f) => (read(path.join(procsDir, f)) ?? '').trim();
  const workers = files.filter((f) => /^worker-.*\.http$/.test(f));
  const coords = files.filter((f) => /^coordinator-.*\.http$/.test(f));
  const texts = await Promise.all(workers.map((f) => get(`http://${http(f)}/metrics`)));
  for (const t of texts) {
    for (const m of (t ?? '').matchAll(/^cdc_worker_partition_lag_records(?:\{[^}]*\})?\s+(\S+)/gm)) {
      lag += Number(m[1]);
    }
  }
  const statuses = await Promise.all(coords.map((f) => get(`http://${http(f)}/status`)));
  for (const s of statuses) {
    let j;
    try { j = JSON.parse(s ?? ''); } catch { continue; }
    if (!j.is_leader) continue;
    epoch = j.epochs?.last_committed ?? 0;
    for (const c of j.checkpoints ?? []) {
      if (seenEpochs.has(c.epoch)) continue;
      seenEpochs.add(c.epoch);
      fs.writeSync(ckpts, JSON.stringify(c) + '\n');
    }
    let text = '';
    for (const t of j.tables ?? []) {
      for (const h of [t.mirror, t.changelog]) {
        if (h) text += `${now}\t${epoch}\t${h.table}\t${h.data_files}\t${h.delete_files}\t${h.bytes}\t${h.snapshots}\n`;
      }
    }
    if (text) fs.writeSync(tables, text);
  }
  fs.writeSync(samples, `${now}\t${lag}\t${epoch}\t${machineBusy().toFixed(1)}\n`);
}

machineBusy();
while (!stop) {
  const t0 = Date.now();
  sampleProcs(t0);
  await sampleStatus(t0);
  const wait = interval - (Date.now() - t0);
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
}
