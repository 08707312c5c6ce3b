// Validates rendered Kubernetes manifests offline (no cluster): every object against the
// Kubernetes OpenAPI schemas (the pinned npm package kubernetes-models, generated from
// the API server's OpenAPI specification, ajv validators), then the deployment rules of
// this project (docs/deployment.md): non-root, read-only root filesystem, no
// capabilities, probes on /healthz and /readyz, requests and limits, scrape
// annotations, a capture with Recreate, two coordinators, a worker StatefulSet, and
// references (ConfigMaps, Secrets, Service and PDB selectors) that resolve.
//   kubectl kustomize k8s/overlays/dev | node tests/js/deploy/validate-k8s.mjs - dev
//   node tests/js/deploy/validate-k8s.mjs rendered.yaml prod
// The second argument names the overlay: `prod` must contain no Secret (they are created
// in the cluster), `dev` must bring every Secret it references.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const modelCache = new Map();

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
      for (const e of c.env ?? []) {
        const cm = e.valueFrom?.configMapKeyRef;
        if (cm && !configMaps.has(cm.name)) {
          problems.push(`${id(w)}: container ${c.name} env ${e.name} uses missing ConfigMap ${cm.name}`);
        }
        if (e.valueFrom?.secretKeyRef) secretRefs.add(e.valueFrom.secretKeyRef.name);
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
