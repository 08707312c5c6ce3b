// The S3 endpoint of the local compose stack (docker/docker-compose.local.yml, service
// "s3"): s3rver, the version the tests use (tests/js), serving the objects under --dir on
// every interface at --port, with the buckets given by --bucket created at start. It
// accepts the credentials the compose file gives the pipeline (MINIO_ROOT_USER and
// MINIO_ROOT_PASSWORD, as for MinIO) besides s3rver's own S3RVER/S3RVER. Objects are
// files <dir>/<bucket>/<key>._S3rver_object; chaos/s3export.mjs copies them out for the
// verifier.
//   node server.mjs [--port 9000] [--dir /data] [--bucket warehouse]...
import { createRequire } from 'node:module';
import fs from 'node:fs';
import S3rver from 's3rver';

const require = createRequire(import.meta.url);
// s3rver keeps its accounts in a registry; the dummy account is the one it signs with
const { DUMMY_ACCOUNT } = require('s3rver/lib/models/account');

const opt = { port: 9000, dir: '/data', buckets: [] };
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  const val = () => {
    if (i + 1 >= args.length) throw new Error(`s3rver: ${a} needs a value`);
    return args[++i];
  };
  if (a === '--port') opt.port = Number(val());
  else if (a === '--dir') opt.dir = val();
  else if (a === '--bucket') opt.buckets.push(val());
  else {
    console.error(`s3rver: unknown argument "${a}"\nusage: server.mjs [--port 9000] [--dir /data] [--bucket name]...`);
    process.exit(2);
  }
}

const user = process.env.MINIO_ROOT_USER;
const password = process.env.MINIO_ROOT_PASSWORD;
if (user && password) DUMMY_ACCOUNT.createKeyPair(user, password);

fs.mkdirSync(opt.dir, { recursive: true });
const server = new S3rver({
  address: '0.0.0.0',
  port: opt.port,
  directory: opt.dir,
  silent: true,
  configureBuckets: opt.buckets.map((name) => ({ name })),
});
await server.run();
console.log(`s3rver: listening on 0.0.0.0:${opt.port}, objects under ${opt.dir}, buckets ${opt.buckets.join(',') || '-'}`);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await server.close();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
