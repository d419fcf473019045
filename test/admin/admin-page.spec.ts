import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { deferred } from '../support/deferred.js';
import { bullPrefix, redisClient, uniqueName } from '../support/redis.js';
import { OPS, startAdminApp, type AdminTestApp } from './admin-app.js';

/** Where Chromium (or Chrome) is: `CHROMIUM_PATH`, else the first of the usual places that exists. */
const CHROMIUM = [
  process.env.CHROMIUM_PATH,
  '/usr/bin/chromium',
  '/usr/bin/chromium-browser',
  '/usr/bin/google-chrome',
  '/Applications/Google Chrome.app/Contents/MacOS/Google Chrome',
].find((path) => path !== undefined && path !== '' && existsSync(path));
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
// Screenshots are test artifacts (git-ignored); docs/images holds copies taken by hand for the docs.
const ARTIFACTS = join(ROOT, 'test', 'artifacts', 'admin');

// Attempted XSS through everything a job carries that the page shows.
const XSS_NAME = `<img src=x onerror="window.__xss='name';alert('name')">`;
const XSS_ID = `"><script>window.__xss='id';alert('id')</script>`;
const XSS_DATA = {
  customer: `</pre><script>window.__xss='data';alert('data')</script>`,
  note: `<img src=x onerror="window.__xss='data-img';alert('data-img')">`,
};

describe('admin page in headless Chromium', () => {
  const redis = redisClient();
  let browser: Browser | undefined;
  let context: BrowserContext | undefined;
  let app: AdminTestApp | undefined;
  const gate = deferred();

  beforeAll(async () => {
    if (CHROMIUM === undefined) {
      throw new Error(
        'Chromium is missing (the admin page is tested in it): apt-get install chromium, or set CHROMIUM_PATH to a Chromium or Chrome executable',
      );
    }
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
  }, 120_000);

  afterEach(async () => {
    gate.resolve();
    await context?.close();
    await app?.close();
  });

  afterAll(async () => {
    await browser?.close();
    await redis.quit();
  });

  /** A page of a browser context signed in as the operator. CSP is bypassed: escaping alone must stop the XSS. */
  async function operatorPage(): Promise<{ page: Page; dialogs: string[]; errors: string[] }> {
    context = await browser!.newContext({
      extraHTTPHeaders: { authorization: OPS },
      bypassCSP: true,
      viewport: { width: 1360, height: 900 },
    });
    const page = await context.newPage();
    const dialogs: string[] = [];
    const errors: string[] = [];
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    page.on('pageerror', (error) => errors.push(error.message));
    return { page, dialogs, errors };
  }

  /** Nothing injected ran or became markup. */
  async function expectNoInjection(page: Page, dialogs: string[]): Promise<void> {
    expect(dialogs).toEqual([]);
    expect(await page.evaluate(() => (globalThis as unknown as { __xss?: string }).__xss)).toBeUndefined();
    expect(await page.locator('script').count()).toBe(0);
    expect(await page.locator('img').count()).toBe(0);
  }

  it('lists locks, shows attempted XSS (job name, id, data) as text without running it, and releases and deletes through its POST forms', async () => {
    const orders = uniqueName('orders');
    const emails = uniqueName('emails');
    const reports = uniqueName('reports');
    const started = deferred();
    app = await startAdminApp({
      queues: [
        { queue: orders, paused: true, unique: { lock: 'until_executed', onConflict: 'reject' } },
        {
          queue: emails,
          unique: { lock: 'while_executing', runtimeLockLease: 60_000 },
          handler: async () => {
            started.resolve();
            await gate.promise;
          },
        },
        { queue: reports, paused: true, unique: { lock: 'until_expired', lockTtl: 3_600_000 } },
      ],
      admin: { title: 'Unique jobs · shop' },
    });
    const ordersQueue = app.queue(orders);
    const xss = await app.service.enqueue(ordersQueue, XSS_NAME, XSS_DATA, { jobId: XSS_ID });
    if (xss.status !== 'enqueued' || !xss.digest) throw new Error('the XSS job was not enqueued');
    expect(xss.job.id).toBe(XSS_ID);
    const xssKey = `${bullPrefix()}:${orders}:de:uj:${xss.digest}`;
    await app.service.enqueue(ordersQueue, 'charge', { orderId: 'A-1001', amount: 4200 });
    await expect(
      app.service.enqueue(ordersQueue, 'charge', { orderId: 'A-1001', amount: 4200 }),
    ).resolves.toMatchObject({ status: 'duplicate', strategy: 'reject' });
    await app.service.enqueue(ordersQueue, 'charge', { orderId: 'A-1002', amount: 990 });
    await expect(app.service.enqueue(ordersQueue, XSS_NAME, XSS_DATA)).resolves.toMatchObject({
      status: 'duplicate',
      strategy: 'reject',
    });
    await app.queue(emails).add('send-receipt', { orderId: 'A-1001' });
    await app.service.enqueue(app.queue(reports), 'daily-report', { day: '2025-06-01' });
    await started.promise;

    const { page, dialogs, errors } = await operatorPage();

    // The list: every lock, the XSS job's name and id as text.
    const response = await page.goto(app.adminUrl);
    expect(response?.status()).toBe(200);
    const headers = response!.headers();
    expect(headers['content-security-policy']).toContain("default-src 'none'");
    expect(headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(headers['x-content-type-options']).toBe('nosniff');
    const rows = page.locator('#locks tbody tr[data-digest]');
    expect(await rows.count()).toBe(5);
    const xssRow = page.locator(`#locks tr[data-digest="${xss.digest}"]`);
    expect(await xssRow.locator('.job-name').textContent()).toBe(XSS_NAME);
    expect(await xssRow.locator('.job-id').textContent()).toBe(XSS_ID);
    expect(await page.locator('[data-count="enqueue"]').textContent()).toBe('4');
    expect(await page.locator('[data-count="runtime"]').textContent()).toBe('1');
    expect(await page.locator('[data-count="dead"]').textContent()).toBe('2');
    await expectNoInjection(page, dialogs);
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'admin-page.png'), fullPage: true });

    // The lock opened: the XSS data as text in <pre>, the rejected duplicate of the same digest.
    await Promise.all([page.waitForURL(/\/locks\//), xssRow.locator('a').first().click()]);
    expect(await page.locator('#digest').textContent()).toBe(xss.digest);
    const job = page.locator(`.job[data-job-id="${XSS_ID.replace(/["\\]/g, '\\$&')}"]`);
    expect(await job.locator('.job-name').textContent()).toBe(XSS_NAME);
    const shownData = JSON.parse((await job.locator('pre.json').first().textContent())!) as unknown;
    expect(shownData).toEqual(XSS_DATA);
    expect(await page.locator('table.dead tr[data-entry]').count()).toBe(1);
    expect(await page.locator('table.dead .job-name').textContent()).toBe(XSS_NAME);
    await expectNoInjection(page, dialogs);
    await page.screenshot({ path: join(ARTIFACTS, 'admin-lock.png'), fullPage: true });

    // Release through the list's POST form.
    await page.goto(app.adminUrl);
    expect(await redis.get(xssKey)).toBe(XSS_ID);
    await Promise.all([
      page.waitForURL(/notice=released/),
      page.locator(`#locks tr[data-digest="${xss.digest}"] button[data-release]`).click(),
    ]);
    expect(await page.locator('.notice').textContent()).toBe(`Released lock ${xss.digest}: 1 key deleted.`);
    expect(await redis.exists(xssKey)).toBe(0);
    expect(await page.locator(`#locks tr[data-digest="${xss.digest}"]`).count()).toBe(0);
    expect(await rows.count()).toBe(4);

    // The rejected duplicates: shown as text; the XSS one (its lock now free) retried, the other deleted, by POST forms.
    await page.goto(`${app.adminUrl}/dead`);
    const entries = page.locator('table.dead tr[data-entry]');
    expect(await entries.count()).toBe(2);
    const xssEntry = entries.filter({ has: page.locator('.job-name', { hasText: 'onerror' }) });
    expect(await xssEntry.locator('.job-name').textContent()).toBe(XSS_NAME);
    expect(JSON.parse((await xssEntry.locator('pre.json').textContent())!) as unknown).toEqual(XSS_DATA);
    await expectNoInjection(page, dialogs);
    await page.screenshot({ path: join(ARTIFACTS, 'admin-dead.png'), fullPage: true });
    await Promise.all([page.waitForURL(/notice=retried/), xssEntry.locator('button[data-retry]').click()]);
    expect(await page.locator('.notice').textContent()).toBe('Retried: the job was enqueued again.');
    expect(await redis.get(xssKey)).toEqual(expect.any(String));
    expect(await redis.get(xssKey)).not.toBe(XSS_ID);
    expect(await entries.count()).toBe(1);
    await Promise.all([page.waitForURL(/notice=deleted/), entries.locator('button[data-delete]').click()]);
    expect(await page.locator('.notice').textContent()).toBe('Deleted the rejected duplicate.');
    expect(await app.service.deadSet.size()).toBe(0);

    await expectNoInjection(page, dialogs);
    expect(errors).toEqual([]);

    // With the CSP enforced (no bypass), the page still gets its style sheet (allowed by its nonce).
    const strict = await browser!.newContext({ extraHTTPHeaders: { authorization: OPS } });
    try {
      const strictPage = await strict.newPage();
      await strictPage.goto(app.adminUrl);
      const headerColor = await strictPage.evaluate<string>(
        'getComputedStyle(document.querySelector("header")).backgroundColor',
      );
      expect(headerColor).toBe('rgb(17, 24, 39)');
    } finally {
      await strict.close();
    }
  }, 120_000);
});
