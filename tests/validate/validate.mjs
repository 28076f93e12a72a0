#!/usr/bin/env node
// Validates Kubernetes objects (multi-document YAML files, or directories of them) against the
// Kubernetes, KEDA, Prometheus Operator and cert-manager schemas of the kubernetes-models packages.
//
//   node validate.mjs [--chart RENDERED.yaml]... [--examples DIR] [FILE|DIR]...
//
// For each object:
//   1. schema: the package's compiled JSON-schema validator (wrong types, missing required fields,
//      bad enums). An apiVersion/kind no package knows is an error.
//   2. strict keys: the schemas accept unknown fields (no additionalProperties: false), so a typo such
//      as `imagePullPolicyy` or a field at the wrong level would pass. We run the validator on a
//      Proxy that records every property it reads: a key the validator never looked at is not in the
//      schema, and is an error.
// Then, for consistency between examples/ and the chart (--chart files are the rendered chart):
//   3. every scalerAddress, and every DNS name in a Certificate, under *.svc names a Service the chart
//      renders, on a port it has;
//   4. every example Service in the chart's namespace selects pods the chart renders, on ports they have;
//   5. the Prometheus scrape config keeps the chart's agent pods by label and port name.
// Exit status 0 when all is well, 1 with one line per problem otherwise.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import YAML from "yaml";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const modules = path.join(here, "node_modules");

// Files under examples/ that are not Kubernetes objects, and what checks them instead.
const NOT_KUBERNETES = new Map([
  ["examples/profiles.yaml", "gpuscale --profiles file (tests/e2e)"],
  ["examples/scenarios/", "mock scenarios (tests/e2e)"],
  ["examples/simulate/models/", "gpuscale simulate workload models (tests/e2e/test_simulate.py)"],
  ["examples/prometheus/adapter-rules.yaml", "prometheus-adapter Helm values (compared with the chart's copy)"],
  ["examples/prometheus/scrape-config.yaml", "Prometheus config (promtool check config; check 5 below)"],
]);

// apiVersion group -> packages that model it (the first that has the kind wins).
const PACKAGES = [
  { pkg: "kubernetes-models", groups: null },
  { pkg: "@kubernetes-models/keda", groups: ["keda.sh"] },
  { pkg: "@kubernetes-models/prometheus-operator", groups: ["monitoring.coreos.com"] },
  { pkg: "@kubernetes-models/cert-manager", groups: ["cert-manager.io", "acme.cert-manager.io"] },
];

// What the pinned packages do not model, written out by hand (same checks: types, required keys,
// no unknown key). The HTTP add-on's HTTPScaledObject, from the fields of its CRD
// (kedacore/http-add-on config/crd/bases/http.keda.sh_httpscaledobjects.yaml, v1alpha1), and
// ScaledObject's spec.advanced.scalingModifiers (KEDA 2.12+; @kubernetes-models/keda 0.4.2 predates
// it), from KEDA's ScalingModifiers type (formula, target, activationTarget, metricType).
const T = (type, props, required = []) => ({ type, props, required });
const STR = T("string"), INT = T("integer");
const OWN_SCHEMAS = new Map([
  ["http.keda.sh/v1alpha1/HTTPScaledObject", T("object", {
    apiVersion: STR, kind: STR,
    metadata: T("object", { name: STR, namespace: STR, labels: T("map"), annotations: T("map") }, ["name"]),
    spec: T("object", {
      hosts: T("array", STR), pathPrefixes: T("array", STR),
      headers: T("array", T("object", { name: STR, value: STR }, ["name"])),
      scaleTargetRef: T("object", { apiVersion: STR, kind: STR, name: STR, service: STR, port: INT, portName: STR }, ["service"]),
      coldStartTimeoutFailoverRef: T("object", { service: STR, port: INT, portName: STR, timeoutSeconds: INT }, ["service"]),
      replicas: T("object", { min: INT, max: INT }),
      scaledownPeriod: INT, initialCooldownPeriod: INT, targetPendingRequests: INT,
      scalingMetric: T("object", {
        concurrency: T("object", { targetValue: INT }),
        requestRate: T("object", { targetValue: INT, window: STR, granularity: STR }),
      }),
      timeouts: T("object", { conditionWait: STR, responseHeader: STR }),
    }, ["scaleTargetRef"]),
  }, ["apiVersion", "kind", "metadata", "spec"])],
]);
const SCALING_MODIFIERS = T("object", {
  formula: STR, target: STR, activationTarget: STR,
  metricType: Object.assign(T("string"), { enum: ["AverageValue", "Value", "Utilization"] }),
});

function checkOwn(schema, v, at, out) {
  const kind = Array.isArray(v) ? "array" : v === null ? "null" : Number.isInteger(v) ? "integer" : typeof v;
  if (schema.type === "map") {
    if (kind !== "object") return out.push(`${at || "/"} must be a map`);
    for (const [k, x] of Object.entries(v)) if (typeof x !== "string") out.push(`${at}/${k} must be a string`);
    return;
  }
  if (kind !== schema.type) return out.push(`${at || "/"} must be ${schema.type}, not ${kind}`);
  if (schema.enum && !schema.enum.includes(v)) return out.push(`${at} must be one of ${schema.enum.join(", ")}`);
  if (schema.type === "array") return v.forEach((x, i) => checkOwn(schema.props, x, `${at}/${i}`, out));
  if (schema.type !== "object") return;
  for (const r of schema.required) if (!(r in v)) out.push(`${at}/${r} is required`);
  for (const [k, x] of Object.entries(v)) {
    if (!schema.props[k]) out.push(`${at}/${k} is not a field`);
    else checkOwn(schema.props[k], x, `${at}/${k}`, out);
  }
}

const problems = [];
const problem = (where, msg) => problems.push(`${where}: ${msg}`);
let checked = 0;

const validators = new Map();
async function validatorFor(apiVersion, kind) {
  const key = `${apiVersion}/${kind}`;
  if (validators.has(key)) return validators.get(key);
  const slash = apiVersion.lastIndexOf("/");
  const group = slash < 0 ? "" : apiVersion.slice(0, slash);
  let found = null;
  for (const { pkg, groups } of PACKAGES) {
    if (groups && !groups.includes(group)) continue;
    if (!groups && group.includes(".") && !group.endsWith(".k8s.io")) continue;
    const model = path.join(modules, pkg, apiVersion, `${kind}.mjs`);
    if (!fs.existsSync(model)) continue;
    // The model module imports its compiled validator from ../../_schemas/<Name>.mjs: use that one.
    const m = /from\s*"(\.[^"]*_schemas\/[^"]+\.mjs)"/.exec(fs.readFileSync(model, "utf8"));
    if (!m) continue;
    const mod = await import(pathToFileURL(path.resolve(path.dirname(model), m[1])).href);
    found = { validate: mod.validate, pkg };
    break;
  }
  validators.set(key, found);
  return found;
}

// Wraps an object tree in Proxies that record which keys of each object were read.
function recorder(tree) {
  const reads = new WeakMap();
  const proxies = new WeakMap();
  const wrap = (o) => {
    if (o === null || typeof o !== "object") return o;
    if (proxies.has(o)) return proxies.get(o);
    const read = new Set();
    reads.set(o, read);
    const p = new Proxy(o, {
      get(t, k, r) {
        if (typeof k === "string") read.add(k);
        return wrap(Reflect.get(t, k, r));
      },
      has(t, k) {
        if (typeof k === "string") read.add(k);
        return Reflect.has(t, k);
      },
      getOwnPropertyDescriptor(t, k) {
        if (typeof k === "string") read.add(k);
        return Reflect.getOwnPropertyDescriptor(t, k);
      },
    });
    proxies.set(o, p);
    return p;
  };
  return { proxy: wrap(tree), reads };
}

function unknownKeys(o, reads, at, out) {
  if (o === null || typeof o !== "object") return;
  if (Array.isArray(o)) {
    o.forEach((v, i) => unknownKeys(v, reads, `${at}/${i}`, out));
    return;
  }
  const read = reads.get(o) || new Set();
  for (const k of Object.keys(o)) {
    if (!read.has(k)) out.push(`${at}/${k}`);
    else unknownKeys(o[k], reads, `${at}/${k}`, out);
  }
}

async function validateObject(obj, where) {
  checked++;
  if (!obj || typeof obj !== "object" || Array.isArray(obj)) return problem(where, "not an object");
  const { apiVersion, kind } = obj;
  if (typeof apiVersion !== "string" || typeof kind !== "string")
    return problem(where, "no apiVersion/kind: not a Kubernetes object");
  const own = OWN_SCHEMAS.get(`${apiVersion}/${kind}`);
  const ident = `${kind} ${obj.metadata?.namespace ? obj.metadata.namespace + "/" : ""}${obj.metadata?.name ?? "?"}`;
  if (own) {
    const out = [];
    checkOwn(own, obj, "", out);
    for (const e of out) problem(where, `${ident}: ${e} of ${apiVersion} ${kind} (own schema)`);
    return;
  }
  const mods = apiVersion === "keda.sh/v1alpha1" && kind === "ScaledObject" ? obj.spec?.advanced?.scalingModifiers : undefined;
  if (mods !== undefined) {
    const out = [];
    checkOwn(SCALING_MODIFIERS, mods, "/spec/advanced/scalingModifiers", out);
    for (const e of out) problem(where, `${ident}: ${e} (own schema)`);
    obj = structuredClone(obj);
    delete obj.spec.advanced.scalingModifiers;
  }
  const v = await validatorFor(apiVersion, kind);
  if (!v) return problem(where, `${apiVersion} ${kind}: no schema for this kind in ${PACKAGES.map((p) => p.pkg).join(", ")}`);
  const { proxy, reads } = recorder(obj);
  const ok = v.validate(proxy);
  const name = `${kind} ${obj.metadata?.namespace ? obj.metadata.namespace + "/" : ""}${obj.metadata?.name ?? "?"}`;
  if (!ok) {
    for (const e of v.validate.errors || [])
      problem(where, `${name}: ${e.instancePath || "/"} ${e.message || e.keyword} ${JSON.stringify(e.params)}`);
  }
  const unknown = [];
  unknownKeys(obj, reads, "", unknown);
  for (const u of unknown) problem(where, `${name}: ${u} is not a field of ${apiVersion} ${kind}`);
}

function yamlFiles(p) {
  const st = fs.statSync(p);
  if (!st.isDirectory()) return [p];
  return fs
    .readdirSync(p)
    .sort()
    .flatMap((n) => yamlFiles(path.join(p, n)))
    .filter((f) => /\.ya?ml$/.test(f));
}

function readDocs(file) {
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"));
  const out = [];
  docs.forEach((d, i) => {
    const where = `${path.relative(root, file)}#${i + 1}`;
    if (d.errors.length) for (const e of d.errors) problem(where, `YAML: ${e.message}`);
    else if (d.warnings.length) for (const e of d.warnings) problem(where, `YAML: ${e.message}`);
    const v = d.toJS({ maxAliasCount: 100 });
    if (v !== null && v !== undefined) out.push({ obj: v, where });
  });
  return out;
}

// ---- arguments
const args = process.argv.slice(2);
const chartFiles = [];
const exampleDirs = [];
const plain = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--chart") chartFiles.push(args[++i]);
  else if (args[i] === "--examples") exampleDirs.push(args[++i]);
  else plain.push(args[i]);
}
if (!chartFiles.length && !exampleDirs.length && !plain.length) {
  console.error("usage: node validate.mjs [--chart RENDERED.yaml]... [--examples DIR] [FILE|DIR]...");
  process.exit(2);
}

// ---- 1 + 2: schemas and strict keys
const chartObjs = [];
for (const f of chartFiles) for (const d of readDocs(f)) { chartObjs.push(d); await validateObject(d.obj, d.where); }
const plainObjs = [];
for (const p of plain) for (const f of yamlFiles(p)) for (const d of readDocs(f)) { plainObjs.push(d); await validateObject(d.obj, d.where); }
const exampleObjs = [];
const otherExampleFiles = [];
for (const dir of exampleDirs) {
  for (const f of yamlFiles(dir)) {
    const rel = path.relative(root, f);
    const skip = [...NOT_KUBERNETES.keys()].find((k) => (k.endsWith("/") ? rel.startsWith(k) : rel === k));
    if (skip) { otherExampleFiles.push(rel); continue; }
    for (const d of readDocs(f)) { exampleObjs.push(d); await validateObject(d.obj, d.where); }
  }
}

// ---- 3-5: examples against the chart
if (chartObjs.length && exampleObjs.length) {
  const services = new Map(); // "name.ns" -> Set(port)
  const pods = []; // {ns, labels, ports: [{name, containerPort}]}
  for (const { obj } of chartObjs) {
    const ns = obj.metadata?.namespace;
    if (obj.kind === "Service") services.set(`${obj.metadata.name}.${ns}`, new Set((obj.spec.ports || []).map((p) => p.port)));
    const tpl = obj.kind === "CronJob" ? obj.spec?.jobTemplate?.spec?.template : obj.spec?.template;
    if (tpl && ["DaemonSet", "Deployment", "StatefulSet", "CronJob"].includes(obj.kind))
      pods.push({ ns, labels: tpl.metadata?.labels || {}, ports: (tpl.spec.containers || []).flatMap((c) => c.ports || []) });
  }
  const namespaces = new Set(pods.map((p) => p.ns));
  const svcRe = /^([a-z0-9-]+)\.([a-z0-9-]+)\.svc(\.cluster\.local)?$/;
  const checkHost = (host, port, where, what) => {
    const m = svcRe.exec(host);
    if (!m || !namespaces.has(m[2])) return; // not one of ours (e.g. Prometheus)
    const ports = services.get(`${m[1]}.${m[2]}`);
    if (!ports) problem(where, `${what} ${host}: the chart renders no Service ${m[1]} in namespace ${m[2]} (it has: ${[...services.keys()].join(", ")})`);
    else if (port !== undefined && !ports.has(port)) problem(where, `${what} ${host}:${port}: Service ${m[1]} has no port ${port}`);
  };
  const walk = (o, fn, at = "") => {
    if (o && typeof o === "object") for (const [k, v] of Object.entries(o)) { fn(k, v, `${at}/${k}`); walk(v, fn, `${at}/${k}`); }
  };
  for (const { obj, where } of exampleObjs) {
    walk(obj, (k, v, at) => {
      if (k === "scalerAddress" && typeof v === "string") {
        const m = /^(.*):(\d+)$/.exec(v);
        if (!m) problem(where, `${at}: scalerAddress ${v} has no port`);
        else checkHost(m[1], Number(m[2]), where, "scalerAddress");
      }
    });
    if (obj.kind === "Certificate") for (const n of obj.spec?.dnsNames || []) checkHost(n, undefined, where, "dnsName");
    if (obj.kind === "Service" && namespaces.has(obj.metadata?.namespace) && obj.spec?.selector) {
      const sel = obj.spec.selector;
      const match = pods.filter((p) => p.ns === obj.metadata.namespace && Object.entries(sel).every(([k, v]) => p.labels[k] === v));
      if (!match.length) problem(where, `Service ${obj.metadata.name}: selector ${JSON.stringify(sel)} matches no pod the chart renders`);
      for (const sp of obj.spec.ports || []) {
        const t = sp.targetPort ?? sp.port;
        const ok = match.some((p) => p.ports.some((cp) => cp.containerPort === t || cp.name === t));
        if (match.length && !ok) problem(where, `Service ${obj.metadata.name}: targetPort ${t} is not a port of the selected pods`);
      }
    }
  }
  // 5: the plain Prometheus scrape config keeps the agent pods by label and container port name.
  const scrape = path.join(root, "examples/prometheus/scrape-config.yaml");
  if (fs.existsSync(scrape)) {
    const cfg = YAML.parse(fs.readFileSync(scrape, "utf8"));
    for (const job of cfg.scrape_configs || []) {
      const keep = (job.relabel_configs || []).filter((r) => r.action === "keep");
      const labelKeep = keep.find((r) => (r.source_labels || []).some((s) => s.startsWith("__meta_kubernetes_pod_label_")));
      const portKeep = keep.find((r) => (r.source_labels || []).includes("__meta_kubernetes_pod_container_port_name"));
      const matches = pods.filter((p) => {
        if (!labelKeep) return true;
        const label = labelKeep.source_labels[0].replace("__meta_kubernetes_pod_label_", "");
        const val = Object.entries(p.labels).find(([k]) => k.replace(/[^a-zA-Z0-9_]/g, "_") === label)?.[1];
        return val !== undefined && new RegExp(`^(?:${labelKeep.regex})$`).test(val);
      });
      const where = `examples/prometheus/scrape-config.yaml job ${job.job_name}`;
      if (!matches.length) problem(where, "keeps no pod the chart renders");
      else if (portKeep && !matches.some((p) => p.ports.some((cp) => new RegExp(`^(?:${portKeep.regex})$`).test(cp.name || ""))))
        problem(where, `keeps container port ${portKeep.regex}, which the chart's pods do not name`);
    }
  }
}

for (const p of problems) console.log(`FAIL ${p}`);
console.log(
  `validate: ${checked} objects from ${chartFiles.length} rendered chart file(s), ${exampleObjs.length} example object(s), ` +
    `${plainObjs.length} other; ${otherExampleFiles.length} example file(s) are not Kubernetes objects (checked elsewhere); ` +
    `${problems.length} problem(s)`,
);
process.exit(problems.length ? 1 : 0);
