import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import type { Browser } from 'playwright-core';

// Debian's chromium driven by playwright-core: no browser download, no network. The
// background-networking flags matter here: without them chromium keeps dialling Google's hosts,
// which this machine refuses, many at a time.

export const chromiumPath = process.env['CONVERGE_CHROMIUM'] ?? '/usr/bin/chromium';

export const chromiumArgs = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--no-default-browser-check',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-default-apps',
  '--disable-extensions',
  '--disable-domain-reliability',
  '--disable-client-side-phishing-detection',
  '--metrics-recording-only',
];

export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({ executablePath: chromiumPath, headless: true, args: chromiumArgs });
}

/**
 * Register `body`'s tests if chromium is installed; otherwise one failing test under
 * CONVERGE_REQUIRE_BROKER=1 (CI, whose .ci/run installs it) or one loudly skipped test.
 */
export function withChromium(what: string, body: () => void): void {
  if (existsSync(chromiumPath)) return body();
  const reason = `${chromiumPath} not found (apt-get install chromium)`;
  if (process.env['CONVERGE_REQUIRE_BROKER'] === '1') {
    test(`${what} needs chromium (CONVERGE_REQUIRE_BROKER=1)`, () => assert.fail(reason));
  } else {
    console.warn(`\n*** SKIPPING ${what}: ${reason}; set CONVERGE_REQUIRE_BROKER=1 to fail instead ***\n`);
    test(`${what} — SKIPPED: ${reason}`, { skip: reason }, () => {});
  }
}
