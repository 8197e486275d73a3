// The harness itself, in each browser: a test that finds its page stuck (a call the page never
// answers) is run once more on a fresh page, and the next test gets a fresh page too.
import assert from 'node:assert/strict';
import { useTestPage } from './harness.mjs';

// A page without the package: its worker starts 8 workers and says so in its title.
const ready = (page) => page.waitForFunction(() => document.title === '8 workers', null, { timeout: 60_000 });

useTestPage('/tests/e2e/pages/nested_workers.html', { tests: true, ready }, (ctx) => {
  const { test } = ctx;
  let attempts = 0;

  test('a test that finds the page stuck runs once more, on a fresh page', async () => {
    attempts += 1;
    if (attempts === 1) {
      await ctx.page.evaluate(() => { window.seenBefore = true; });
      await ctx.page.evaluate(() => new Promise(() => {}), null, { timeout: 1000 }); // never answers
    }
    assert.equal(await ctx.page.evaluate(() => window.seenBefore ?? false), false, 'the page was opened afresh');
  });

  test('it ran twice, and the page answers again', async () => {
    assert.equal(attempts, 2);
    assert.equal(await ctx.page.evaluate(() => document.title), '8 workers');
  });
});
