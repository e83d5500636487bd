// PromQL found in the deploy assets: the Grafana dashboard's queries and the alert rules, with
// Grafana's variables replaced so that promtool can parse them.

export interface DashboardQuery {
  /** "panel 7 (Replays by result) A", for messages. */
  where: string;
  expr: string;
}

/**
 * Values for the variables a dashboard query may use: Grafana's built-in intervals and this
 * dashboard's own template variables. Any other `$name` is an error, so a query cannot depend on
 * a variable the dashboard does not define.
 */
const BUILTIN_VARIABLES: Record<string, string> = {
  __rate_interval: '1m',
  __interval: '15s',
  __range: '1h',
};

/**
 * Every panel query, its variables replaced: by `values` where given (resolveAll's, as Grafana
 * would with "All" selected), else a query variable by `.+` (enough for parsing). `raw` leaves
 * them as written, only checking each is defined.
 */
export function dashboardQueries(
  dashboard: any,
  options: { values?: Record<string, string>; raw?: boolean } = {},
): { queries: DashboardQuery[]; problems: string[] } {
  const problems: string[] = [];
  const queries: DashboardQuery[] = [];
  const variables = new Map<string, string>(Object.entries(BUILTIN_VARIABLES));
  for (const v of dashboard?.templating?.list ?? []) {
    // A datasource variable selects where queries go; a query variable stands for label values,
    // which this check replaces with a regex that matches them (the queries use `=~`).
    variables.set(v.name, options.values?.[v.name] ?? (v.type === 'query' ? '.+' : ''));
  }
  const ids = new Set<number>();
  const panels: any[] = [];
  for (const panel of dashboard?.panels ?? []) {
    panels.push(panel);
    for (const inner of panel.panels ?? []) panels.push(inner);
  }
  if (panels.length === 0) problems.push('the dashboard has no panels');
  for (const panel of panels) {
    const name = `panel ${panel.id} (${panel.title})`;
    if (typeof panel.id !== 'number') problems.push(`${name}: no numeric id`);
    else if (ids.has(panel.id)) problems.push(`${name}: duplicate id`);
    ids.add(panel.id);
    if (!panel.gridPos || !['x', 'y', 'w', 'h'].every((k) => Number.isInteger(panel.gridPos[k]))) {
      problems.push(`${name}: no gridPos`);
    }
    if (panel.type === 'row') continue;
    if (panel.datasource?.uid !== '${datasource}') problems.push(`${name}: its datasource is not the $datasource variable`);
    const targets: any[] = panel.targets ?? [];
    if (targets.length === 0) problems.push(`${name}: no queries`);
    for (const target of targets) {
      const where = `${name} ${target.refId}`;
      if (typeof target.expr !== 'string' || target.expr.trim() === '') {
        problems.push(`${where}: no expr`);
        continue;
      }
      const { expr, unknown } = substitute(target.expr, variables);
      for (const u of unknown) problems.push(`${where}: unknown variable $${u}`);
      queries.push({ where, expr: options.raw ? target.expr : expr });
    }
  }
  return { queries, problems };
}

/** Replaces `$name`, `${name}` and `[[name]]` with the variable's stand-in value. */
function substitute(expr: string, variables: Map<string, string>): { expr: string; unknown: string[] } {
  const unknown: string[] = [];
  const out = expr.replace(/\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]/g, (match, a, b, c) => {
    const name = a ?? b ?? c;
    const value = variables.get(name);
    if (value === undefined) {
      unknown.push(name);
      return match;
    }
    return value;
  });
  return { expr: out, unknown };
}

/**
 * Metric names an expression refers to: identifiers followed by `{`, `[`, `)` or `,` or
 * standing alone, that are not PromQL functions, keywords or label names. Good enough for this
 * project's own metrics, which all start with gateway_, process_ or nodejs_, plus `up`.
 */
export function metricNames(expr: string): string[] {
  const withoutStrings = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  const names = new Set<string>();
  for (const m of withoutStrings.matchAll(/\b(gateway_[a-z0-9_]+|process_[a-z0-9_]+|nodejs_[a-z0-9_]+|up)\b(?!\s*\()/g)) {
    names.add(m[1]);
  }
  return [...names];
}

/** The metric a sample name belongs to: a histogram's _bucket, _sum and _count are its own. */
export function baseMetricName(name: string, histograms: Set<string>): string {
  const m = /^(.*)_(bucket|sum|count)$/.exec(name);
  return m && histograms.has(m[1]) ? m[1] : name;
}

/** A dashboard query variable of the `label_values(selector, label)` kind, as Grafana reads it. */
export interface LabelValuesVariable {
  name: string;
  selector: string;
  label: string;
  multi: boolean;
  includeAll: boolean;
  /** What "All" stands for when set; unset, Grafana lists every value the query found. */
  allValue?: string;
}

/** The dashboard's query variables in order (a later one may use an earlier one), or problems. */
export function labelValuesVariables(dashboard: any): { variables: LabelValuesVariable[]; problems: string[] } {
  const variables: LabelValuesVariable[] = [];
  const problems: string[] = [];
  for (const v of dashboard?.templating?.list ?? []) {
    if (v.type !== 'query') continue;
    const text = typeof v.query === 'string' ? v.query : v.query?.query;
    const m = /^\s*label_values\(\s*(.+?)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$/.exec(String(text ?? ''));
    if (!m) {
      problems.push(`variable $${v.name}: its query is not label_values(selector, label): ${text}`);
      continue;
    }
    const allValue = typeof v.allValue === 'string' && v.allValue !== '' ? v.allValue : undefined;
    variables.push({ name: v.name, selector: m[1], label: m[2], multi: Boolean(v.multi), includeAll: Boolean(v.includeAll), allValue });
  }
  return { variables, problems };
}

/** Grafana's escaping of one value for a regex matcher (its Prometheus data source's prometheusSpecialRegexEscape). */
function grafanaRegexEscape(value: string): string {
  return value.replace(/\\/g, '\\\\\\\\').replace(/[$^*{}[\]'+?.()|]/g, '\\\\$&');
}

/**
 * What `$name` becomes in a query with "All" selected, as Grafana's Prometheus data source
 * interpolates it: the allValue as written when one is set, else every value found, each
 * regex-escaped, as `(a|b)` (a single value alone).
 */
export function allValueOf(variable: LabelValuesVariable, values: string[]): string {
  if (variable.allValue !== undefined) return variable.allValue;
  const escaped = [...values].sort().map(grafanaRegexEscape);
  return escaped.length === 1 ? escaped[0] : `(${escaped.join('|')})`;
}

/**
 * Resolves every query variable with "All" selected, as Grafana does on load: each variable's
 * label_values query runs with the earlier variables already resolved. `labelValues` asks
 * Prometheus (its /api/v1/label/<label>/values?match[]=<selector>, which Grafana uses).
 */
export async function resolveAll(
  dashboard: any,
  labelValues: (selector: string, label: string) => Promise<string[]>,
): Promise<Record<string, string>> {
  const { variables, problems } = labelValuesVariables(dashboard);
  if (problems.length > 0) throw new Error(problems.join('; '));
  const resolved: Record<string, string> = {};
  for (const v of variables) {
    const known = new Map([...Object.entries(BUILTIN_VARIABLES), ...Object.entries(resolved)]);
    const { expr: selector, unknown } = substitute(v.selector, known);
    if (unknown.length > 0) throw new Error(`variable $${v.name}: its query uses $${unknown.join(', $')}, not defined before it`);
    resolved[v.name] = allValueOf(v, await labelValues(selector, v.label));
  }
  return resolved;
}

/**
 * Where a dashboard could show targets that are not the gateway's: a query variable that is not
 * label_values() of a gateway_ metric, or whose "All" is a catch-all (allValue), or a series
 * selector in a panel that does not match every such variable's label (`job=~"$job"`), so that
 * `up` or process_* would take in Prometheus itself and every other process scraped.
 */
export function gatewayScopeProblems(dashboard: any): string[] {
  const { variables, problems } = labelValuesVariables(dashboard);
  for (const v of variables) {
    const metric = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(v.selector)?.[1] ?? '';
    if (!metric.startsWith('gateway_'))
      problems.push(
        `variable $${v.name}: lists ${v.label} values of ${metric || v.selector}, not of a gateway_ metric, so it may offer other targets`,
      );
    if (v.allValue !== undefined)
      problems.push(
        `variable $${v.name}: "All" is allValue ${JSON.stringify(v.allValue)}, which matches every target, not the ${v.label} values found`,
      );
    if (!v.includeAll || !v.multi)
      problems.push(`variable $${v.name}: needs includeAll and multi, so that "All" stands for every gateway ${v.label}`);
  }
  const wanted = variables.map((v) => `${v.label}=~"$${v.name}"`);
  const { queries, problems: queryProblems } = dashboardQueries(dashboard, { raw: true });
  problems.push(...queryProblems);
  for (const q of queries) {
    for (const { name, matchers } of selectors(q.expr)) {
      const missing = wanted.filter((w) => !matchers.replace(/\s+/g, '').split(',').includes(w));
      if (missing.length > 0) problems.push(`${q.where}: ${name}${matchers ? `{${matchers}}` : ''} lacks ${missing.join(', ')}`);
    }
  }
  return problems;
}

/** The series selectors of an expression: each metric name (outside strings) and the matchers in its braces. */
export function selectors(expr: string): Array<{ name: string; matchers: string }> {
  const out: Array<{ name: string; matchers: string }> = [];
  const names = /\b(gateway_[a-z0-9_]+|process_[a-z0-9_]+|nodejs_[a-z0-9_]+|up)\b(?!\s*\()/g;
  for (const m of expr.matchAll(names)) {
    // Inside a string literal when an odd number of unescaped quotes precede it.
    const before = expr.slice(0, m.index).replace(/\\./g, '');
    if ((before.match(/"/g) ?? []).length % 2 === 1) continue;
    const rest = expr.slice(m.index + m[0].length);
    const braces = /^\s*\{((?:[^}"]|"(?:[^"\\]|\\.)*")*)\}/.exec(rest);
    out.push({ name: m[1], matchers: braces ? braces[1] : '' });
  }
  return out;
}
