// Tests tools/circles.mjs, the call-circle lint (docs/development.md, "Call circles"), on a
// repository it makes: a circle of two files is found and a file that only calls into it
// is not part of it; a static function makes no edge; --check fails on a circle the record
// lacks or one grown past it, and passes on one inside the record.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const script = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../tools/circles.mjs');

function repo(files) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'circles-'));
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.join(dir, path.dirname(name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), text);
  }
  execFileSync('git', ['init', '-q', dir]);
  execFileSync('git', ['-C', dir, 'add', '.']);
  return dir;
}

function run(dir, ...args) {
  return spawnSync('node', [script, '--root', dir, ...args], { encoding: 'utf8' });
}

const base = {
  'a/x.c': 'int y_one(void);\nint x_one(void) { return y_one(); }\n',
  'a/y.c': 'int x_one(void);\nint y_one(void) { return x_one() + 1; }\n',
  'a/w.c': 'int x_one(void);\nint z_one(void);\nint w_one(void) { return x_one() + z_one(); }\n',
  // z names w_one only in a comment and a string (w calls z: no circle of w and z), and
  // calls its own static helper
  'a/z.c': '/* w_one() */\nstatic int helper(void) { return 1; }\n' +
    'int z_one(void) { const char *s = "w_one()"; (void)s; return helper(); }\n',
  'b/x.c': 'int w_one(void) { return 0; }\n',
};

test('finds a circle of two files, not the file that only calls into it', () => {
  const dir = repo(base);
  const r = run(dir);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), '2 files: a/x.c a/y.c');
});

test('--check fails on an unrecorded circle and passes on a recorded one', () => {
  const dir = repo(base);
  const rec = path.join(dir, 'circles.txt');
  fs.writeFileSync(rec, '# none\n');
  let r = run(dir, '--check', rec);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /new or grown call circle of 2 files: a\/x\.c a\/y\.c/);
  assert.equal(run(dir, '--write', rec).status, 0);
  r = run(dir, '--check', rec);
  assert.equal(r.status, 0, r.stderr);
});

test('--check fails when a recorded circle grows a file', () => {
  const dir = repo(base);
  const rec = path.join(dir, 'circles.txt');
  assert.equal(run(dir, '--write', rec).status, 0);
  // y now calls w, which calls x: the circle is x, y, w
  fs.writeFileSync(path.join(dir, 'a/y.c'),
    'int x_one(void);\nint w_one(void);\nint y_one(void) { return x_one() + w_one(); }\n');
  const r = run(dir, '--check', rec);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /3 files: a\/w\.c a\/x\.c a\/y\.c/);
});

test('--check --max fails on a circle of more files than the limit, even a recorded one', () => {
  const dir = repo({
    ...base,
    'a/y.c': 'int x_one(void);\nint w_one(void);\nint y_one(void) { return x_one() + w_one(); }\n',
  });
  const rec = path.join(dir, 'circles.txt');
  assert.equal(run(dir, '--write', rec).status, 0);
  assert.equal(run(dir, '--check', rec, '--max', '3').status, 0);
  const r = run(dir, '--check', rec, '--max', '2');
  assert.equal(r.status, 1);
  assert.match(r.stderr, /call circle of 3 files, more than 2: a\/w\.c a\/x\.c a\/y\.c/);
});

test('a file not added to git yet counts; a tracked file deleted from the tree does not', () => {
  const dir = repo({ 'a/x.c': base['a/x.c'], 'a/gone.c': 'int gone(void) { return 0; }\n' });
  fs.writeFileSync(path.join(dir, 'a/y.c'), base['a/y.c']); // not added
  fs.unlinkSync(path.join(dir, 'a/gone.c')); // tracked, deleted
  const r = run(dir);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), '2 files: a/x.c a/y.c');
});
