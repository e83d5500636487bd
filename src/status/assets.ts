/*
 * The page's stylesheet and script, served as they are (GET /status.css, /status.js): files of
 * their own, so that the page's Content-Security-Policy allows no inline style or script.
 */

/** Keeps the page live: fetches it again every few seconds and swaps its <main>, leaving open details open. */
export const SCRIPT = `'use strict';
(() => {
  const PERIOD_MS = 5000;
  const localTimes = (root) => {
    for (const t of root.querySelectorAll('time[datetime]')) t.textContent = new Date(t.dateTime).toLocaleTimeString();
  };
  const refresh = async () => {
    const live = document.getElementById('live');
    try {
      const res = await fetch(location.pathname, { headers: { accept: 'text/html' }, cache: 'no-store' });
      if (!res.ok) throw new Error('status ' + res.status);
      const next = new DOMParser().parseFromString(await res.text(), 'text/html').querySelector('main');
      const main = document.querySelector('main');
      if (!next || !main) return;
      const open = new Set([...main.querySelectorAll('details[open]')].map((d) => d.id));
      for (const d of next.querySelectorAll('details')) if (open.has(d.id)) d.open = true;
      localTimes(next);
      main.replaceWith(next);
    } catch {
      if (live) live.textContent = '(the gateway did not answer: this is its last answer)';
    }
  };
  localTimes(document);
  setInterval(() => {
    if (!document.hidden) void refresh();
  }, PERIOD_MS);
})();
`;

export const STYLE = `:root {
  color-scheme: light dark;
  --fg: #1d232a; --muted: #5d6874; --line: #d7dde3; --panel: #f5f7f9;
  --kept: #7a8a99; --condensed: #d9822b; --masked: #b7a13a; --pinned: #2f7ed8;
  --before: #f2c1a0; --after: #2e8b57; --window: #c0392b; --track: #eef1f4;
}
@media (prefers-color-scheme: dark) {
  :root { --fg: #e4e8ec; --muted: #9aa6b2; --line: #39424b; --panel: #20262c; --track: #2a3138; --before: #8a5a3a; }
}
body { font: 14px/1.45 system-ui, sans-serif; color: var(--fg); margin: 0; }
main { max-width: 1200px; margin: 0 auto; padding: 16px 20px 40px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 14px; margin: 14px 0 6px; }
h4 { font-size: 13px; margin: 10px 0 4px; color: var(--muted); }
.facts, .updated, .meta, .empty { color: var(--muted); margin: 2px 0; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
thead th { font-weight: 600; color: var(--muted); font-size: 12px; }
code, pre { font-family: ui-monospace, monospace; font-size: 12px; }
.content-note { padding: 6px 10px; border-radius: 4px; background: var(--panel); }
ol.decisions { list-style: none; padding: 0; margin: 0; }
li.decision { border: 1px solid var(--line); border-radius: 6px; margin: 6px 0; }
li.decision summary { display: grid; grid-template-columns: 6em 1fr 7em 7em 11em 240px 15em; gap: 8px; align-items: center; padding: 6px 10px; cursor: pointer; }
li.decision .outcome { font-weight: 600; }
li.outcome-replayed .outcome, li.outcome-compacted .outcome { color: var(--after); }
li.outcome-replay_failed .outcome, li.outcome-not_shrunk .outcome, li.outcome-shed .outcome, li.outcome-relayed .outcome { color: var(--window); }
.sizes { font-variant-numeric: tabular-nums; color: var(--muted); }
svg.bar { width: 240px; height: 14px; display: block; }
svg.bar .track { fill: var(--track); }
svg.bar .before { fill: var(--before); }
svg.bar .after { fill: var(--after); }
svg.bar .window { fill: var(--window); }
.detail { padding: 4px 14px 12px; border-top: 1px solid var(--line); background: var(--panel); }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 8px 0; }
dt { color: var(--muted); }
dd { margin: 0; }
figure.strip { margin: 8px 0; }
svg.items { width: 100%; height: 16px; display: block; }
svg.items .kept { fill: var(--kept); }
svg.items .condensed { fill: var(--condensed); }
svg.items .masked { fill: var(--masked); }
svg.items .pinned { fill: var(--pinned); }
figcaption { color: var(--muted); font-size: 12px; margin-top: 4px; }
.key::before { content: ''; display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 8px; border-radius: 2px; }
.key.kept::before { background: var(--kept); }
.key.condensed::before { background: var(--condensed); }
.key.masked::before { background: var(--masked); }
.key.pinned::before { background: var(--pinned); }
pre.summary { white-space: pre-wrap; background: Canvas; border: 1px solid var(--line); padding: 8px; max-height: 24em; overflow: auto; }
ul[class^="trail-"] { margin: 0; padding-left: 18px; }
.content-hidden { color: var(--muted); font-style: italic; }
@media (max-width: 900px) { li.decision summary { grid-template-columns: 1fr 1fr; } }
`;
