// Baseline (b): the official @a2a-js/sdk v1.0 server, in memory (express + JSON-RPC + InMemoryTaskStore).
//
// Child process, started by bench/baselines/sdk-in-memory.ts. Listens on 127.0.0.1:<random> and
// prints ONE JSON line on stdout:
//   {"ready":true,"url":"http://127.0.0.1:PORT/a2a/jsonrpc","restUrl":".../a2a/rest","cardUrl":".../.well-known/agent-card.json"}
// Exits when stdin closes (parent died) or on SIGTERM/SIGINT.
//
// Wire notes (see /tmp/sdk-notes.md): requests MUST carry `A2A-Version: 1.0` (absent header is
// treated as 0.3 -> JSON-RPC error -32009 with HTTP 200), method `SendMessage`, proto-JSON params
// `{message:{messageId, role:'ROLE_USER', parts:[{text}]}, configuration:{returnImmediately:true}}`.
// With returnImmediately the answer is the first executor event: `{result:{task:{…SUBMITTED…}}}`.
import { InMemoryTaskStore } from '@a2a-js/sdk/server';
import { serveSdk } from './sdk-common.mjs';

await serveSdk({ name: 'SDK Echo Agent (bench baseline)', description: 'Echoes the user text; in-memory @a2a-js/sdk server', store: new InMemoryTaskStore() });
