import type { Trail } from '../compaction/trail.js';
import type { StatusDocument, UpstreamStatus } from './document.js';
import type { StatusEntry } from './entry.js';
import { FATES, esc, itemStrip, n, sizeBar, stripSaid } from './pictures.js';

/*
 * GET /status: the status document as one HTML page, rendered here, with no framework and nothing
 * to build. The script beside it (assets.ts) fetches the page again every few seconds and swaps
 * its <main>; without it the page is whole, only not live.
 */

export function renderPage(doc: StatusDocument, now = new Date()): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>compaction-gateway status</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/status.css">
<script src="/status.js" defer></script>
</head>
<body>
${renderMain(doc, now)}
</body>
</html>
`;
}

function renderMain(doc: StatusDocument, now: Date): string {
  return `<main id="status" data-updated="${now.toISOString()}">
${gatewayHeader(doc, now)}
${upstreams(doc.upstreams)}
${totals(doc)}
${recent(doc)}
</main>`;
}

function gatewayHeader(doc: StatusDocument, now: Date): string {
  const g = doc.gateway;
  const auth = g.auth.gatewayKeys ? 'on (gateway keys)' : 'off';
  const facts = [
    `version ${g.version}`,
    `up ${duration(g.uptimeSeconds)}`,
    `listening on ${g.listening}`,
    `auth ${auth}`,
    `memory ${g.memory}`,
    `compaction ${g.compaction}${g.proactive ? ', proactive' : ''}`,
  ];
  return `<header>
<h1>compaction-gateway</h1>
<p class="facts">${facts.map((f) => `<span>${esc(f)}</span>`).join(' · ')}</p>
<p class="updated">Updated <time datetime="${now.toISOString()}">${clock(now)}</time> <span id="live" aria-live="polite"></span> · the same data as JSON: <a href="/status.json">/status.json</a></p>
</header>`;
}

function upstreams(list: readonly UpstreamStatus[]): string {
  const rows = list.map(
    (u) =>
      `<tr><th scope="row">${esc(u.name)}</th><td><code>${esc(u.url)}</code></td><td>${esc(u.apis.join(', '))}</td><td>${windowsSaid(u)}</td></tr>`,
  );
  return `<section id="upstreams">
<h2>Upstreams</h2>
<table><thead><tr><th>name</th><th>URL</th><th>APIs</th><th>context windows</th></tr></thead>
<tbody>${rows.join('\n')}</tbody></table>
</section>`;
}

function windowsSaid(u: UpstreamStatus): string {
  const said = [
    ...u.windows.declared.map((w) => `${esc(w.model)}: ${n(w.tokens)} tokens (declared)`),
    ...u.windows.learned.map((m) => {
      const parts = [
        m.discovered ? `${n(m.discovered.tokens)} tokens (discovered, ${esc(m.discovered.from)})` : '',
        m.observed !== undefined ? `cut at ${n(m.observed)} tokens (observed)` : '',
        m.bytesPerToken !== undefined ? `${m.bytesPerToken.toFixed(2)} bytes a token` : '',
      ].filter(Boolean);
      return `${esc(m.model)}: ${parts.join(', ')}`;
    }),
  ];
  if (said.length > 0) return said.join('<br>');
  return u.windows.discover ? 'none known yet (asked in the background)' : 'none declared';
}

function totals(doc: StatusDocument): string {
  if (doc.totals.length === 0) return `<section id="totals"><h2>Since start</h2><p class="empty">No requests yet.</p></section>`;
  const rows = doc.totals.map((t) => {
    const failed = Object.entries(t.failed).filter(([, v]) => v);
    const failedCell =
      failed.length === 0
        ? '0'
        : `${n(failed.reduce((a, [, v]) => a + v, 0))} <small>(${esc(failed.map(([k, v]) => `${k} ${v}`).join(', '))})</small>`;
    const cells = [
      n(t.requests),
      n(t.refused),
      n(t.truncated),
      n(t.rescued),
      n(t.ahead),
      failedCell,
      n(t.summarizerCalls),
      `${n(t.summarizerTokens.input)} / ${n(t.summarizerTokens.output)}`,
      n(t.tokensRemoved),
    ];
    return `<tr data-upstream="${esc(t.upstream)}" data-api="${esc(t.api)}"><th scope="row">${esc(t.upstream)}</th><td>${esc(t.api)}</td>${cells.map((c) => `<td class="num">${c}</td>`).join('')}</tr>`;
  });
  const heads = [
    'upstream',
    'API',
    'requests',
    'refused as overlong',
    'cut silently',
    'rescued',
    'compacted ahead',
    'not rescued',
    'summarizer calls',
    'summarizer tokens in / out',
    'tokens removed',
  ];
  return `<section id="totals">
<h2>Since start</h2>
<table><thead><tr>${heads.map((h) => `<th>${h}</th>`).join('')}</tr></thead>
<tbody>${rows.join('\n')}</tbody></table>
</section>`;
}

function recent(doc: StatusDocument): string {
  const { entries, capacity, decisions } = doc.recent;
  const note = `<p class="content-note ${doc.content.shown ? 'shown' : 'hidden'}">Conversation content (summaries, trails) is ${doc.content.shown ? 'shown' : 'hidden'}: ${esc(doc.content.why)}.</p>`;
  const list =
    entries.length === 0
      ? '<p class="empty">No rescue or compaction yet.</p>'
      : `<ol class="decisions">${entries.map((e) => decision(e, doc.content.shown)).join('\n')}</ol>`;
  return `<section id="recent">
<h2>Recent rescues and compactions</h2>
<p class="meta">The last ${n(Math.min(capacity, decisions))} of ${n(decisions)}, newest first (at most ${capacity} are kept).</p>
${note}
${list}
</section>`;
}

function decision(e: StatusEntry, contentShown: boolean): string {
  const trigger = e.trigger === 'rejected' ? `refused ${e.rejectedStatus ?? ''} ${e.reason ?? ''}`.trim() : e.trigger;
  return `<li class="decision outcome-${esc(e.outcome)}" id="decision-${e.id}" data-id="${e.id}" data-outcome="${esc(e.outcome)}">
<details id="details-${e.id}">
<summary>
<time datetime="${esc(e.at)}">${clock(new Date(e.at))}</time>
<span class="where">${esc([e.api, e.upstream, e.model].filter(Boolean).join(' · '))}</span>
<span class="outcome">${esc(e.outcome)}</span>
<span class="strategy">${esc(e.strategy ?? e.why ?? '')}</span>
<span class="trigger">${esc(trigger)}</span>
<span class="picture">${sizeBar(e)}</span>
<span class="sizes">${sizesSaid(e)}</span>
</summary>
${details(e, contentShown)}
</details>
</li>`;
}

/** `52,000 → 18,000 tokens (window 32,768)` */
function sizesSaid(e: StatusEntry): string {
  const unit = e.before?.tokens ? 'tokens' : 'bytes';
  const before = unit === 'tokens' ? e.before?.tokens : e.before?.bytes;
  const after = unit === 'tokens' ? e.after?.tokens : e.after?.bytes;
  if (before === undefined) return '';
  const window = e.windowTokens !== undefined ? ` (window ${n(e.windowTokens)})` : '';
  return esc(`${n(before)}${after !== undefined ? ` → ${n(after)}` : ''} ${unit}${window}`);
}

function details(e: StatusEntry, contentShown: boolean): string {
  return `<div class="detail">
<dl>${facts(e)
    .map(([k, v]) => `<dt>${esc(k)}</dt><dd>${esc(v)}</dd>`)
    .join('')}</dl>
${e.items ? `<figure class="strip">${itemStrip(e.items)}<figcaption>${legend(e)}</figcaption></figure>` : ''}
${content(e, contentShown)}
</div>`;
}

function facts(e: StatusEntry): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  const add = (k: string, v: string | number | undefined) => v !== undefined && v !== '' && out.push([k, typeof v === 'number' ? n(v) : v]);
  add('request id', e.requestId);
  add('limit from', e.limit);
  add(
    'items',
    e.before?.items !== undefined ? `${n(e.before.items)}${e.after?.items !== undefined ? ` → ${n(e.after.items)}` : ''}` : undefined,
  );
  add(
    'bytes',
    e.before?.bytes !== undefined ? `${n(e.before.bytes)}${e.after?.bytes !== undefined ? ` → ${n(e.after.bytes)}` : ''}` : undefined,
  );
  add('completion limit', e.completion ? `${n(e.completion.before)} → ${n(e.completion.after)}` : undefined);
  add('memory', e.memory === 'hit' ? 'hit: a remembered summary stood for the earlier items' : e.memory);
  add('masked outputs', e.masked);
  add('contents cut to fit', e.cut);
  add('summarizer', summarizerSaid(e));
  add('replay status', e.replayStatus);
  add('took', e.durationMs !== undefined ? `${n(e.durationMs)} ms` : undefined);
  if (e.outcome === 'relayed') add('what then', 'the stream was already on its way to the client; the next turn is compacted ahead to fit');
  return out;
}

function summarizerSaid(e: StatusEntry): string | undefined {
  const s = e.summarizer;
  if (!s) return undefined;
  const tokens = s.inputTokens !== undefined ? `, ${n(s.inputTokens)} tokens in, ${n(s.outputTokens ?? 0)} out` : '';
  const failed = s.failure ? `, failed (${s.failure}): the deterministic digest stood in` : '';
  const provider = s.providerFailure ? `, the provider's compaction failed (${s.providerFailure})` : '';
  return `${s.calls} call${s.calls === 1 ? '' : 's'}${s.ms !== undefined ? `, ${n(s.ms)} ms` : ''}${tokens}${failed}${provider}`;
}

function legend(e: StatusEntry): string {
  const used = new Set(e.items!.map((r) => r.fate));
  const keys = (Object.keys(FATES) as Array<keyof typeof FATES>).filter((f) => used.has(f));
  return `${keys.map((f) => `<span class="key ${f}">${esc(FATES[f])}</span>`).join(' ')}<br><span class="said">${esc(stripSaid(e.items!))}</span>`;
}

function content(e: StatusEntry, shown: boolean): string {
  if (!e.items || e.strategy === 'mask' || e.strategy === 'clamp' || e.strategy === 'truncation') return '';
  if (!shown || !e.content) return '<p class="content-hidden">The summary and trail are not shown here.</p>';
  const c = e.content;
  const more = c.summary.length < c.summaryChars ? ` (the first ${n(c.summary.length)} of ${n(c.summaryChars)} characters)` : '';
  const summary = c.summary
    ? `<h3>The summary the model got${more}</h3>\n<pre class="summary">${esc(c.summary)}</pre>`
    : `<p class="summary-none">No summary text of the gateway's (${esc(e.strategy ?? '')}).</p>`;
  return `<div class="content">${summary}${c.trail ? trail(c.trail) : ''}</div>`;
}

const TRAIL_LISTS: Array<[keyof Trail, string]> = [
  ['said', 'what the person said'],
  ['changed', 'files changed'],
  ['read', 'files read'],
  ['commands', 'commands run'],
  ['errors', 'errors seen'],
];

function trail(t: Trail): string {
  const lists = TRAIL_LISTS.filter(([k]) => t[k].length > 0).map(
    ([k, title]) => `<h4>${title}</h4><ul class="trail-${k}">${t[k].map((f) => `<li><code>${esc(f)}</code></li>`).join('')}</ul>`,
  );
  return lists.length > 0 ? `<h3>The trail the summary ends with</h3>${lists.join('')}` : '';
}

function clock(d: Date): string {
  return `${d.toISOString().slice(11, 19)} UTC`;
}

function duration(seconds: number): string {
  if (seconds < 120) return `${seconds} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  return `${Math.round(seconds / 3600)} h`;
}
