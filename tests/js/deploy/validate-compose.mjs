// Validates docker compose files offline: YAML (with merge keys), ${VAR:-default}
// interpolation as compose does it, the Compose Specification's JSON schema (vendored in
// schemas/compose-spec.json) with ajv, and the project's own rules for this stack:
// every depends_on target exists, every long-running service has a healthcheck, host
// ports bind to 127.0.0.1, bind mounts point at files in the repository.
//   node tests/js/deploy/validate-compose.mjs docker/docker-compose.yml
//   node tests/js/deploy/validate-compose.mjs docker/docker-compose.yml \
//        --override docker/docker-compose.local.yml     (the override merged over the file;
//        it must not replace a list of the file, which podman-compose 1.0.3 would append to)
// Prints one line per problem and exits 1 when there is any.
import { readFileSync, existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import Ajv from "ajv";
import { parse } from "yaml";

const here = dirname(fileURLToPath(import.meta.url));
const schema = JSON.parse(readFileSync(resolve(here, "schemas/compose-spec.json"), "utf8"));

/** Compose interpolation: ${VAR}, ${VAR:-default}, ${VAR-default}, $$ -> $. */
function interpolate(value, env) {
  if (typeof value === "string") {
    return value.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}/g,
      (m, name, op, def) => {
        if (m === "$$") return "$";
        const v = env[name];
        if (op === ":-") return v ? v : def;
        if (op === "-") return v !== undefined ? v : def;
        return v ?? "";
      });
  }
  if (Array.isArray(value)) return value.map((v) => interpolate(v, env));
  if (value && typeof value === "object") {
    const out = {};
    for (const [k, v] of Object.entries(value)) out[k] = interpolate(v, env);
    return out;
  }
  return value;
}

const load = (file, env) =>
  interpolate(parse(readFileSync(file, "utf8"), { merge: true, maxAliasCount: -1 }), env);

// A volume entry's target path (short "src:dst[:mode]" or long syntax).
const volumeTarget = (v) => (typeof v === "string" ? v.split(":")[1] ?? v : v.target);

/**
 * Compose's merge of an override into a base document: mappings merge key by key,
 * sequences and scalars of the override replace the base's, except ports (added up) and
 * volumes (added up, an override's volume replacing the base's with the same target).
 */
export function mergeCompose(base, over, key = "") {
  if (Array.isArray(base) && Array.isArray(over)) {
    if (key === "ports") return [...base, ...over];
    if (key === "volumes") {
      const targets = new Set(over.map(volumeTarget));
      return [...base.filter((v) => !targets.has(volumeTarget(v))), ...over];
    }
    return over;
  }
  if (base && over && typeof base === "object" && typeof over === "object" &&
      !Array.isArray(base) && !Array.isArray(over)) {
    const out = { ...base };
    for (const [k, v] of Object.entries(over)) out[k] = k in base ? mergeCompose(base[k], v, k) : v;
    return out;
  }
  return over;
}

export function validateCompose(path, env = {}, override = null) {
  const problems = [];
  let doc = load(path, env);
  // relative paths resolve from the first file's directory, as compose does
  const base = dirname(path);
  const file = override ? `${path} + ${override}` : path;
  if (override) {
    const over = load(override, env);
    // podman-compose 1.0.3 (Debian 12) appends an override's lists to the base's instead
    // of replacing them (a command, a health check's test): an override sets none of them
    const lists = (b, o, at) => {
      for (const [k, v] of Object.entries(o ?? {})) {
        if (!b || typeof b !== "object" || !(k in b)) continue;
        if (Array.isArray(v) && Array.isArray(b[k])) {
          problems.push(`${override}: ${at}.${k} replaces a list of ${path} (podman-compose appends it)`);
        } else if (v && typeof v === "object") lists(b[k], v, `${at}.${k}`);
      }
    };
    for (const [name, svc] of Object.entries(over.services ?? {})) lists(doc.services?.[name], svc, name);
    doc = mergeCompose(doc, over);
  }
  const ajv = new Ajv({ allErrors: true, strict: false });
  // the file names its draft by an https URL that ajv does not know; it is draft-07
  const { $schema: _draft, ...body } = schema;
  const validate = ajv.compile(body);
  if (!validate(doc)) {
    for (const e of validate.errors) {
      problems.push(`${file}: schema: ${e.instancePath || "/"} ${e.message}` +
        (e.params?.additionalProperty ? ` (${e.params.additionalProperty})` : ""));
    }
  }
  const services = doc.services ?? {};
  for (const [name, svc] of Object.entries(services)) {
    const deps = Array.isArray(svc.depends_on) ? svc.depends_on : Object.keys(svc.depends_on ?? {});
    for (const d of deps) {
      if (!services[d]) problems.push(`${file}: service "${name}" depends on unknown service "${d}"`);
    }
    for (const [d, cond] of Object.entries(Array.isArray(svc.depends_on) ? {} : svc.depends_on ?? {})) {
      if (cond.condition === "service_healthy" && services[d] && !services[d].healthcheck) {
        problems.push(`${file}: service "${name}" waits for "${d}" to be healthy, but "${d}" has no healthcheck`);
      }
      if (cond.condition === "service_completed_successfully" && services[d]?.restart &&
          services[d].restart !== "no") {
        problems.push(`${file}: service "${name}" waits for "${d}" to complete, but "${d}" restarts`);
      }
    }
    const oneShot = svc.restart === "no" || (!svc.restart && !svc.healthcheck && svc.entrypoint);
    const replaced = svc.deploy?.replicas === 0; // an override's way to leave a service out
    if (!svc.healthcheck && !oneShot && !svc.profiles && !replaced) {
      problems.push(`${file}: long-running service "${name}" has no healthcheck`);
    }
    for (const p of svc.ports ?? []) {
      const spec = typeof p === "string" ? p : `${p.host_ip ?? ""}:${p.published}:${p.target}`;
      if (!spec.startsWith("127.0.0.1:")) {
        problems.push(`${file}: service "${name}" publishes port "${spec}" on all interfaces; bind 127.0.0.1`);
      }
    }
    for (const v of svc.volumes ?? []) {
      const src = typeof v === "string" ? v.split(":")[0] : v.source;
      if (src && (src.startsWith(".") || src.startsWith("/"))) {
        if (!existsSync(resolve(base, src))) {
          problems.push(`${file}: service "${name}" mounts "${src}", which does not exist`);
        }
      } else if (src && !(doc.volumes ?? {})[src]) {
        problems.push(`${file}: service "${name}" uses undeclared volume "${src}"`);
      }
    }
    if (svc.build?.dockerfile) {
      const df = resolve(base, svc.build.context ?? ".", svc.build.dockerfile);
      if (!existsSync(df)) problems.push(`${file}: service "${name}" builds from missing ${df}`);
    }
  }
  return { doc, problems };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  let bad = 0;
  const args = process.argv.slice(2);
  for (let i = 0; i < args.length; i++) {
    const f = args[i];
    const override = args[i + 1] === "--override" ? args[i + 2] : null;
    if (override) i += 2;
    const { doc, problems } = validateCompose(f, {}, override);
    const name = override ? `${f} + ${override}` : f;
    for (const p of problems) console.log(p);
    bad += problems.length;
    if (!problems.length) {
      console.log(`${name}: ok (${Object.keys(doc.services ?? {}).length} services, Compose Specification schema)`);
    }
  }
  process.exit(bad ? 1 : 0);
}
