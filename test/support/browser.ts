import { chromium, type Browser, type Page } from 'playwright-core';
import { waitFor } from './processes.js';

/** Debian's Chromium (apt-get install chromium; scripts/test.mjs installs it), headless. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-background-networking'] });
}

/** Signs in to the dashboard at `gateway`/ui/ with `token`; resolves once the header shows who signed in. */
export async function signIn(page: Page, gateway: string, token: string): Promise<string> {
  await page.goto(`${gateway}/ui/`);
  await page.locator('input[name=token]').fill(token);
  await page.locator('button[type=submit]').click();
  return (await page.getByTestId('who').textContent({ timeout: 30_000 })) ?? '';
}

/** Waits until the element with `testId` (the first of them) reads `expected`, as a live page gets there by polling. */
export async function expectText(page: Page, testId: string, expected: string | number, timeoutMs = 30_000): Promise<void> {
  let seen: string | null = null;
  await waitFor(
    `${testId} to read ${expected}`,
    async () => {
      seen = (await page.getByTestId(testId).first().textContent({ timeout: 1000 }))?.trim() ?? null;
      return seen === String(expected);
    },
    timeoutMs,
    250,
  ).catch((e: Error) => {
    throw new Error(`${e.message} (it reads ${JSON.stringify(seen)})`);
  });
}

/** First contentful paint, and when every `[data-loaded]` block had its first answer, in ms since navigation start. */
export interface PageTimings {
  firstPaintMs: number;
  dataLoadedMs: number;
}

/** Loads `url` afresh and measures it in the page: paint from the Paint Timing API, data when the first `.loaded` block appears. */
export async function timePageLoad(page: Page, url: string, loadedSelector = '.loaded'): Promise<PageTimings> {
  await page.goto('about:blank');
  await page.goto(url);
  // Evaluated in the page (strings: the tests compile without the DOM's types); polled every frame.
  const loaded = await page.waitForFunction(`document.querySelector(${JSON.stringify(loadedSelector)}) && performance.now()`, undefined, {
    timeout: 60_000,
    polling: 'raf',
  });
  const dataLoadedMs = (await loaded.jsonValue()) as number;
  const firstPaintMs = await page.evaluate<number>(`new Promise((resolve) => {
    new PerformanceObserver((list) => {
      const paint = list.getEntriesByName('first-contentful-paint')[0];
      if (paint) resolve(paint.startTime);
    }).observe({ type: 'paint', buffered: true });
    setTimeout(() => resolve(NaN), 5000);
  })`);
  return { firstPaintMs, dataLoadedMs };
}
