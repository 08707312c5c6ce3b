// The S3 endpoint of the local compose stack (docker/docker-compose.local.yml, service
// "s3"): s3rver, the version the tests use (tests/js), serving the objects under --dir on
// every interface at --port, with the buckets given by --bucket created at start. It
// accepts the credentials the compose file gives the pipeline (MINIO_ROOT_USER and
// MINIO_ROOT_PASSWORD, as for MinIO) besides s3rver's own S3RVER/S3RVER. Objects are
// files <dir>/<bucket>/<key>._S3rver_object; chaos/s3export.mjs copies them out for the
// verifier.
//
// Two S3 guarantees that s3rver lacks and the chaos scenarios rely on are added here:
//   - a PUT is atomic: the body goes to a temporary file renamed into place once complete,
//     so a writer killed mid-upload leaves no partial object (s3rver writes in place, and
//     a HEAD then finds the truncated object);
//   - a PUT with If-None-Match: * fails with 412 when the object exists (s3rver ignores
//     the header), decided atomically by link(2).
//   node server.mjs [--port 9000] [--dir /data] [--bucket warehouse]...
import { AsyncLocalStorage } from 'node:async_hooks';
import crypto from 'node:crypto';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import S3rver from 's3rver';

const require = createRequire(import.meta.url);
// s3rver keeps its accounts in a registry; the dummy account is the one it signs with
const { DUMMY_ACCOUNT } = require('s3rver/lib/models/account');
const FilesystemStore = require('s3rver/lib/stores/filesystem');

const request = new AsyncLocalStorage(); // { ifNoneMatch } of the PUT being served

class PreconditionFailed extends Error {}

FilesystemStore.prototype.putObject = async function putObject(object) {
  const objectPath = this.getResourcePath(object.bucket, object.key, 'object');
  const tmp = `${objectPath}.${process.pid}-${crypto.randomBytes(6).toString('hex')}.uploading`;
  const md5 = crypto.createHash('md5');
  let size = 0;
  await fs.promises.mkdir(path.dirname(objectPath), { recursive: true });
  try {
    const count = new Transform({
      transform(chunk, encoding, callback) {
        md5.update(chunk);
        size += chunk.length;
        callback(null, chunk);
      },
    });
    const source = Buffer.isBuffer(object.content) ? [object.content] : object.content;
    await pipeline(source, count, fs.createWriteStream(tmp));
    const expected = object.metadata['content-length'];
    if (expected !== undefined && Number(expected) !== size) {
      throw new Error(`body of ${object.key} ended after ${size} of ${expected} bytes`);
    }
    if (request.getStore()?.ifNoneMatch) {
      try {
        await fs.promises.link(tmp, objectPath); // fails when the object exists
      } catch (err) {
        if (err.code === 'EEXIST') throw new PreconditionFailed(object.key);
        throw err;
      }
    } else {
      await fs.promises.rename(tmp, objectPath);
    }
  } finally {
    await fs.promises.rm(tmp, { force: true });
  }
  const digest = md5.digest('hex');
  await this.putMetadata(object.bucket, object.key, object.metadata, digest);
  return { size, md5: digest };
};

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
// first in the chain: the condition of a PUT reaches putObject, and its failure is S3's 412
server.middleware.unshift(async (ctx, next) => {
  const ifNoneMatch = ctx.method === 'PUT' && ctx.get('if-none-match').trim() === '*';
  try {
    await request.run({ ifNoneMatch }, next);
  } catch (err) {
    if (!(err instanceof PreconditionFailed)) throw err;
    ctx.status = 412;
    ctx.type = 'application/xml';
    ctx.body = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>PreconditionFailed</Code>' +
      '<Message>At least one of the pre-conditions you specified did not hold</Message></Error>';
  }
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
