import type { ConfigInput } from '../src/config/schema.js';
import { announce } from './child.js';
import { importDist } from './dist.js';

/*
 * The gateway as it runs in production: the built dist/, buildServer() with the real config,
 * info-level log lines on stdout (which the bench points at /dev/null); plus stats over IPC.
 */

const { validateConfig } = await importDist<typeof import('../src/config/load.js')>('config/load');
const { buildServer } = await importDist<typeof import('../src/server.js')>('server');
const config = validateConfig(JSON.parse(process.argv[2] ?? '{}') as ConfigInput);
const app = buildServer(config);
await app.listen({ host: '127.0.0.1', port: 0 });
announce(app.server);
