// Fault-injecting TCP proxy the chaos suite owns, placed between one worker and the
// coordinator (the worker dials the proxy with --coordinator). For every new connection
// it looks up the current leader's endpoint in etcd (/cdc/<job>/leader, JSON with
// "endpoint": "tcp://host:port"), so the worker follows a leader failover through it.
//   SIGUSR1  cut: from now on every byte in either direction is dropped and new
//            connections are accepted but never forwarded (a partition: silence, no RST)
//   SIGUSR2  heal: the connections that lived through the cut are reset (both TCP ends
//            would have timed out) and new connections are forwarded again
//   SIGTERM  exit
// Usage: node chaos/faultproxy.mjs --listen 127.0.0.1:0 --port-file <f>
//          (--etcd http://127.0.0.1:2379 --job <job> | --target host:port)
// Loopback only: it refuses to forward anywhere but 127.0.0.0/8 and localhost.
import net from 'node:net';
import fs from 'node:fs';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const [lhost, lport] = (args.listen ?? '127.0.0.1:0').split(':');
let cut = false;
const conns = new Set();
const log = (s) => process.stderr.write(`faultproxy[${process.pid}]: ${s}\n`);

async function leaderTarget() {
  if (args.target) return args.target;
  const key = Buffer.from(`/cdc/${args.job}/leader`).toString('base64');
  const res = await fetch(`${args.etcd.split(',')[0]}/v3/kv/range`, {
    method: 'POST',
    body: JSON.stringify({ key }),
    signal: AbortSignal.timeout(2000),
  });
  const body = await res.json();
  const kv = body.kvs?.[0];
  if (!kv) throw new Error('no leader yet');
  const value = JSON.parse(Buffer.from(kv.value, 'base64').toString('utf8'));
  return String(value.endpoint).replace(/^tcp:\/\//, '');
}

function loopback(host) {
  return host === 'localhost' || /^127\./.test(host);
}

const server = net.createServer((client) => {
  const c = { client, upstream: null, cutThrough: cut };
  conns.add(c);
  client.on('error', () => {});
  client.on('close', () => {
    c.upstream?.destroy();
    conns.delete(c);
  });
  client.on('data', (d) => {
    if (!cut && !c.cutThrough && c.upstream) c.upstream.write(d);
  });
  if (cut) return; // accepted into the void
  client.pause();
  leaderTarget().then((target) => {
    const i = target.lastIndexOf(':');
    const host = target.slice(0, i);
    if (!loopback(host)) throw new Error(`refusing non-loopback target ${target}`);
    const up = net.connect(Number(target.slice(i + 1)), host);
    c.upstream = up;
    up.on('error', () => client.destroy());
    up.on('close', () => client.destroy());
    up.on('data', (d) => {
      if (!cut && !c.cutThrough) client.write(d);
    });
    up.on('connect', () => client.resume());
  }).catch((e) => {
    log(`no upstream: ${e.message}`);
    client.destroy();
  });
});

process.on('SIGUSR1', () => {
  cut = true;
  for (const c of conns) c.cutThrough = true;
  log(`cut (${conns.size} connections silenced)`);
});
process.on('SIGUSR2', () => {
  cut = false;
  let n = 0;
  for (const c of conns) {
    if (c.cutThrough) {
      c.client.destroy();
      c.upstream?.destroy();
      n++;
    }
  }
  log(`healed (${n} connections reset)`);
});
process.on('SIGTERM', () => {
  for (const c of conns) {
    c.client.destroy();
    c.upstream?.destroy();
  }
  server.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 500).unref();
});

server.listen(Number(lport), lhost, () => {
  const port = server.address().port;
  if (args['port-file']) fs.writeFileSync(args['port-file'], `${port}\n`);
  log(`listening on ${lhost}:${port}`);
});
