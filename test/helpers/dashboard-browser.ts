// The dashboard's tests drive Debian's Chromium (playwright-core: no browser download). One launch, the
// sign-in, and reading text as a reader sees it.
import { chromium, type Browser, type Page } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** A new page in its own context, signed in to the dashboard at `origin` (as `name`, when given). */
export async function signedInPage(
  browser: Browser,
  origin: string,
  token: string,
  name?: string,
): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  const page = await context.newPage();
  await page.goto(`${origin}/dashboard/login`);
  await page.fill('input[name=token]', token);
  if (name !== undefined) await page.fill('input[name=operator]', name);
  await page.click('button');
  if (new URL(page.url()).pathname !== '/dashboard') throw new Error(`sign-in failed: at ${page.url()}`);
  return page;
}

/** An element's text with its white space as one space (the markup's line breaks are no text). */
export async function textOf(page: Page, selector: string): Promise<string> {
  return ((await page.textContent(selector)) ?? '').replace(/\s+/g, ' ').trim();
}
