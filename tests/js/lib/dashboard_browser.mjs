// The coordinator's dashboard in a real browser (headless Chromium through
// puppeteer-core), against a running pipeline that tests/integration/pipeline/
// dashboard_browser.sh started:
//   node dashboard_browser.mjs --leader HOST:PORT --standby HOST:PORT --procs DIR
//        --screenshot FILE [--load-pid PID]
// It checks, in order:
//   1. the leader's page renders its tables, partitions, workers and plots;
//   2. the lag plot reacts to a paused worker: the owner of partition 0 gets SIGSTOP
//      (its process group, from <procs>/worker-N.pid) while the load runs, and its
//      partitions' lag lines must rise in the page; SIGCONT after, and the page shows the
//      worker healthy again;
//   3. with the load stopped and the pipeline caught up, every number the page shows
//      equals /status (fetched by this script just before and after reading the page);
//   4. a standby's page (/ui) says it is a standby and names the leader;
//   the leader's page lists the standby (role standby, present) after itself (this one,
//   leader), from /status "coordinators"; the standby's page lists both the same way;
//   5. no console error, no page error, no failed request, and no request left the
//      origin that served the page.
// Prints "dashboard_browser: ok" and exits 0, or the failed check and exits 1.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import puppeteer from 'puppeteer-core';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
const leader = `http://${args.leader}`;
const standby = `http://${args.standby}`;
const problems = [];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (...a) => console.log('dashboard_browser:', ...a);

function fail(msg) {
  throw new Error(msg);
}

async function status(base = leader) {
  const r = await fetch(`${base}/status?local=1`); // this coordinator's own, as the page reads it
  if (!r.ok) fail(`${base}/status: HTTP ${r.status}`);
  return r.json();
}

async function waitFor(what, secs, fn) {
  const end = Date.now() + secs * 1000;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e.message;
    }
    if (Date.now() > end) fail(`timed out after ${secs}s waiting for ${what}${typeof last === 'string' ? ` (${last})` : ''}`);
    await sleep(250);
  }
}

/* Watches a page for what must never happen. */
function guard(page, origin) {
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'assert') problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  page.on('request', (r) => {
    if (!r.url().startsWith(origin + '/') && !r.url().startsWith('data:')) problems.push(`request outside the origin: ${r.url()}`);
  });
}

/* Every [data-k] of the page: key -> list of data-v (a key may show twice). */
async function shown(page) {
  return page.evaluate(() => {
    const out = {};
    for (const e of document.querySelectorAll('[data-k]')) (out[e.dataset.k] ||= []).push(e.dataset.v);
    return out;
  });
}

/* The lag lines: series name -> {max, last, points}. */
async function lagLines(page) {
  return page.evaluate(() => {
    const out = {};
    for (const p of document.querySelectorAll('#plot-lag path[data-series]'))
      out[p.dataset.series] = { max: Number(p.dataset.max || 0), last: p.dataset.last, points: Number(p.dataset.points) };
    return out;
  });
}

const renders = (page) => page.evaluate(() => Number(document.body.dataset.renders || 0));

/* What /status says for each key the page uses; undefined = not from /status. */
function expected(st) {
  const e = {
    job: st.job, id: st.id, state: st.state, term: st.term, generation: st.generation,
    'leader.id': st.leader?.id, 'dlq.total': st.dlq.total,
  };
  for (const c of st.coordinators) for (const f of ['role', 'alive', 'admin', 'term']) e[`coordinators/${c.id}/${f}`] = c[f];
  for (const [c, n] of Object.entries(st.dlq.classes)) e[`dlq/${c}`] = n;
  for (const t of st.tables) {
    const k = `tables/${t.table}/`;
    e[k + 'rows'] = t.rows;
    e[k + 'fresh_p50_ms'] = t.fresh_p50_ms;
    e[k + 'fresh_p99_ms'] = t.fresh_p99_ms;
    e[k + 'fresh_max_ms'] = t.fresh_max_ms;
    for (const f of ['data_files', 'delete_files', 'avg_file_bytes', 'snapshots', 'compactions', 'epoch'])
      if (t.mirror) e[`${k}mirror.${f}`] = t.mirror[f];
    for (const f of ['data_files', 'snapshots'])
      if (t.changelog) e[`${k}changelog.${f}`] = t.changelog[f];
  }
  for (const a of st.assignment) {
    e[`partition/${a.partition}/partition`] = a.partition;
    e[`partition/${a.partition}/owner`] = a.owner || '–';
    e[`partition/${a.partition}/state`] = a.state;
    e[`partition/${a.partition}/lag`] = a.lag;
  }
  for (const w of st.workers) {
    e[`worker/${w.id}/health`] = w.health;
    e[`worker/${w.id}/incarnation`] = w.incarnation;
    e[`worker/${w.id}/partitions`] = w.partitions.join(',');
    e[`worker/${w.id}/dlq`] = Object.values(w.dlq).reduce((a, b) => a + b, 0);
  }
  return e;
}

const str = (v) => (v === null || v === undefined ? '' : String(v));

async function main() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'cdc-chromium-'));
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    userDataDir: profile,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-dev-shm-usage'],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 1000 });
    guard(page, leader);
    const resp = await page.goto(`${leader}/`, { waitUntil: 'load' });
    if (!resp.ok()) fail(`GET / answered ${resp.status()}`);
    const csp = resp.headers()['content-security-policy'] || '';
    if (!csp.includes("default-src 'none'") || !csp.includes("connect-src 'self'")) fail(`no strict Content-Security-Policy: "${csp}"`);

    // 1. it renders
    await waitFor('the page to render the leader\'s status', 30, async () => (await renders(page)) >= 2 &&
      (await page.$$eval('#tables tbody [data-k$="/rows"]', (e) => e.length)) >= 2 &&
      (await page.$$eval('#partitions tbody tr', (e) => e.length)) === 12 &&
      (await page.$$eval('#workers tbody [data-k$="/health"]', (e) => e.length)) >= 1);
    const lines = await waitFor('the lag lines', 30, async () => {
      const l = await lagLines(page);
      return Object.keys(l).length === 12 && l.p0.points >= 3 ? l : null;
    });
    // the coordinators: the leader (this one) first, then the standby, by id and role
    const sid = (await status(standby)).id;
    const coords = await waitFor('the leader\'s page to list the standby', 30, async () => {
      const rows = await page.$$eval('#coordinators tbody tr', (trs) => trs.map((tr) => ({
        text: tr.cells[0].textContent,
        role: tr.querySelector('[data-k$="/role"]')?.dataset.v,
        alive: tr.querySelector('[data-k$="/alive"]')?.dataset.v,
        key: tr.querySelector('[data-k$="/role"]')?.dataset.k,
      })));
      return rows.length === 2 && rows[1].key === `coordinators/${sid}/role` && rows[1].role === 'standby' &&
        rows[1].alive === 'true' ? rows : null;
    });
    const lst = await status();
    if (coords[0].key !== `coordinators/${lst.id}/role` || coords[0].role !== 'leader' || !coords[0].text.includes('(this one)'))
      fail(`the leader's page does not list itself first as the leader: ${JSON.stringify(coords)}`);
    const sc = lst.coordinators.find((c) => c.id === sid);
    if (lst.coordinators[0].id !== lst.id || lst.coordinators[0].role !== 'leader' || lst.coordinators[0].term !== lst.term ||
        !sc || sc.role !== 'standby' || !sc.alive || sc.admin !== args.standby || sc.term !== 0)
      fail(`the leader's /status lists the coordinators wrong: ${JSON.stringify(lst.coordinators)}`);
    log(`coordinators on the leader's page: ${coords.map((c) => `${c.text} ${c.role}`).join(', ')}`);
    log(`rendered: 12 lag lines, ${await page.$$eval('#tables tbody tr', (e) => e.length)} tables, ${await page.$eval('#plot-epochs', (e) => e.dataset.epochs)} epochs plotted`);

    // 2. a paused worker: its partitions' lag rises on the page
    await page.select('#range', '300');
    const st = await status();
    const owner = st.assignment[0].owner;
    const mine = st.assignment.filter((a) => a.owner === owner).map((a) => a.partition);
    // the newest value of each line just before the pause, and the highest one seen after
    const before = {}, peak = {};
    const now = await lagLines(page);
    for (const p of mine) {
      before[p] = Number(now[`p${p}`].last || 0);
      peak[p] = 0;
    }
    const pidFile = path.join(args.procs, `worker-${owner}.pid`);
    const pgid = Number(fs.readFileSync(pidFile, 'utf8').trim());
    log(`pausing worker ${owner} (partitions ${mine.join(',')}, lag now ${JSON.stringify(before)}, at most ${JSON.stringify(Object.fromEntries(mine.map((p) => [p, lines[`p${p}`].max])))} so far)`);
    process.kill(-pgid, 'SIGSTOP');
    let risen;
    try {
      risen = await waitFor(`the lag of partitions ${mine} to rise on the page`, 60, async () => {
        const l = await lagLines(page);
        for (const p of mine) peak[p] = Math.max(peak[p], Number(l[`p${p}`].last || 0));
        return mine.every((p) => peak[p] >= before[p] + 20) ? l : null;
      });
      const states = await page.$$eval('#partitions [data-k$="/state"]', (e) => e.map((x) => x.dataset.v));
      log(`lag rose while paused: ${mine.map((p) => `p${p} ${before[p]} -> ${peak[p]}`).join(', ')}; slot states ${[...new Set(states)].join(', ')}`);
    } finally {
      process.kill(-pgid, 'SIGCONT');
    }
    await waitFor(`worker ${owner} healthy again on the page`, 90, async () =>
      page.$eval(`[data-k="worker/${owner}/health"]`, (e) => e.dataset.v === 'ok').catch(() => false));
    log(`worker ${owner} resumed and healthy again`);

    // 3. load stopped, caught up: the page shows what /status says
    if (args['load-pid']) {
      try { process.kill(Number(args['load-pid']), 'SIGTERM'); } catch { /* already done */ }
    }
    await waitFor('the pipeline to catch up (every lag 0, rows steady)', 120, async () => {
      const a = await status();
      await sleep(1500);
      const b = await status();
      return a.state === 'RUNNING' && b.assignment.every((x) => x.lag === 0) &&
        JSON.stringify(a.tables.map((t) => [t.rows, t.mirror?.data_files])) === JSON.stringify(b.tables.map((t) => [t.rows, t.mirror?.data_files])) &&
        b.workers.every((w) => w.health === 'ok');
    });
    await sleep(1500); // a render of the steady state
    const s1 = await status();
    await page.click('#pause');
    const dom = await shown(page);
    const s2 = await status();
    await page.click('#pause');
    const e1 = expected(s1), e2 = expected(s2);
    let compared = 0;
    const mismatches = [];
    for (const [k, want] of Object.entries(e2)) {
      if (!(k in dom)) {
        if (k !== 'leader.id' || want) mismatches.push(`${k}: not shown (status ${str(want)})`);
        continue;
      }
      for (const v of dom[k]) {
        compared++;
        if (v !== str(want) && v !== str(e1[k])) mismatches.push(`${k}: page ${v}, status ${str(e1[k])} / ${str(want)}`);
      }
    }
    const committed = Number(dom['epochs.last_committed'][0]);
    if (!(committed >= s1.epochs.last_committed - 3 && committed <= s2.epochs.last_committed))
      mismatches.push(`epochs.last_committed: page ${committed}, status ${s1.epochs.last_committed}..${s2.epochs.last_committed}`);
    // what a person reads is the value too
    const texts = await page.$$eval('#tables td[data-k$="/rows"], #partitions td[data-k$="/lag"], #dlq td[data-k]',
      (es) => es.map((e) => [e.dataset.k, e.dataset.v, e.textContent]));
    for (const [k, v, t] of texts) if (t.replace(/,/g, '') !== v) mismatches.push(`${k}: shows "${t}" for ${v}`);
    if (mismatches.length) fail(`the page differs from /status:\n  ${mismatches.slice(0, 20).join('\n  ')}`);
    if (s2.dlq.total < 1) fail(`/status counts no dead letter (the poison record was not counted)`);
    log(`page = /status: ${compared} values (${s2.tables.length} tables, 12 partitions, ${s2.workers.length} workers, ${Object.keys(s2.dlq.classes).length} dead-letter classes, ${s2.dlq.total} dead letters)`);

    // the picture for docs/operations.md: the range that shows the pause
    await sleep(2500);
    await page.screenshot({ path: args.screenshot, fullPage: true });
    log(`screenshot ${args.screenshot}`);

    // 4. a standby's page
    const sp = await browser.newPage();
    await sp.setViewport({ width: 1400, height: 900 });
    guard(sp, standby);
    const sresp = await sp.goto(`${standby}/ui`, { waitUntil: 'load' });
    if (!sresp.ok()) fail(`standby GET /ui answered ${sresp.status()}`);
    await waitFor('the standby page to say so', 30, async () => (await renders(sp)) >= 1 &&
      sp.$eval('#banner', (e) => e.dataset.role === 'standby' && e.classList.contains('show')));
    const banner = await sp.$eval('#banner', (e) => e.textContent);
    const sst = await status(standby);
    if (sst.state !== 'STANDBY' || !banner.includes(s2.id) || !banner.includes(sst.leader.admin))
      fail(`standby banner "${banner}" does not name the leader ${s2.id} at ${sst.leader.admin}`);
    if ((await sp.$eval('#state', (e) => e.dataset.v)) !== 'STANDBY') fail('the standby page shows another state');
    log(`standby page: "${banner.trim()}"`);
    const srows = await waitFor('the standby\'s page to list both coordinators', 30, async () => {
      const rows = await sp.$$eval('#coordinators tbody tr', (trs) => trs.map((tr) => [tr.cells[0].textContent,
        tr.querySelector('[data-k$="/role"]')?.dataset.v]));
      return rows.length === 2 && rows[0][0] === s2.id && rows[0][1] === 'leader' &&
        rows[1][0] === `${sst.id} (this one)` && rows[1][1] === 'standby' ? rows : null;
    });
    log(`coordinators on the standby's page: ${srows.map((r) => r.join(' ')).join(', ')}`);
    await sleep(1500);
  } finally {
    await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  if (problems.length) fail(`the browser reported:\n  ${problems.join('\n  ')}`);
}

main().then(() => {
  log('ok');
}, (e) => {
  console.error(`dashboard_browser: ${e.message}`);
  if (problems.length) console.error(`  browser: ${problems.join('\n  ')}`);
  process.exit(1);
});
