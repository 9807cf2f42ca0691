#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// A "browser" for clients that open the OAuth authorization URL with
// $BROWSER (the MCP Inspector, mcp-remote): it answers the consent page
// with the API token in MCPSD_CONSENT_TOKEN and delivers the redirect to
// the client's callback, as a person clicking Approve would. What it did
// is appended to MCPSD_CONSENT_LOG when set.
import { appendFileSync } from 'node:fs';
import { consent } from './oauth.mjs';

const url = process.argv.slice(2).find((a) => /^https?:\/\//.test(a));
const log = (line) => {
  if (process.env.MCPSD_CONSENT_LOG) appendFileSync(process.env.MCPSD_CONSENT_LOG, `${line}\n`);
};
if (!url) {
  log(`no URL in ${JSON.stringify(process.argv.slice(2))}`);
  process.exit(2);
}
try {
  const r = await consent(url, { token: process.env.MCPSD_CONSENT_TOKEN });
  log(`opened ${url}\n-> ${r.status} ${r.location ?? ''} callback ${r.callbackStatus ?? r.callbackError ?? ''}`);
  process.exit(r.status === 303 ? 0 : 1);
} catch (e) {
  log(`failed on ${url}: ${e.stack}`);
  process.exit(1);
}
