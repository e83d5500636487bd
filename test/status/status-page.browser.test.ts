import OpenAI from 'openai';
import type { Browser, BrowserContext, Page } from 'puppeteer-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigInput } from '../../src/config/schema.js';
import { isOpen, launch, systemChromium, textOf, watchProblems } from '../helpers/browser.js';
import { parseCompactionHeader } from '../helpers/compaction-header.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';
import { agentRequest } from '../helpers/rescue.js';

/*
 * The status page in a real browser (Debian's Chromium, driven by puppeteer-core): after an
 * agent's request was rescued against the stand-in, the page shows it with its numbers and its
 * bar, opens to the summary the model got where content may be shown and hides it where it may
 * not, keeps itself up to date, and says nothing is wrong (no console error, no failed load).
 * Skipped where no Chromium is on PATH.
 */

const chromium = systemChromium();
const KEY = 'gw-page-key';
/** The stand-in's window: a 60,000-byte limit is 15,000 tokens, as its errors state. */
const WINDOW = 15_000;

let browser: Browser;
/** Each test's own: its pages, cookies and sign-ins go with it. */
let context: BrowserContext | undefined;
let provider: StandIn;
let gateway: TestGateway;

beforeAll(async () => {
  if (chromium) browser = await launch(chromium);
});
afterAll(async () => {
  await browser?.close();
});
afterEach(async () => {
  await context?.close();
  context = undefined;
  await gateway?.close();
  await provider?.close();
});

/** The gateway after one rescued request: its header, and the summary the replay carried. */
async function rescued(config: ConfigInput = {}, key = 'sk-client') {
  provider = await startStandIn({ limitBytes: 4 * WINDOW, reply: () => ({ text: 'ok' }) });
  gateway = await startGateway({
    upstream: { url: provider.baseUrl, apiKey: 'sk-upstream' },
    summarizer: { maxInputTokens: 500_000 },
    ...config,
  });
  const sdk = new OpenAI({ baseURL: gateway.baseUrl, apiKey: key, maxRetries: 0 });
  const { response } = await sdk.chat.completions.create(agentRequest(60) as never).withResponse();
  const summary = /SUMMARY of \d+ chars[^"\\]*/.exec(JSON.stringify(provider.calls('chat')[1].json.messages))![0];
  return { header: parseCompactionHeader(response.headers.get('x-gateway-compaction')), summary, sdk };
}

const n = (v: number) => v.toLocaleString('en-US');

async function newPage(): Promise<Page> {
  context ??= await browser.createBrowserContext();
  return context.newPage();
}

async function open(path = '/status'): Promise<{ page: Page; problems: string[] }> {
  const page = await newPage();
  await page.setViewport({ width: 1280, height: 900 });
  const problems = watchProblems(page);
  const res = await page.goto(`${gateway.origin}${path}`);
  expect(res?.status()).toBe(200);
  return { page, problems };
}

describe.skipIf(!chromium)('the status page in Chromium', () => {
  it('shows the rescue with its numbers and its bar, and opens to the summary the model got', async () => {
    const { header, summary } = await rescued();
    const { page, problems } = await open();

    const row = await page.$('li.decision');
    expect(row).not.toBeNull();
    const text = async (sel: string) => (await textOf(page, `li.decision ${sel}`)).trim();
    expect(await text('.outcome')).toBe('replayed');
    expect(await text('.strategy')).toBe('summarize');
    expect(await text('.where')).toBe('chat · default · fake-model');
    expect((await text('.trigger')).replace(/\s+/g, ' ')).toBe('refused 400 context_length');
    const tokensBefore = Number(header['tokens-before']);
    const tokensAfter = Number(header['tokens-after']);
    expect((await text('.sizes')).replace(/\s+/g, ' ')).toBe(`${n(tokensBefore)} → ${n(tokensAfter)} tokens (window ${n(WINDOW)})`);

    // The bar as drawn: the after part and the window mark where the numbers put them.
    const bar = await page.$eval('li.decision svg.bar', (svg) => {
      const box = (sel: string) => svg.querySelector(sel)!.getBoundingClientRect();
      const whole = svg.getBoundingClientRect();
      return {
        width: whole.width,
        left: whole.left,
        before: box('.before').width,
        after: box('.after').width,
        windowAt: box('.window').left + box('.window').width / 2 - whole.left,
        title: svg.querySelector('title')!.textContent,
      };
    });
    expect(bar.width).toBeGreaterThan(100);
    // Before is the largest of the three: it spans the bar.
    expect(bar.before).toBeCloseTo(bar.width, 0);
    expect(bar.after / bar.before).toBeCloseTo(tokensAfter / tokensBefore, 2);
    expect(bar.windowAt / bar.width).toBeCloseTo(WINDOW / tokensBefore, 2);
    expect(bar.title).toBe(`before ${n(tokensBefore)} tokens, after ${n(tokensAfter)}, window ${n(WINDOW)}`);

    // Closed, the record's details are not on screen; opened, they are.
    expect(await page.$eval('li.decision pre.summary', (e) => e.checkVisibility())).toBe(false);
    await page.click('li.decision summary');
    const details = await textOf(page, 'li.decision .detail');
    expect(details).toContain(`${n(Number(header['messages-before']))} → ${n(Number(header['messages-after']))}`);
    expect(details).toContain(`${n(Number(header['bytes-before']))} → ${n(Number(header['bytes-after']))}`);
    expect(details).toMatch(/replay status\s+200/);
    expect(await textOf(page, 'li.decision pre.summary')).toBe(summary);
    expect(await page.$$eval('li.decision ul[class^="trail-"] li', (items) => items.length)).toBeGreaterThan(3);
    // The items strip: every item of the request, the condensed run the widest.
    const strip = await page.$$eval('li.decision svg.items rect', (rects) =>
      rects.map((r) => ({ fate: r.getAttribute('class'), width: r.getBoundingClientRect().width })),
    );
    expect(strip.map((r) => r.fate)).toContain('condensed');
    expect(Math.max(...strip.map((r) => r.width))).toBe(Math.max(...strip.filter((r) => r.fate === 'condensed').map((r) => r.width)));
    expect(await textOf(page, '.content-note')).toMatch(/is shown: the gateway listens on loopback/);

    expect(problems).toEqual([]);
  });

  it('keeps itself up to date: a new decision appears, the open one stays open', async () => {
    const { sdk } = await rescued();
    const { page, problems } = await open();
    await page.click('li.decision summary');
    // Another conversation overflows meanwhile.
    await sdk.chat.completions.create(agentRequest(70) as never);
    await page.waitForFunction("document.querySelectorAll('li.decision').length === 2", { timeout: 15_000, polling: 200 });
    expect(await page.$$eval('li.decision', (items) => items.map((li) => li.getAttribute('data-id')))).toEqual(['2', '1']);
    expect(await isOpen(page, '#details-1')).toBe(true);
    expect(await isOpen(page, '#details-2')).toBe(false);
    expect(await textOf(page, 'tr[data-api="chat"] td:nth-child(4)')).toBe('2');
    expect(problems).toEqual([]);
  });

  it('hides the conversation on a gateway beyond loopback without keys, and says why', async () => {
    const { summary } = await rescued({ server: { host: '0.0.0.0' }, auth: { allowOpen: true } });
    const { page, problems } = await open();
    await page.click('li.decision summary');
    expect(await textOf(page, '.content-note')).toMatch(/is hidden: the gateway listens on 0\.0\.0\.0, beyond loopback/);
    expect(await page.$eval('li.decision .content-hidden', (e) => e.checkVisibility())).toBe(true);
    expect(await page.$('pre.summary')).toBeNull();
    expect(await page.content()).not.toContain(summary);
    // The figures are not content: they are shown all the same.
    expect(await textOf(page, 'li.decision .outcome')).toBe('replayed');
    expect(problems).toEqual([]);
  });

  it('with gateway keys, asks the browser to sign in, and a gateway key as the password opens it, live', async () => {
    const { summary } = await rescued({ auth: { keys: [KEY] } }, KEY);
    // Without credentials to give, the browser gives up on the challenge.
    const refused = await newPage();
    const challenges: Array<string | undefined> = [];
    refused.on('response', (r) => void (r.status() === 401 && challenges.push(r.headers()['www-authenticate'])));
    await expect(refused.goto(`${gateway.origin}/status`)).rejects.toThrow(/ERR_INVALID_AUTH_CREDENTIALS/);
    // The 401's response event may come after the navigation has failed.
    await expect.poll(() => challenges, { timeout: 5_000 }).toEqual([expect.stringMatching(/^Basic realm=/)]);

    const page = await newPage();
    await page.authenticate({ username: 'me', password: KEY });
    const problems = watchProblems(page);
    expect((await page.goto(`${gateway.origin}/status`))?.status()).toBe(200);
    await page.click('li.decision summary');
    expect(await textOf(page, 'li.decision pre.summary')).toBe(summary);
    // The page's own refresh carries the sign-in too.
    const first = await page.$eval('main', (m) => m.getAttribute('data-updated'));
    await page.waitForFunction(`document.querySelector('main').getAttribute('data-updated') !== ${JSON.stringify(first)}`, {
      timeout: 15_000,
      polling: 200,
    });
    expect(await isOpen(page, '#details-1')).toBe(true);
    expect(await textOf(page, '#live')).toBe('');
    expect(problems).toEqual([]);
  });
});
