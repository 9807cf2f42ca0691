// SPDX-License-Identifier: MIT
// A Python package index for one lab node (nodes.test.mjs): run inside the
// node's network namespace (nsenter --net=/run/netns/mcpsdlab-nN), it serves
// tests/integration/lib/pyindex.mjs's simple index on the gateway address
// of a bridge network of that node's engine, which the node's installer
// boxes (SANDBOX_PACKAGES_NETWORK) reach without any route out of the lab.
//
//   node tests/swarm/lab_index.mjs HOST
//
// Prints one JSON line { url } once it listens, then a line per request
// ("GET <path>"); stops on SIGTERM.
import { serveIndex, wheel } from '../integration/lib/pyindex.mjs';

const host = process.argv[2];
if (!/^\d+\.\d+\.\d+\.\d+$/.test(host ?? '')) {
  console.error('usage: node tests/swarm/lab_index.mjs IPV4-ADDRESS');
  process.exit(2);
}
const demo = wheel('mcpsd-lab-demo', '1.0', {
  'mcpsd_lab_demo/__init__.py': 'VALUE = 42\ndef where():\n    import socket\n    return socket.gethostname()\n',
});
const idx = await serveIndex({ 'mcpsd-lab-demo': [demo] }, { host });
let seen = 0;
const echo = setInterval(() => {
  while (seen < idx.requests.length) console.log(`GET ${idx.requests[seen++]}`);
}, 100);
console.log(JSON.stringify({ url: idx.url }));
process.on('SIGTERM', async () => {
  clearInterval(echo);
  await idx.close();
  process.exit(0);
});
