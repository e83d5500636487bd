import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';

/** The system's Chromium (Debian's `chromium` package), found on PATH; undefined when there is none. */
export function systemChromium(): string | undefined {
  const dirs = (process.env.PATH ?? '').split(delimiter).filter(Boolean);
  for (const name of ['chromium', 'chromium-browser']) {
    for (const dir of dirs) if (existsSync(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

export function launch(executablePath: string): Promise<Browser> {
  // As root in a container Chromium's sandbox cannot start; the pages it opens here are the gateway's own, on loopback.
  return puppeteer.launch({ executablePath, headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
}

/** Everything a page says went wrong: console errors and warnings, uncaught exceptions, failed loads, answers of 400 and over. */
export function watchProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warn') problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${(e as Error).message}`));
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`answer ${r.status()}: ${r.url()}`);
  });
  return problems;
}

/** The rendered text of the first element `selector` matches (what a person reads there). */
export function textOf(page: Page, selector: string): Promise<string> {
  return page.$eval(selector, (e) => (e as unknown as { innerText: string }).innerText);
}

/** Whether the <details> `selector` matches is open. */
export function isOpen(page: Page, selector: string): Promise<boolean> {
  return page.$eval(selector, (e) => (e as unknown as { open: boolean }).open);
}
