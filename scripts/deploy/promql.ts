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

export function dashboardQueries(dashboard: any): { queries: DashboardQuery[]; problems: string[] } {
  const problems: string[] = [];
  const queries: DashboardQuery[] = [];
  const variables = new Map<string, string>(Object.entries(BUILTIN_VARIABLES));
  for (const v of dashboard?.templating?.list ?? []) {
    // A datasource variable selects where queries go; a query variable stands for label values,
    // which this check replaces with a regex that matches them (the queries use `=~`).
    variables.set(v.name, v.type === 'query' ? '.+' : '');
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
      queries.push({ where, expr });
    }
  }
  return { queries, problems };
}

/** Replaces `$name`, `${name}` and `[[name]]` with the variable's stand-in value. */
export function substitute(expr: string, variables: Map<string, string>): { expr: string; unknown: string[] } {
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
