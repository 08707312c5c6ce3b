// Copies a bucket that s3rver keeps as files (<bucket dir>/<key>._S3rver_object, the S3
// endpoint of the local compose stack, docker/local/s3rver) into a plain tree <out>/<key>,
// so that the verifier reads the warehouse as files:
//   node chaos/s3export.mjs <s3rver dir>/warehouse <out>
//   chaos/verify --warehouse <out> --path-map s3://warehouse/=<out>/ ...
// Repeated runs copy only what changed (size or modification time) and remove what the
// bucket no longer holds. An object whose metadata file is not there yet is being put:
// it is left for the next run. Run by chaos_verify (chaos/lib.sh) for CHAOS_S3_DIR.
import fs from 'node:fs';
import path from 'node:path';

const OBJECT = '._S3rver_object';
const METADATA = '._S3rver_metadata.json';

const [src, out] = process.argv.slice(2);
if (!src || !out) {
  console.error('usage: node chaos/s3export.mjs <s3rver bucket dir> <out dir>');
  process.exit(2);
}
if (!fs.existsSync(src)) {
  console.error(`s3export: no bucket directory ${src}`);
  process.exit(1);
}

const seen = new Set();
let copied = 0;

function walk(dir, rel) {
  for (const ent of fs.readdirSync(dir, { withFileTypes: true })) {
    const from = path.join(dir, ent.name);
    if (ent.isDirectory()) {
      walk(from, path.join(rel, ent.name));
      continue;
    }
    if (!ent.name.endsWith(OBJECT)) continue;
    const key = ent.name.slice(0, -OBJECT.length);
    if (!fs.existsSync(path.join(dir, key + METADATA))) continue;
    const to = path.join(out, rel, key);
    seen.add(to);
    const st = fs.statSync(from);
    let cur = null;
    try {
      cur = fs.statSync(to);
    } catch {
      // not copied yet
    }
    // utimes keeps microseconds at best: compare to the millisecond
    if (cur && cur.size === st.size && Math.abs(cur.mtimeMs - st.mtimeMs) < 1) continue;
    fs.mkdirSync(path.dirname(to), { recursive: true });
    fs.copyFileSync(from, to);
    fs.utimesSync(to, st.atime, st.mtime);
    copied++;
  }
}

function prune(dir) {
  if (!fs.existsSync(dir)) return;
  for (const ent of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, ent.name);
    if (ent.isDirectory()) prune(p);
    else if (!seen.has(p)) fs.rmSync(p);
  }
}

fs.mkdirSync(out, { recursive: true });
walk(src, '');
prune(out);
console.error(`s3export: ${seen.size} objects, ${copied} copied into ${out}`);
