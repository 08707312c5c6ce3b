// Validates rendered Kubernetes manifests offline (no cluster): every object against the
// Kubernetes OpenAPI schemas (the pinned npm package kubernetes-models, generated from
// the API server's OpenAPI specification, ajv validators), then the deployment rules of
// this project (docs/deployment.md): non-root, read-only root filesystem, no
// capabilities, probes on /healthz and /readyz, requests and limits, scrape
// annotations, a capture with Recreate, two coordinators, a worker StatefulSet, pinned
// images, the coordinators' CDC_EXPECTED_WORKERS equal to the workers' replicas, TLS
// files (sslrootcert) mounted where the DSN says, no Kafka password in clear, and
// references (ConfigMaps, Secrets, volumes, $(VAR)s, Service, PDB and ServiceMonitor
// selectors) that resolve. The Prometheus Operator's ServiceMonitor and PrometheusRule
// are not in kubernetes-models: their structure is checked here, the rules by promtool.
//   kubectl kustomize k8s/overlays/dev | node tests/js/deploy/validate-k8s.mjs - dev
//   node tests/js/deploy/validate-k8s.mjs rendered.yaml prod
// The second argument names the overlay: `prod` must contain no Secret (they are created
// in the cluster), `dev` must bring every Secret it references.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const modelCache = new Map();

// Custom resources the overlays may render, checked by hand (kubernetes-models has only
// the core API): apiVersion/kind -> a function returning problems.
const CUSTOM = {
  "monitoring.coreos.com/v1/ServiceMonitor": (o) => {
    const p = [];
    if (!o.spec?.selector?.matchLabels) p.push("spec.selector.matchLabels is required");
    if (!(o.spec?.endpoints ?? []).length) p.push("spec.endpoints must not be empty");
    for (const ep of o.spec?.endpoints ?? []) if (!ep.port) p.push("every endpoint needs a named port");
    return p;
  },
  "monitoring.coreos.com/v1/PrometheusRule": (o) => {
    const p = [];
    if (!(o.spec?.groups ?? []).length) p.push("spec.groups must not be empty");
    for (const g of o.spec?.groups ?? []) {
      if (!g.name || !(g.rules ?? []).length) p.push(`group ${g.name}: a name and rules are required`);
      for (const r of g.rules ?? []) {
        if (!(r.alert || r.record) || !r.expr) p.push(`group ${g.name}: every rule needs alert (or record) and expr`);
        if (r.alert && !r.labels?.severity) p.push(`alert ${r.alert}: labels.severity is required`);
      }
    }
    return p;
  },
};

async function modelFor(apiVersion, kind) {
  const key = `${apiVersion}/${kind}`;
  if (!modelCache.has(key)) {
    let cls = null;
    try {
      const mod = await import(`kubernetes-models/${apiVersion}`);
      cls = mod[kind] ?? null;
    } catch {
      cls = null;
    }
    modelCache.set(key, cls);
  }
  return modelCache.get(key);
}

function podSpecOf(obj) {
  switch (obj.kind) {
    case "Deployment":
    case "StatefulSet":
    case "DaemonSet":
    case "Job":
      return obj.spec?.template?.spec;
    case "CronJob":
      return obj.spec?.jobTemplate?.spec?.template?.spec;
    case "Pod":
      return obj.spec;
    default:
      return null;
  }
}

function labelsMatch(selector, labels) {
  return Object.entries(selector ?? {}).every(([k, v]) => labels?.[k] === v);
}

export async function validateManifests(text, overlay) {
  const problems = [];
  const objects = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length) {
      problems.push(`yaml: ${doc.errors[0].message}`);
      continue;
    }
    const obj = doc.toJS();
    if (obj) objects.push(obj);
  }
  const id = (o) => `${o.kind}/${o.metadata?.name}`;

  // 1. OpenAPI schema of every object
  for (const obj of objects) {
    if (!obj.apiVersion || !obj.kind || !obj.metadata?.name) {
      problems.push(`${id(obj)}: apiVersion, kind and metadata.name are required`);
      continue;
    }
    const custom = CUSTOM[`${obj.apiVersion}/${obj.kind}`];
    if (custom) {
      for (const p of custom(obj)) problems.push(`${id(obj)}: ${p}`);
      continue;
    }
    const Model = await modelFor(obj.apiVersion, obj.kind);
    if (!Model) {
      problems.push(`${id(obj)}: unknown apiVersion/kind ${obj.apiVersion} ${obj.kind}`);
      continue;
    }
    try {
      new Model(obj).validate();
    } catch (e) {
      const detail = (e.errors ?? []).map((x) => `${x.instancePath} ${x.message}`).join("; ");
      problems.push(`${id(obj)}: schema: ${detail || e.message}`);
    }
  }

  // 2. references resolve
  const byKind = (k) => objects.filter((o) => o.kind === k);
  const names = (k) => new Set(byKind(k).map((o) => o.metadata.name));
  const configMaps = names("ConfigMap");
  const secrets = names("Secret");
  const secretRefs = new Set();
  const workloads = objects.filter((o) => podSpecOf(o));
  for (const w of workloads) {
    const spec = podSpecOf(w);
    const containers = [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
    for (const c of containers) {
      for (const ef of c.envFrom ?? []) {
        if (ef.configMapRef && !configMaps.has(ef.configMapRef.name)) {
          problems.push(`${id(w)}: container ${c.name} uses missing ConfigMap ${ef.configMapRef.name}`);
        }
        if (ef.secretRef) secretRefs.add(ef.secretRef.name);
      }
      const defined = new Set();
      for (const e of c.env ?? []) {
        const cm = e.valueFrom?.configMapKeyRef;
        if (cm && !configMaps.has(cm.name)) {
          problems.push(`${id(w)}: container ${c.name} env ${e.name} uses missing ConfigMap ${cm.name}`);
        }
        if (e.valueFrom?.secretKeyRef) secretRefs.add(e.valueFrom.secretKeyRef.name);
        // Kubernetes expands $(VAR) only from entries above this one
        for (const m of String(e.value ?? "").matchAll(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g)) {
          if (!defined.has(m[1])) {
            problems.push(`${id(w)}: container ${c.name} env ${e.name} refers to $(${m[1]}), not defined above it`);
          }
        }
        defined.add(e.name);
      }
      const volumes = new Set((spec.volumes ?? []).map((v) => v.name));
      for (const t of w.spec?.volumeClaimTemplates ?? []) volumes.add(t.metadata?.name);
      for (const vm of c.volumeMounts ?? []) {
        if (!volumes.has(vm.name)) problems.push(`${id(w)}: container ${c.name} mounts missing volume ${vm.name}`);
      }
    }
    for (const v of spec.volumes ?? []) {
      if (v.secret?.secretName) secretRefs.add(v.secret.secretName);
      if (v.configMap?.name && !configMaps.has(v.configMap.name)) {
        problems.push(`${id(w)}: volume ${v.name} uses missing ConfigMap ${v.configMap.name}`);
      }
    }
    if (spec.serviceAccountName && !names("ServiceAccount").has(spec.serviceAccountName)) {
      problems.push(`${id(w)}: uses missing ServiceAccount ${spec.serviceAccountName}`);
    }
  }
  if (overlay === "prod" && secrets.size) {
    problems.push(`prod renders Secret(s) ${[...secrets].join(", ")}: secrets are created in the cluster, never kept in the repository`);
  }
  if (overlay !== "prod") {
    for (const s of secretRefs) {
      if (!secrets.has(s)) problems.push(`${overlay}: Secret ${s} is referenced but not part of the overlay`);
    }
  }
  for (const svc of byKind("Service")) {
    const sel = svc.spec?.selector;
    if (sel && !workloads.some((w) => labelsMatch(sel, w.spec?.template?.metadata?.labels))) {
      problems.push(`${id(svc)}: selector matches no pod template`);
    }
  }
  for (const sm of byKind("ServiceMonitor")) {
    const sel = sm.spec?.selector?.matchLabels;
    const svcs = byKind("Service").filter((s) => labelsMatch(sel, s.metadata?.labels));
    if (!svcs.length) problems.push(`${id(sm)}: selector matches no Service`);
    for (const ep of sm.spec?.endpoints ?? []) {
      for (const s of svcs) {
        if (!(s.spec?.ports ?? []).some((p) => p.name === ep.port)) {
          problems.push(`${id(sm)}: ${id(s)} has no port named ${ep.port}`);
        }
      }
    }
  }
  for (const pdb of byKind("PodDisruptionBudget")) {
    const sel = pdb.spec?.selector?.matchLabels;
    if (!workloads.some((w) => labelsMatch(sel, w.spec?.template?.metadata?.labels))) {
      problems.push(`${id(pdb)}: selector matches no workload`);
    }
  }
  for (const w of workloads) {
    const sel = w.spec?.selector?.matchLabels;
    if (sel && !labelsMatch(sel, w.spec?.template?.metadata?.labels)) {
      problems.push(`${id(w)}: selector does not match its own pod template`);
    }
  }

  // 3. rules for the cdc workloads themselves
  const cdc = workloads.filter((w) => w.metadata?.labels?.["app.kubernetes.io/part-of"] === "cdc");
  for (const w of cdc) {
    const spec = podSpecOf(w);
    const psc = spec.securityContext ?? {};
    if (psc.runAsNonRoot !== true) problems.push(`${id(w)}: pod securityContext.runAsNonRoot must be true`);
    if (spec.terminationGracePeriodSeconds === undefined) {
      problems.push(`${id(w)}: terminationGracePeriodSeconds must be set`);
    }
    const ann = w.spec?.template?.metadata?.annotations ?? {};
    if (ann["prometheus.io/scrape"] !== "true" || !ann["prometheus.io/port"]) {
      problems.push(`${id(w)}: pod template needs prometheus.io/scrape and prometheus.io/port annotations`);
    }
    for (const c of spec.containers ?? []) {
      const sc = c.securityContext ?? {};
      const where = `${id(w)} container ${c.name}`;
      if (sc.readOnlyRootFilesystem !== true) problems.push(`${where}: readOnlyRootFilesystem must be true`);
      if (sc.allowPrivilegeEscalation !== false) problems.push(`${where}: allowPrivilegeEscalation must be false`);
      if (!(sc.capabilities?.drop ?? []).includes("ALL")) problems.push(`${where}: capabilities.drop must include ALL`);
      for (const r of ["cpu", "memory"]) {
        if (!c.resources?.requests?.[r] || !c.resources?.limits?.[r]) {
          problems.push(`${where}: resources.requests and limits for ${r} are required`);
        }
      }
      if (c.livenessProbe?.httpGet?.path !== "/healthz") problems.push(`${where}: livenessProbe must GET /healthz`);
      if (c.readinessProbe?.httpGet?.path !== "/readyz") problems.push(`${where}: readinessProbe must GET /readyz`);
    }
  }
  // every image pinned: a tag (or digest) that is not latest
  for (const w of workloads) {
    const spec = podSpecOf(w);
    for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
      const img = String(c.image ?? "");
      const tag = img.includes("@") ? "digest" : img.slice(img.lastIndexOf("/") + 1).split(":")[1];
      if (!tag || tag === "latest") problems.push(`${id(w)} container ${c.name}: image ${img} is not pinned (a tag other than latest)`);
    }
  }
  // a CA file the DSN names is mounted in every container that reads the DSN; no Kafka
  // password in clear (ConfigMaps or env values; $(VAR) from a Secret is fine)
  const envOf = (c) => {
    const env = {};
    for (const ef of c.envFrom ?? []) {
      const cm = objects.find((o) => o.kind === "ConfigMap" && o.metadata?.name === ef.configMapRef?.name);
      Object.assign(env, cm?.data ?? {});
    }
    for (const e of c.env ?? []) if (e.value !== undefined) env[e.name] = e.value;
    return env;
  };
  const clearPassword = (v) => /sasl\.password=(?!\$\()[^;]+/.test(String(v));
  for (const cm of byKind("ConfigMap")) {
    for (const [k, v] of Object.entries(cm.data ?? {})) {
      if (clearPassword(v)) problems.push(`${id(cm)}: ${k} holds a Kafka password in clear`);
    }
  }
  for (const w of cdc) {
    for (const c of podSpecOf(w).containers ?? []) {
      const env = envOf(c);
      for (const [k, v] of Object.entries(env)) {
        if (clearPassword(v) && (c.env ?? []).some((e) => e.name === k)) {
          problems.push(`${id(w)} container ${c.name}: ${k} holds a Kafka password in clear`);
        }
      }
      if (!(c.args ?? []).includes("capture") || !env.CDC_PG_DSN) continue;
      const dsn = env.CDC_PG_DSN;
      const mode = /sslmode=(\S+)/.exec(dsn)?.[1];
      const root = /sslrootcert=(\S+)/.exec(dsn)?.[1];
      if ((mode === "verify-full" || mode === "verify-ca") && !root) {
        problems.push(`${id(w)} container ${c.name}: sslmode=${mode} without sslrootcert (the CA is not in the image)`);
      }
      if (root && !(c.volumeMounts ?? []).some((m) => root.startsWith(m.mountPath.replace(/\/?$/, "/")))) {
        problems.push(`${id(w)} container ${c.name}: sslrootcert ${root} is not under a mounted volume`);
      }
    }
  }
  const find = (kind, name) => objects.find((o) => o.kind === kind && o.metadata?.name === name);
  const capture = find("Deployment", "cdc-capture");
  const coord = find("Deployment", "cdc-coordinator");
  const worker = find("StatefulSet", "cdc-worker");
  if (!capture || capture.spec?.strategy?.type !== "Recreate") {
    problems.push("Deployment/cdc-capture must exist with strategy Recreate (one slot reader at a time)");
  }
  if (!coord || coord.spec?.replicas !== 2) problems.push("Deployment/cdc-coordinator must have 2 replicas");
  if (!worker || !(worker.spec?.replicas >= 1 && worker.spec?.replicas <= 12)) {
    problems.push("StatefulSet/cdc-worker must exist with 1..12 replicas");
  }
  for (const w of [coord, worker]) {
    if (w && !podSpecOf(w)?.affinity?.podAntiAffinity) problems.push(`${id(w)}: needs pod anti-affinity`);
  }
  // the coordinators wait for as many workers as the StatefulSet runs
  // (k8s/transformers/expected-workers copies the replicas when rendering)
  if (coord && worker) {
    const c = (podSpecOf(coord).containers ?? []).find((x) => x.name === "coordinator");
    const ew = (c?.env ?? []).find((e) => e.name === "CDC_EXPECTED_WORKERS")?.value;
    if (ew !== String(worker.spec?.replicas)) {
      problems.push(`Deployment/cdc-coordinator: CDC_EXPECTED_WORKERS ${ew} is not the worker StatefulSet's replicas ${worker.spec?.replicas}`);
    }
  }
  if (overlay === "prod") {
    for (const k of ["ServiceMonitor", "PrometheusRule"]) if (!byKind(k).length) problems.push(`prod: no ${k}`);
  }
  if (!byKind("NetworkPolicy").length) problems.push("no NetworkPolicy");
  if (!byKind("Namespace").length) problems.push("no Namespace");
  return { objects, problems };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [file = "-", overlay = "dev"] = process.argv.slice(2);
  const text = readFileSync(file === "-" ? 0 : file, "utf8");
  const { objects, problems } = await validateManifests(text, overlay);
  for (const p of problems) console.log(`${overlay}: ${p}`);
  if (!problems.length) {
    const kinds = {};
    for (const o of objects) kinds[o.kind] = (kinds[o.kind] ?? 0) + 1;
    console.log(`${overlay}: ok (${objects.length} objects valid against the Kubernetes OpenAPI schemas: ` +
      Object.entries(kinds).map(([k, n]) => `${n} ${k}`).join(", ") + ")");
  }
  process.exit(problems.length ? 1 : 0);
}
