// Tests chaos/faultproxy.mjs, the chaos suite's partition injector: bytes flow through
// it, SIGUSR1 silences existing and new connections (nothing forwarded, no reset),
// SIGUSR2 resets the silenced connections and forwards new ones again.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const proxyPath = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../chaos/faultproxy.mjs');

function until(cond, ms = 5000) {
  const deadline = Date.now() + ms;
  return new Promise((resolve, reject) => {
    const tick = () => {
      if (cond()) return resolve();
      if (Date.now() > deadline) return reject(new Error('timed out'));
      setTimeout(tick, 20);
    };
    tick();
  });
}

test('forwards, cuts and heals', async () => {
  const echo = net.createServer((c) => c.pipe(c));
  await new Promise((r) => echo.listen(0, '127.0.0.1', r));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'faultproxy-'));
  const portFile = path.join(dir, 'port');
  const proxy = spawn('node', [proxyPath, '--listen', '127.0.0.1:0', '--port-file', portFile,
    '--target', `127.0.0.1:${echo.address().port}`], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  proxy.stderr.on('data', (d) => { log += d; });
  try {
    await until(() => fs.existsSync(portFile) && fs.readFileSync(portFile, 'utf8').trim() !== '');
    const port = Number(fs.readFileSync(portFile, 'utf8'));
    const a = net.connect(port, '127.0.0.1');
    let got = '';
    let closed = false;
    a.on('data', (d) => { got += d; });
    a.on('close', () => { closed = true; });
    a.write('one');
    await until(() => got === 'one');

    proxy.kill('SIGUSR1');
    await until(() => log.includes('cut'));
    a.write('two');
    const b = net.connect(port, '127.0.0.1');
    let gotB = '';
    b.on('data', (d) => { gotB += d; });
    b.on('error', () => {});
    b.write('three');
    // absence of data can only be observed over a window: bytes that were forwarded
    // would be back from the echo server in well under 300 ms on loopback
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(got, 'one');
    assert.equal(gotB, '');
    assert.equal(closed, false, 'a cut must not reset connections');

    proxy.kill('SIGUSR2');
    await until(() => closed, 5000);
    const c = net.connect(port, '127.0.0.1');
    let gotC = '';
    c.on('data', (d) => { gotC += d; });
    c.write('four');
    await until(() => gotC === 'four');
    c.destroy();
    b.destroy();
  } finally {
    proxy.kill('SIGTERM');
    echo.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
