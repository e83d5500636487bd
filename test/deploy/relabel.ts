// Prometheus's target relabeling, for checking what job and address a scrape config gives a
// pod described by a manifest (without a cluster): the labels Kubernetes service discovery
// (role pod) would attach, and the replace/keep/drop/labelmap actions applied to them as
// Prometheus applies them. Regexes are anchored, as Prometheus anchors them.

export type Labels = Record<string, string>;

/** One relabel rule as prometheus.yml spells it (a Prometheus Operator one goes through fromOperator). */
export interface RelabelRule {
  source_labels?: string[];
  separator?: string;
  regex?: string;
  target_label?: string;
  replacement?: string;
  action?: string;
}

/** A Prometheus Operator relabeling (sourceLabels, targetLabel) in prometheus.yml's terms. */
export function fromOperator(r: any): RelabelRule {
  return {
    source_labels: r.sourceLabels,
    separator: r.separator,
    regex: r.regex,
    target_label: r.targetLabel,
    replacement: r.replacement,
    action: r.action?.toLowerCase(),
  };
}

const expand = (template: string) => template.replace(/\$\{(\w+)\}/g, '$$$1');

/** The labels after the rules, or undefined when a keep or drop rule drops the target. */
export function relabel(input: Labels, rules: RelabelRule[]): Labels | undefined {
  let labels = { ...input };
  for (const rule of rules) {
    const action = rule.action ?? 'replace';
    const regex = new RegExp(`^(?:${rule.regex ?? '(.*)'})$`);
    const value = (rule.source_labels ?? []).map((l) => labels[l] ?? '').join(rule.separator ?? ';');
    if (action === 'keep' && !regex.test(value)) return undefined;
    if (action === 'drop' && regex.test(value)) return undefined;
    if (action === 'replace') {
      if (!regex.test(value) || !rule.target_label) continue;
      const out = value.replace(regex, expand(rule.replacement ?? '$1'));
      if (out === '') delete labels[rule.target_label];
      else labels[rule.target_label] = out;
    } else if (action === 'labelmap') {
      const next = { ...labels };
      for (const [name, v] of Object.entries(labels)) if (regex.test(name)) next[name.replace(regex, expand(rule.replacement ?? '$1'))] = v;
      labels = next;
    } else if (!['keep', 'drop'].includes(action)) {
      throw new Error(`relabel action ${action}: not one this check knows (replace, keep, drop, labelmap)`);
    }
  }
  return labels;
}

const sanitize = (name: string) => name.replace(/[^a-zA-Z0-9_]/g, '_');

/**
 * The labels Kubernetes service discovery (role pod) gives one container port of a pod made
 * from `template` (a workload's spec.template), before relabeling; `job` and the defaults of
 * the scrape config included.
 */
export function podTargetLabels(
  template: any,
  target: { job: string; namespace: string; podName: string; podIp: string; container: any; port: any; init: boolean },
): Labels {
  const labels: Labels = {
    job: target.job,
    __address__: `${target.podIp}:${target.port.containerPort}`,
    __scheme__: 'http',
    __metrics_path__: '/metrics',
    __meta_kubernetes_namespace: target.namespace,
    __meta_kubernetes_pod_name: target.podName,
    __meta_kubernetes_pod_ip: target.podIp,
    __meta_kubernetes_pod_phase: 'Running',
    __meta_kubernetes_pod_ready: 'true',
    __meta_kubernetes_pod_container_name: target.container.name,
    __meta_kubernetes_pod_container_image: String(target.container.image ?? ''),
    __meta_kubernetes_pod_container_init: String(target.init),
    __meta_kubernetes_pod_container_port_name: target.port.name ?? '',
    __meta_kubernetes_pod_container_port_number: String(target.port.containerPort),
    __meta_kubernetes_pod_container_port_protocol: target.port.protocol ?? 'TCP',
  };
  for (const [k, v] of Object.entries<string>(template.metadata?.labels ?? {})) {
    labels[`__meta_kubernetes_pod_label_${sanitize(k)}`] = v;
    labels[`__meta_kubernetes_pod_labelpresent_${sanitize(k)}`] = 'true';
  }
  for (const [k, v] of Object.entries<string>(template.metadata?.annotations ?? {})) {
    labels[`__meta_kubernetes_pod_annotation_${sanitize(k)}`] = v;
    labels[`__meta_kubernetes_pod_annotationpresent_${sanitize(k)}`] = 'true';
  }
  return labels;
}

/** A selector's matchers, `job="x"` or `job=~"a|b"`, parsed. */
export interface Matcher {
  label: string;
  op: '=' | '!=' | '=~' | '!~';
  value: string;
}

export function parseMatchers(text: string): Matcher[] {
  const out: Matcher[] = [];
  const re = /\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(,|$)/gy;
  let m: RegExpExecArray | null;
  let at = 0;
  while ((m = re.exec(text)) !== null && m[0] !== '') {
    out.push({ label: m[1], op: m[2] as Matcher['op'], value: JSON.parse(`"${m[3]}"`) });
    at = re.lastIndex;
  }
  if (text.slice(at).trim() !== '') throw new Error(`cannot read the matchers ${JSON.stringify(text)}`);
  return out;
}

/** Whether a target's labels satisfy every matcher (a missing label is the empty string, as in PromQL). */
export function matches(matchers: Matcher[], labels: Labels): boolean {
  return matchers.every(({ label, op, value }) => {
    const v = labels[label] ?? '';
    if (op === '=') return v === value;
    if (op === '!=') return v !== value;
    const hit = new RegExp(`^(?:${value})$`).test(v);
    return op === '=~' ? hit : !hit;
  });
}
