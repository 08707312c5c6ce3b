#!/usr/bin/env node
// The circles of calls between the C files of each folder (docs/development.md, "Call
// circles"): file A calls B when A names a function that B defines and does not keep
// static (universal-ctags finds the definitions); a circle is a strongly connected set of
// two or more files. Prints every circle, largest first.
//
//   tools/circles.mjs                 the circles, one line each
//   tools/circles.mjs --check FILE    also fails (exit 1) when a circle is not inside one
//                                     of FILE's (a line of space-separated files each): a
//                                     new circle, or one grown past its recorded files
//   tools/circles.mjs --write FILE    records the circles found now as FILE
//   --max N (after --check FILE)      also fails on any circle of more than N files,
//                                     recorded or not
//   --root DIR (first)                the repository to look at (default: this one)
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import path from 'node:path';

const args = process.argv.slice(2);
let root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
if (args[0] === '--root' && args[1]) {
    root = path.resolve(args[1]);
    args.splice(0, 2);
}
process.chdir(root);

const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*.c'], {
    encoding: 'utf8',
})
    .split('\n')
    // files not added yet count (a new file's circle is found before its commit); a
    // tracked file deleted from the work tree does not
    .filter((f) => f && existsSync(f) && !f.startsWith('tests/') && !f.startsWith('benchmarks/'));
const byDir = new Map();
for (const f of files) {
    const d = path.dirname(f);
    if (!byDir.has(d)) byDir.set(d, []);
    byDir.get(d).push(f);
}

// non-static function definitions: name -> file
function definitions(list) {
    const out = execFileSync('ctags', ['-x', '--kinds-C=f', '--language-force=C', ...list], {
        encoding: 'utf8',
        maxBuffer: 64 << 20,
    });
    const defs = new Map();
    for (const line of out.split('\n')) {
        const m = /^(\S+)\s+function\s+\d+\s+(\S+)\s+(.*)$/.exec(line);
        if (!m || /^static\b/.test(m[3])) continue;
        defs.set(m[1], m[2]);
    }
    return defs;
}

// the identifiers a file names outside comments and literals
function identifiers(file) {
    const src = readFileSync(file, 'utf8')
        .replace(/\/\*[\s\S]*?\*\//g, ' ')
        .replace(/\/\/.*$/gm, ' ')
        .replace(/"(?:\\.|[^"\\\n])*"/g, '""')
        .replace(/'(?:\\.|[^'\\\n])*'/g, "''");
    return new Set(src.match(/[A-Za-z_][A-Za-z0-9_]*/g) || []);
}

// Tarjan's strongly connected components of the graph (file -> set of files)
function components(nodes, edges) {
    let index = 0;
    const idx = new Map(), low = new Map(), on = new Set(), stack = [], out = [];
    const visit = (v) => {
        idx.set(v, index);
        low.set(v, index++);
        stack.push(v);
        on.add(v);
        for (const w of edges.get(v) || []) {
            if (!idx.has(w)) {
                visit(w);
                low.set(v, Math.min(low.get(v), low.get(w)));
            } else if (on.has(w)) {
                low.set(v, Math.min(low.get(v), idx.get(w)));
            }
        }
        if (low.get(v) === idx.get(v)) {
            const comp = [];
            let w;
            do {
                w = stack.pop();
                on.delete(w);
                comp.push(w);
            } while (w !== v);
            if (comp.length > 1) out.push(comp.sort());
        }
    };
    for (const v of nodes) if (!idx.has(v)) visit(v);
    return out;
}

const circles = [];
for (const [, list] of [...byDir.entries()].sort()) {
    if (list.length < 2) continue;
    const defs = definitions(list);
    const edges = new Map();
    for (const f of list) {
        const to = new Set();
        for (const id of identifiers(f)) {
            const d = defs.get(id);
            if (d !== undefined && d !== f) to.add(d);
        }
        edges.set(f, to);
    }
    circles.push(...components(list, edges));
}
circles.sort((a, b) => b.length - a.length || a[0].localeCompare(b[0]));

for (const c of circles) console.log(`${c.length} files: ${c.join(' ')}`);
if (args[0] === '--write' && args[1]) {
    writeFileSync(
        args[1],
        '# The call circles between the files of a folder that remain (tools/circles.mjs; docs/development.md,\n' +
            '# "Call circles"): make lint fails on a circle that is not inside one of these lines.\n' +
            circles.map((c) => c.join(' ')).join('\n') +
            '\n',
    );
} else if (args[0] === '--check' && args[1]) {
    const known = existsSync(args[1])
        ? readFileSync(args[1], 'utf8')
              .split('\n')
              .filter((l) => l.trim() && !l.startsWith('#'))
              .map((l) => new Set(l.trim().split(/\s+/)))
        : [];
    let bad = 0;
    const max = args[2] === '--max' ? Number(args[3]) : Infinity;
    for (const c of circles) {
        if (c.length > max) {
            console.error(`lint: a call circle of ${c.length} files, more than ${max}: ${c.join(' ')} ` +
                '(break it: docs/development.md, "Call circles")');
            bad = 1;
            continue;
        }
        if (!known.some((k) => c.every((f) => k.has(f)))) {
            console.error(`lint: a new or grown call circle of ${c.length} files: ${c.join(' ')} ` +
                `(break it, or explain it in the files' opening comments and record it in ${args[1]})`);
            bad = 1;
        }
    }
    process.exit(bad);
}
