// Validates Kubernetes objects against the Kubernetes OpenAPI schemas that the npm package
// kubernetes-models ships compiled (Kubernetes 1.33's API; nothing is downloaded at run time),
// and the Prometheus Operator's ServiceMonitor and PodMonitor against the schemas of its CRDs
// that @kubernetes-models/prometheus-operator ships compiled the same way.
//
// The schemas check types, required fields, enums and formats (a quantity such as "512Mi", a
// port number). Like the API server's OpenAPI, they allow fields they do not declare, which is
// how a misspelt `livenesProbe` goes unnoticed until the pod has no liveness probe. So this also
// rejects unknown fields, as `kubectl apply --validate=strict` and kubeconform -strict do: the
// document is handed to the package's validator through a Proxy that records every field the
// validator reads. The compiled validator reads each property its schema declares (and, for a
// map, every key), so a field it never read is one the schema does not know.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import * as admissionregistrationV1 from 'kubernetes-models/admissionregistration.k8s.io/v1';
import * as appsV1 from 'kubernetes-models/apps/v1';
import * as autoscalingV2 from 'kubernetes-models/autoscaling/v2';
import * as batchV1 from 'kubernetes-models/batch/v1';
import * as networkingV1 from 'kubernetes-models/networking.k8s.io/v1';
import * as policyV1 from 'kubernetes-models/policy/v1';
import * as rbacV1 from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import * as coreV1 from 'kubernetes-models/v1';
import * as monitoringV1 from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';

type ModelClass = (new (data?: unknown) => unknown) & { prototype: { validate(): void } };

/** apiVersion -> the package's models for it; a kind is looked up by name. */
const GROUPS: Record<string, Record<string, unknown>> = {
  v1: coreV1,
  'apps/v1': appsV1,
  'batch/v1': batchV1,
  'policy/v1': policyV1,
  'networking.k8s.io/v1': networkingV1,
  'autoscaling/v2': autoscalingV2,
  'rbac.authorization.k8s.io/v1': rbacV1,
  'admissionregistration.k8s.io/v1': admissionregistrationV1,
  'monitoring.coreos.com/v1': monitoringV1,
};

export const KUBERNETES_SCHEMA_SOURCE =
  'kubernetes-models 4.5.1 (Kubernetes 1.33 OpenAPI) and @kubernetes-models/prometheus-operator 4.4.4 (the CRDs of Prometheus Operator 0.65)';

/** Problems with one object: schema violations and unknown fields, as JSON pointers. Empty when valid. */
export function validateKubernetesObject(doc: unknown): string[] {
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return ['not a mapping'];
  const { apiVersion, kind } = doc as { apiVersion?: unknown; kind?: unknown };
  if (typeof apiVersion !== 'string' || typeof kind !== 'string') return ['apiVersion and kind are required'];
  const group = GROUPS[apiVersion];
  if (!group) return [`apiVersion ${apiVersion}: not one this validator knows (${Object.keys(GROUPS).join(', ')})`];
  const model = group[kind] as ModelClass | undefined;
  if (typeof model !== 'function' || typeof model.prototype?.validate !== 'function') {
    return [`kind ${kind} does not exist in ${apiVersion}`];
  }
  const read = new Set<string>();
  const present = new Set<string>();
  const tracked = track(doc, '', read, present);
  const problems: string[] = [];
  try {
    model.prototype.validate.call(tracked);
  } catch (err) {
    // The package's message lists every violation: "data/spec/replicas must be integer, ...".
    problems.push(
      ...String((err as Error).message)
        .split(/,\s(?=data[/\s])/)
        .map((s) => s.replace(/^data/, '').trim()),
    );
  }
  // The validator collects all errors, so it has read every declared field even when some failed.
  // Inside an unknown field everything is unread: name only the outermost.
  const unknown = [...present].filter((path) => !read.has(path));
  for (const path of unknown) {
    if (!unknown.some((outer) => path.startsWith(`${outer}/`))) problems.push(`${path}: unknown field`);
  }
  return problems;
}

/** A deep copy of `value` whose objects record, in `read`, each own field the validator reads. */
function track(value: unknown, path: string, read: Set<string>, present: Set<string>): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((item, i) => track(item, `${path}/${i}`, read, present));
  const copy: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value)) {
    const childPath = `${path}/${key}`;
    present.add(childPath);
    copy[key] = track(child, childPath, read, present);
  }
  return new Proxy(copy, {
    get(target, key, receiver) {
      if (typeof key === 'string' && Object.hasOwn(target, key)) read.add(`${path}/${key}`);
      return Reflect.get(target, key, receiver);
    },
  });
}

/** One object of a manifest, with the file it came from. */
export interface K8sDoc {
  file: string;
  obj: any;
}

/** Every object in the YAML files under `dir`, files in sorted order; a YAML error throws, naming the file. */
export function kubernetesDocuments(dir: string): K8sDoc[] {
  const files: string[] = [];
  const walk = (d: string) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (/\.ya?ml$/.test(entry.name)) files.push(path);
    }
  };
  walk(dir);
  const docs: K8sDoc[] = [];
  for (const file of files.sort()) {
    for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) {
      if (doc.errors.length > 0) throw new Error(doc.errors.map((e) => `${file}: ${e.message}`).join('\n'));
      const obj = doc.toJS();
      if (obj !== null && obj !== undefined) docs.push({ file, obj });
    }
  }
  return docs;
}
