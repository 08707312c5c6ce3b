// Tests chaos/soak-report.mjs, the judge of `make soak`: a flat run passes; a process whose
// RSS, descriptors or threads grow after the warm-up, a lost row or a fault that did not
// recover fails it; the report states the recovery percentiles.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const report = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../chaos/soak-report.mjs');
const START = 1_700_000_000_000;
const MIN = 60_000;

// A 30-minute run sampled every 5 s: worker-0 with rss(t), fds(t), threads(t) (t in
// minutes), coordinator-0 flat with noise and a restart in the middle.
function run({ rss = () => 100, fds = () => 40, threads = () => 12, results, recoveries = [1.5, 2.5, 9], more = () => '' }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'soak-report-'));
  const samples = path.join(dir, 'samples');
  fs.mkdirSync(samples);
  let proc = '';
  for (let ms = 0; ms <= 30 * MIN; ms += 5000) {
    const t = ms / MIN;
    proc += `${START + ms}\tworker-0\t0\t${Math.round(rss(t) * 1024)}\t${Math.round(rss(t) * 1024)}\t${fds(t)}\t${threads(t)}\n`;
    const c = (t > 15 && t < 16 ? 20 : 60) + ((ms / 5000) % 3);
    proc += `${START + ms}\tcoordinator-0\t0\t${c * 1024}\t${70 * 1024}\t30\t9\n`;
    proc += more(START + ms, t);
  }
  fs.writeFileSync(path.join(samples, 'proc.tsv'), proc);
  fs.writeFileSync(path.join(samples, 'results.txt'), (results ?? [
    'kill-workers+double-fault 5 5 lost=0 duplicated=0 mismatched=0 ok',
    'schema-change+double-fault 4 4 lost=0 duplicated=0 mismatched=0 ok',
  ]).join('\n') + '\n');
  const rec = path.join(dir, 'recoveries.tsv');
  fs.writeFileSync(rec, recoveries.map((s, k) => `${START + (k + 1) * MIN}\t${s}`).join('\n') + '\n');
  const out = path.join(dir, 'out');
  const r = spawnSync('node', [report, samples, rec, out, String(START), String(START + 30 * MIN), '7'], { encoding: 'utf8' });
  const md = fs.readFileSync(path.join(out, 'soak.md'), 'utf8');
  fs.rmSync(dir, { recursive: true, force: true });
  return { status: r.status, stdout: r.stdout, md };
}

test('a flat run passes, with its recovery percentiles', () => {
  const r = run({ rss: (t) => 100 + (t < 6 ? 10 * t : 60) });
  assert.equal(r.status, 0, r.stdout);
  assert.match(r.md, /Verdict: ok/);
  assert.match(r.md, /No series trends upward/);
  assert.match(r.md, /3 recoveries,\s+p50 2\.5 s, p90 9\.0 s, max 9\.0 s/);
});

test('growth after the warm-up fails: RSS, descriptors, threads', () => {
  for (const [opt, what] of [
    [{ rss: (t) => 100 + 4 * t }, 'worker-0 rss'],
    [{ fds: (t) => 40 + Math.floor(t) }, 'worker-0 fds'],
    [{ threads: (t) => 12 + Math.floor(t / 4) }, 'worker-0 threads'],
  ]) {
    const r = run(opt);
    assert.equal(r.status, 1, what);
    assert.match(r.md, new RegExp(`\\*\\*Upward:\\*\\* ${what}`));
  }
});

test('a lost row or an unrecovered fault fails', () => {
  assert.equal(run({ results: ['kill-leader+double-fault 3 3 lost=1 duplicated=0 mismatched=0 FAILED'] }).status, 1);
  const r = run({ results: ['pause-worker+double-fault 3 2 lost=0 duplicated=0 mismatched=0 ok'] });
  assert.equal(r.status, 1);
  assert.match(r.md, /Failed runs: pause-worker\+double-fault \(ok, 2\/3\)/);
});

// capture-<i> with (rss MiB, fds, threads) at minute t
const capture = (i, f) => (ms, t) => { const [r, d, th] = f(t); return `${ms}\tcapture-${i}\t0\t${r * 1024}\t${r * 1024}\t${d}\t${th}\n`; };
const both = (a, b) => (ms, t) => a(ms, t) + b(ms, t);

test('replicas that swap roles are judged together: a swap passes, a leak in one fails', () => {
  // the streaming capture (36 MiB, 20 descriptors, 19 threads) and its standby (17, 9, 14)
  // trade places at minute 10: capture-0's own series rise as much as capture-1's fall,
  // which judged per process would fail the run (as the soak of 2026-12-07 did)
  const STREAMING = [36, 20, 19], STANDBY = [17, 9, 14];
  const swap = both(capture(0, (t) => (t < 10 ? STANDBY : STREAMING)), capture(1, (t) => (t < 10 ? STREAMING : STANDBY)));
  const r = run({ more: swap });
  assert.equal(r.status, 0, r.md);
  assert.match(r.md, /\| capture \(2\) \|/);
  assert.match(r.md, /\| capture-1 \|/);
  // capture-1 leaks a descriptor a minute while capture-0 stays flat
  const leak = both(capture(0, () => [36, 20, 19]), capture(1, (t) => [17, 9 + Math.floor(t), 14]));
  const l = run({ more: leak });
  assert.equal(l.status, 1);
  assert.match(l.md, /\*\*Upward:\*\* capture fds/);
});

test('workers are judged alone: two that each grow less than the floor pass', () => {
  // worker-0 as in run() plus worker-1, each +24 MiB over the judged window: their sum
  // would exceed the 32 MiB floor, but neither does
  const w1 = (ms, t) => `${ms}\tworker-1\t0\t${Math.round((100 + t) * 1024)}\t${Math.round((100 + t) * 1024)}\t40\t12\n`;
  const r = run({ rss: (t) => 100 + t, more: w1 });
  assert.equal(r.status, 0, r.md);
  assert.match(r.md, /No series trends upward/);
});
