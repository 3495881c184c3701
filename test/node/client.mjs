#!/usr/bin/env node
// Independent MCP client driver for Manifold's Go integration tests.
//
// Built on the official TypeScript SDK (pinned in package.json) so that the
// gateway is exercised by a client implementation that is not our own.
// See README.md for the full contract; summary:
//
//   node client.mjs --transport stdio --command CMD [--arg A]... [--env K=V]...
//   node client.mjs --transport http  --url http://127.0.0.1:PORT/mcp
//   node client.mjs --transport sse   --url http://127.0.0.1:PORT/sse
//     [--header "K: V"]... [--timeout-ms N] [--capabilities JSON] ...
//
// Reads a JSON array of steps on stdin, runs them in order and prints ONE JSON
// object on stdout. Exit 0 if it connected (even if steps failed), 2 if it could
// not connect or was used wrongly. Stderr carries diagnostics only.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { McpError, ErrorCode, ResultSchema } from '@modelcontextprotocol/sdk/types.js';

const DEFAULT_TIMEOUT_MS = 20000;
const MAX_PAGES = 1000;

const USAGE = `usage:
  node client.mjs --transport stdio --command CMD [--arg A]... [--env K=V]... [--inherit-env] [--cwd DIR]
  node client.mjs --transport http  --url URL [--header "K: V"]... [--no-terminate]
  node client.mjs --transport sse   --url URL [--header "K: V"]...
common flags:
  --timeout-ms N              per-request / connect timeout (default ${DEFAULT_TIMEOUT_MS})
  --capabilities JSON         client capabilities to declare (default {})
  --roots JSON                roots returned for roots/list when "roots" is declared (default [])
  --server-response M=JSON    canned result for server->client request method M (repeatable)
  --protocol-version V        protocolVersion to offer in initialize (default: SDK latest)
  --client-name NAME          clientInfo.name (default manifold-test-client)
  --client-version V          clientInfo.version (default 0.0.0)
steps (JSON array on stdin), e.g.
  [{"op":"listTools"},{"op":"callTool","name":"echo","arguments":{"message":"hi"}}]`;

function log(...args) {
    process.stderr.write(`[client.mjs] ${args.join(' ')}\n`);
}

class UsageError extends Error {}

function parseArgs(argv) {
    const o = {
        transport: undefined,
        command: undefined,
        args: [],
        env: {},
        inheritEnv: false,
        cwd: undefined,
        url: undefined,
        headers: {},
        timeoutMs: DEFAULT_TIMEOUT_MS,
        capabilities: {},
        roots: [],
        serverResponses: {},
        protocolVersion: undefined,
        clientName: 'manifold-test-client',
        clientVersion: '0.0.0',
        terminate: true
    };
    const need = (i, flag) => {
        if (i + 1 >= argv.length) throw new UsageError(`${flag} needs a value`);
        return argv[i + 1];
    };
    const parseJson = (s, flag) => {
        try {
            return JSON.parse(s);
        } catch (e) {
            throw new UsageError(`${flag}: invalid JSON: ${e.message}`);
        }
    };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        switch (a) {
            case '--transport': o.transport = need(i, a); i++; break;
            case '--command': o.command = need(i, a); i++; break;
            case '--arg': o.args.push(need(i, a)); i++; break;
            case '--env': {
                const kv = need(i, a); i++;
                const eq = kv.indexOf('=');
                if (eq <= 0) throw new UsageError(`--env wants K=V, got ${JSON.stringify(kv)}`);
                o.env[kv.slice(0, eq)] = kv.slice(eq + 1);
                break;
            }
            case '--inherit-env': o.inheritEnv = true; break;
            case '--cwd': o.cwd = need(i, a); i++; break;
            case '--url': o.url = need(i, a); i++; break;
            case '--header': {
                const h = need(i, a); i++;
                const c = h.indexOf(':');
                if (c <= 0) throw new UsageError(`--header wants "K: V", got ${JSON.stringify(h)}`);
                o.headers[h.slice(0, c).trim()] = h.slice(c + 1).trim();
                break;
            }
            case '--timeout-ms': {
                const n = Number(need(i, a)); i++;
                if (!Number.isFinite(n) || n <= 0) throw new UsageError('--timeout-ms wants a positive number');
                o.timeoutMs = n;
                break;
            }
            case '--capabilities': o.capabilities = parseJson(need(i, a), a); i++; break;
            case '--roots': o.roots = parseJson(need(i, a), a); i++; break;
            case '--server-response': {
                const kv = need(i, a); i++;
                const eq = kv.indexOf('=');
                if (eq <= 0) throw new UsageError(`--server-response wants METHOD=JSON`);
                o.serverResponses[kv.slice(0, eq)] = parseJson(kv.slice(eq + 1), a);
                break;
            }
            case '--protocol-version': o.protocolVersion = need(i, a); i++; break;
            case '--client-name': o.clientName = need(i, a); i++; break;
            case '--client-version': o.clientVersion = need(i, a); i++; break;
            case '--no-terminate': o.terminate = false; break;
            case '-h':
            case '--help':
                throw new UsageError('help');
            default:
                throw new UsageError(`unknown argument ${JSON.stringify(a)}`);
        }
    }
    if (!['stdio', 'http', 'sse'].includes(o.transport)) throw new UsageError('--transport must be stdio, http or sse');
    if (o.transport === 'stdio' && !o.command) throw new UsageError('--transport stdio needs --command');
    if (o.transport !== 'stdio') {
        if (!o.url) throw new UsageError(`--transport ${o.transport} needs --url`);
        try {
            new URL(o.url);
        } catch {
            throw new UsageError(`invalid --url ${JSON.stringify(o.url)}`);
        }
    }
    if (o.capabilities === null || typeof o.capabilities !== 'object' || Array.isArray(o.capabilities)) {
        throw new UsageError('--capabilities must be a JSON object');
    }
    return o;
}

async function readStdin() {
    if (process.stdin.isTTY) return '';
    const chunks = [];
    for await (const c of process.stdin) chunks.push(c);
    return Buffer.concat(chunks).toString('utf8');
}

function parseSteps(text) {
    if (text.trim() === '') return [];
    let steps;
    try {
        steps = JSON.parse(text);
    } catch (e) {
        throw new UsageError(`stdin is not valid JSON: ${e.message}`);
    }
    if (!Array.isArray(steps)) throw new UsageError('stdin must be a JSON array of steps');
    steps.forEach((s, i) => {
        if (s === null || typeof s !== 'object' || typeof s.op !== 'string') {
            throw new UsageError(`step ${i} must be an object with a string "op"`);
        }
    });
    return steps;
}

function writeAndExit(obj, code) {
    const text = JSON.stringify(obj) + '\n';
    process.stdout.write(text, () => process.exit(code));
}

// Wire-level bookkeeping: every message in both directions passes through here.
// We intercept the transport's onmessage/send so that (a) every notification is
// recorded (including ones the SDK consumes itself, e.g. progress), (b) the raw
// result / error of our own requests is kept exactly as it came off the wire
// (after the SDK's JSON-RPC envelope parse, which keeps result objects loose),
// and (c) server->client requests are recorded.
class Wire {
    constructor(protocolVersionOverride) {
        this.protocolVersionOverride = protocolVersionOverride;
        this.notifications = [];
        this.serverRequests = [];
        this.responses = new Map(); // request id -> raw response message
        this.lastRequestId = undefined;
        this.initializeId = undefined;
        this.initializeResult = undefined;
        this.waiters = new Set();
        // request id -> {notifications, serverRequests} counts when its response arrived
        this.responseMarks = new Map();
        this.started = Date.now();
    }

    // mark is how many notifications and server requests have arrived so far.
    mark() {
        return { notifications: this.notifications.length, serverRequests: this.serverRequests.length };
    }

    attach(transport) {
        let inner;
        const wire = this;
        Object.defineProperty(transport, 'onmessage', {
            configurable: true,
            enumerable: true,
            get() {
                return inner === undefined ? undefined : (msg, extra) => {
                    wire.onIncoming(msg);
                    return inner(msg, extra);
                };
            },
            set(fn) {
                inner = fn;
            }
        });
        const send = transport.send.bind(transport);
        transport.send = (msg, opts) => {
            if (msg && typeof msg === 'object' && 'method' in msg && 'id' in msg) {
                if (msg.method === 'initialize') {
                    this.initializeId = msg.id;
                    if (this.protocolVersionOverride !== undefined) {
                        msg = { ...msg, params: { ...msg.params, protocolVersion: this.protocolVersionOverride } };
                    }
                }
                this.lastRequestId = msg.id;
            }
            return send(msg, opts);
        };
    }

    onIncoming(msg) {
        if (!msg || typeof msg !== 'object') return;
        const hasId = 'id' in msg && msg.id !== undefined && msg.id !== null;
        if ('method' in msg) {
            const t = Date.now() - this.started;
            if (hasId) {
                this.serverRequests.push({ id: msg.id, method: msg.method, params: msg.params, t });
            } else {
                const n = { method: msg.method };
                if (msg.params !== undefined) n.params = msg.params;
                n.t = t;
                this.notifications.push(n);
            }
            for (const w of this.waiters) w();
            return;
        }
        if (hasId && ('result' in msg || 'error' in msg)) {
            if (msg.id === this.initializeId && 'result' in msg) {
                this.initializeResult = msg.result;
            }
            this.responses.set(msg.id, msg);
            this.responseMarks.set(msg.id, this.mark());
        }
    }

    countNotifications(method) {
        return this.notifications.filter(n => n.method === method).length;
    }

    // matching returns the messages of list (notifications or serverRequests)
    // from index `from` on with this method whose params contain `match`.
    // With pattern (a RegExp), JSON.stringify(params) must match it too.
    matching(list, method, from = 0, match = undefined, pattern = undefined) {
        return list
            .slice(from)
            .filter(n => n.method === method && (match === undefined || contains(n.params, match)) && (pattern === undefined || pattern.test(JSON.stringify(n.params ?? null))));
    }

    // waitFor resolves true once pred() holds, false after timeoutMs.
    waitFor(pred, timeoutMs) {
        return new Promise(resolve => {
            const check = () => {
                if (pred()) {
                    cleanup();
                    resolve(true);
                }
            };
            const timer = setTimeout(() => {
                cleanup();
                resolve(false);
            }, timeoutMs);
            const cleanup = () => {
                clearTimeout(timer);
                this.waiters.delete(check);
            };
            this.waiters.add(check);
            check();
        });
    }

    waitForNotification(method, count, timeoutMs) {
        return this.waitFor(() => this.countNotifications(method) >= count, timeoutMs);
    }
}

// contains reports whether value has everything in want: objects key by key
// (extra keys allowed), arrays and primitives by deep equality.
function contains(value, want) {
    if (want === null || typeof want !== 'object') return value === want;
    if (value === null || typeof value !== 'object') return false;
    if (Array.isArray(want)) {
        return Array.isArray(value) && value.length === want.length && want.every((w, i) => contains(value[i], w));
    }
    return Object.keys(want).every(k => contains(value[k], want[k]));
}

function errorObject(err, wire, requestId) {
    // Prefer the JSON-RPC error exactly as the server sent it.
    const raw = requestId !== undefined ? wire.responses.get(requestId) : undefined;
    if (raw && raw.error) {
        const e = { code: raw.error.code, message: raw.error.message };
        if (raw.error.data !== undefined) e.data = raw.error.data;
        return e;
    }
    // Otherwise a locally generated error (timeout, connection closed, HTTP failure, ...).
    const e = { code: null, message: String(err && err.message ? err.message : err), local: true };
    if (err instanceof McpError) {
        e.code = err.code;
        e.message = e.message.replace(/^MCP error -?\d+: /, '');
        if (err.data !== undefined) e.data = err.data;
    } else if (err && typeof err.code === 'number') {
        // e.g. StreamableHTTPError / SseError carry the HTTP status here.
        e.httpStatus = err.code;
    }
    return e;
}

async function main() {
    let opts;
    let steps;
    try {
        opts = parseArgs(process.argv.slice(2));
        steps = parseSteps(await readStdin());
    } catch (e) {
        if (e instanceof UsageError) {
            process.stderr.write(USAGE + '\n');
            writeAndExit({ error: e.message === 'help' ? 'help requested' : `usage: ${e.message}` }, 2);
            return;
        }
        throw e;
    }

    let transport;
    if (opts.transport === 'stdio') {
        const env = opts.inheritEnv ? { ...process.env, ...opts.env } : { ...getDefaultEnvironment(), ...opts.env };
        transport = new StdioClientTransport({
            command: opts.command,
            args: opts.args,
            env,
            cwd: opts.cwd,
            stderr: 'inherit'
        });
    } else if (opts.transport === 'http') {
        transport = new StreamableHTTPClientTransport(new URL(opts.url), {
            requestInit: { headers: opts.headers },
            // Don't let a dropped GET stream make us reconnect forever.
            reconnectionOptions: { maxReconnectionDelay: 1000, initialReconnectionDelay: 200, reconnectionDelayGrowFactor: 1.5, maxRetries: 2 }
        });
    } else {
        transport = new SSEClientTransport(new URL(opts.url), { requestInit: { headers: opts.headers } });
    }

    const wire = new Wire(opts.protocolVersion);
    wire.attach(transport);

    // Remember the stdio child's pid as soon as it is spawned: if initialize
    // fails, the SDK starts its own close() (which forgets the process) and we
    // must still make sure the child is gone before we exit.
    let childPid;
    if (opts.transport === 'stdio') {
        const start = transport.start.bind(transport);
        transport.start = async () => {
            try {
                await start();
            } finally {
                childPid = transport.pid ?? undefined;
            }
        };
    }

    const client = new Client({ name: opts.clientName, version: opts.clientVersion }, { capabilities: opts.capabilities });

    // Answers to server->client requests. Only for capabilities we declared
    // (or methods given explicitly via --server-response); otherwise the
    // server gets "Method not found", as from a client that lacks the feature.
    const canned = {};
    if (opts.capabilities.roots) canned['roots/list'] = { roots: opts.roots };
    if (opts.capabilities.sampling) {
        canned['sampling/createMessage'] = {
            role: 'assistant',
            content: { type: 'text', text: 'sampled by manifold-test-client' },
            model: 'manifold-test-client',
            stopReason: 'endTurn'
        };
    }
    if (opts.capabilities.elicitation) canned['elicitation/create'] = { action: 'decline' };
    Object.assign(canned, opts.serverResponses);
    // failures: method -> JSON-RPC error to answer with (the "respond" step's "error").
    const failures = {};
    client.fallbackRequestHandler = async request => {
        if (Object.prototype.hasOwnProperty.call(failures, request.method)) {
            // Not an McpError, whose message gets an "MCP error <code>: " prefix:
            // the SDK sends code, message and data of any error as they are.
            const e = failures[request.method];
            throw Object.assign(new Error(e.message), { code: e.code, data: e.data });
        }
        if (Object.prototype.hasOwnProperty.call(canned, request.method)) return canned[request.method];
        throw new McpError(ErrorCode.MethodNotFound, 'Method not found');
    };

    let closing = false;
    let closedByPeer = false;
    client.onerror = err => closing || log('transport/protocol error:', err && err.message ? err.message : String(err));
    client.onclose = () => {
        if (!closing) {
            closedByPeer = true;
            log('connection closed by peer');
        }
    };

    const shutdown = async () => {
        closing = true;
        if (opts.transport === 'http' && opts.terminate && transport.sessionId) {
            try {
                await withTimeout(transport.terminateSession(), 3000, 'terminateSession');
            } catch (e) {
                log('terminateSession failed:', e.message);
            }
        }
        try {
            await withTimeout(client.close(), 8000, 'close');
        } catch (e) {
            log('close failed:', e.message);
        }
        if (childPid !== undefined) await reapChild(childPid);
    };

    for (const sig of ['SIGINT', 'SIGTERM']) {
        process.once(sig, () => {
            log(`got ${sig}, closing`);
            shutdown().finally(() => writeAndExit({ error: `terminated by ${sig}` }, 2));
        });
    }

    try {
        await client.connect(transport, { timeout: opts.timeoutMs });
    } catch (e) {
        const msg = e && e.message ? e.message : String(e);
        log('connect failed:', msg);
        await shutdown();
        writeAndExit({ error: `connect failed: ${msg}` }, 2);
        return;
    }

    const init = wire.initializeResult || {};
    const out = {
        protocolVersion: init.protocolVersion,
        serverInfo: init.serverInfo ?? client.getServerVersion(),
        capabilities: init.capabilities ?? client.getServerCapabilities(),
        instructions: init.instructions ?? client.getInstructions() ?? null,
        steps: [],
        notifications: wire.notifications,
        serverRequests: wire.serverRequests
    };
    if (opts.transport === 'http') out.sessionId = transport.sessionId ?? null;

    // One JSON-RPC request, returning the raw result as it came off the wire.
    // ctx (per step) receives the request id and the marks when the response
    // arrived. The SDK sends synchronously inside client.request(), so the id
    // is read right after the call, before any other step can send.
    const request = async (method, params, step, ctx = {}) => {
        const req = params === undefined ? { method } : { method, params };
        const timeout = typeof step.timeoutMs === 'number' ? step.timeoutMs : opts.timeoutMs;
        wire.lastRequestId = undefined;
        let sentId;
        try {
            const ropts = { timeout };
            // "progress": true asks the SDK to attach a progressToken (the request id)
            // and to keep the request alive while progress arrives; the
            // notifications/progress messages themselves land in "notifications".
            if (step.progress) {
                ropts.onprogress = () => {};
                ropts.resetTimeoutOnProgress = true;
            }
            const pending = client.request(req, ResultSchema, ropts);
            sentId = wire.lastRequestId;
            ctx.requestId = sentId;
            const parsed = await pending;
            const raw = sentId !== undefined ? wire.responses.get(sentId) : undefined;
            return raw && 'result' in raw ? raw.result : parsed;
        } catch (err) {
            throw Object.assign(new Error('request failed'), { rpc: errorObject(err, wire, sentId) });
        } finally {
            if (sentId !== undefined) {
                wire.responses.delete(sentId);
                if (wire.responseMarks.has(sentId)) ctx.response = wire.responseMarks.get(sentId);
                wire.responseMarks.delete(sentId);
            }
        }
    };

    const withMeta = (params, step) => (step._meta !== undefined ? { ...params, _meta: step._meta } : params);

    const listAll = async (method, key, step) => {
        const items = [];
        const pageSizes = [];
        let cursor = step.cursor;
        let pages = 0;
        for (;;) {
            const params = withMeta(cursor !== undefined ? { cursor } : {}, step);
            const res = await request(method, Object.keys(params).length ? params : undefined, step);
            pages++;
            const page = Array.isArray(res[key]) ? res[key] : [];
            items.push(...page);
            pageSizes.push(page.length);
            cursor = res.nextCursor;
            if (cursor === undefined || cursor === null) break;
            if (pages >= (step.maxPages ?? MAX_PAGES)) {
                throw Object.assign(new Error('too many pages'), {
                    rpc: { code: null, message: `gave up after ${pages} pages (nextCursor still set)`, local: true }
                });
            }
        }
        return { items, pages, pageSizes };
    };

    // Marks of each step's start (by index in the steps array), for "since".
    const starts = [];
    const sinceMark = s => {
        if (s.since === undefined) return { notifications: 0, serverRequests: 0 };
        const m = starts[s.since];
        if (!Number.isInteger(s.since) || m === undefined) {
            throw Object.assign(new Error('bad since'), { rpc: { code: null, message: `"since": ${JSON.stringify(s.since)} is not a step that has started`, local: true } });
        }
        return m;
    };
    const patternOf = s => {
        if (s.pattern === undefined) return undefined;
        try {
            return new RegExp(s.pattern);
        } catch (e) {
            throw Object.assign(new Error('bad pattern'), { rpc: { code: null, message: `"pattern": ${e.message}`, local: true } });
        }
    };
    const timedOut = message => Object.assign(new Error('timeout'), { rpc: { code: ErrorCode.RequestTimeout, message, local: true } });
    const sleep = ms => new Promise(r => setTimeout(r, ms));

    // runStep runs one step and returns its output entry.
    const runStep = async (step, index) => {
        if (step === null || typeof step !== 'object' || typeof step.op !== 'string') {
            return { op: null, ok: false, error: { code: null, message: `a step must be an object with a string "op", got ${JSON.stringify(step)}`, local: true } };
        }
        const fn = ops[step.op];
        const entry = { op: step.op };
        if (!fn) return { ...entry, ok: false, error: { code: null, message: `unknown op ${JSON.stringify(step.op)}`, local: true } };
        const ctx = {};
        const t0 = Date.now();
        const start = wire.mark();
        if (index !== undefined) starts[index] = start;
        try {
            const result = await fn(step, ctx);
            Object.assign(entry, { ok: true, result });
        } catch (err) {
            const error = err && err.rpc ? err.rpc : errorObject(err, wire, undefined);
            Object.assign(entry, { ok: false, error });
        }
        if (ctx.requestId !== undefined) entry.requestId = ctx.requestId;
        entry.ms = Date.now() - t0;
        entry.marks = { start, end: wire.mark() };
        if (ctx.response !== undefined) entry.marks.response = ctx.response;
        return entry;
    };

    const ops = {
        listTools: s => listAll('tools/list', 'tools', s),
        listPrompts: s => listAll('prompts/list', 'prompts', s),
        listResources: s => listAll('resources/list', 'resources', s),
        listResourceTemplates: s => listAll('resources/templates/list', 'resourceTemplates', s),
        callTool: (s, c) => request('tools/call', withMeta({ name: s.name, arguments: s.arguments ?? {} }, s), s, c),
        getPrompt: (s, c) => request('prompts/get', withMeta(s.arguments !== undefined ? { name: s.name, arguments: s.arguments } : { name: s.name }, s), s, c),
        readResource: (s, c) => request('resources/read', withMeta({ uri: s.uri }, s), s, c),
        subscribeResource: (s, c) => request('resources/subscribe', withMeta({ uri: s.uri }, s), s, c),
        unsubscribeResource: (s, c) => request('resources/unsubscribe', withMeta({ uri: s.uri }, s), s, c),
        complete: (s, c) => request('completion/complete', withMeta({ ref: s.ref, argument: s.argument, ...(s.context !== undefined ? { context: s.context } : {}) }, s), s, c),
        setLoggingLevel: (s, c) => request('logging/setLevel', withMeta({ level: s.level }, s), s, c),
        ping: (s, c) => request('ping', undefined, s, c),
        // Progressive discovery as a host drives it, with the SDK's own
        // listTools and callTool: list, search (s.query), take the first
        // hit, describe it, call it through the call meta-tool with
        // s.arguments. s.search, s.describe, s.call name the meta-tools.
        discover: async s => {
            const listed = (await client.listTools()).tools.map(t => t.name);
            for (const name of [s.search, s.describe, s.call]) {
                if (!listed.includes(name)) throw Object.assign(new Error('usage'), { rpc: { code: null, message: `${name} is not listed: ${listed}`, local: true } });
            }
            const search = await client.callTool({ name: s.search, arguments: { query: s.query } });
            const hits = search.structuredContent?.tools ?? [];
            if (search.isError || hits.length === 0) throw Object.assign(new Error('no hit'), { rpc: { code: null, message: `search found nothing: ${JSON.stringify(search)}`, local: true } });
            const picked = hits[0].name;
            const describe = await client.callTool({ name: s.describe, arguments: { name: picked } });
            const call = await client.callTool({ name: s.call, arguments: { name: picked, arguments: s.arguments ?? {} } });
            return { listed, hits: hits.map(h => h.name), picked, describe, call };
        },
        // Escape hatches: any request / notification, verbatim.
        request: (s, c) => request(s.method, s.params, s, c),
        notify: async s => {
            await client.notification(s.params === undefined ? { method: s.method } : { method: s.method, params: s.params });
            return {};
        },
        sleep: async s => {
            await new Promise(r => setTimeout(r, Number(s.ms) || 0));
            return {};
        },
        waitNotification: async s => {
            const count = s.count ?? 1;
            const timeoutMs = s.timeoutMs ?? opts.timeoutMs;
            if (s.since !== undefined || s.match !== undefined || s.pattern !== undefined) {
                const from = sinceMark(s).notifications;
                const pattern = patternOf(s);
                const found = () => wire.matching(wire.notifications, s.method, from, s.match, pattern);
                if (!(await wire.waitFor(() => found().length >= count, timeoutMs))) {
                    throw timedOut(`timed out after ${timeoutMs}ms waiting for ${count} x ${s.method} (got ${found().length})`);
                }
                const got = found();
                return { notification: got[count - 1], count: got.length };
            }
            const ok = await wire.waitForNotification(s.method, count, timeoutMs);
            if (!ok) {
                throw Object.assign(new Error('timeout'), {
                    rpc: {
                        code: ErrorCode.RequestTimeout,
                        message: `timed out after ${timeoutMs}ms waiting for ${count} x ${s.method} (got ${wire.countNotifications(s.method)})`,
                        local: true
                    }
                });
            }
            const matching = wire.notifications.filter(n => n.method === s.method);
            return { notification: matching[count - 1], count: matching.length };
        },
        waitServerRequest: async s => {
            const count = s.count ?? 1;
            const timeoutMs = s.timeoutMs ?? opts.timeoutMs;
            const from = sinceMark(s).serverRequests;
            const pattern = patternOf(s);
            const found = () => wire.matching(wire.serverRequests, s.method, from, s.match, pattern);
            if (!(await wire.waitFor(() => found().length >= count, timeoutMs))) {
                throw timedOut(`timed out after ${timeoutMs}ms waiting for ${count} x ${s.method} request (got ${found().length})`);
            }
            const got = found();
            return { request: got[count - 1], count: got.length };
        },
        // Scripted answers to server->client requests, from this step on.
        respond: async s => {
            if (typeof s.method !== 'string') throw Object.assign(new Error('usage'), { rpc: { code: null, message: 'respond needs "method"', local: true } });
            delete failures[s.method];
            delete canned[s.method];
            if (s.error !== undefined) failures[s.method] = s.error;
            else canned[s.method] = s.result ?? {};
            return {};
        },
        setRoots: async s => {
            canned['roots/list'] = { roots: Array.isArray(s.roots) ? s.roots : [] };
            if (s.notify !== false) await client.sendRootsListChanged();
            return {};
        },
        // Runs "step" again every intervalMs until it succeeds and its JSON
        // result contains the text "contains"; times out like waitNotification.
        until: async s => {
            if (s.step === null || typeof s.step !== 'object' || typeof s.step.op !== 'string') {
                throw Object.assign(new Error('usage'), { rpc: { code: null, message: 'until needs "step": {"op": ...}', local: true } });
            }
            const timeoutMs = s.timeoutMs ?? opts.timeoutMs;
            const deadline = Date.now() + timeoutMs;
            let attempts = 0;
            let last;
            for (;;) {
                attempts++;
                last = await runStep(s.step);
                if (last.ok && (s.contains === undefined || JSON.stringify(last.result).includes(s.contains))) {
                    return { attempts, step: last };
                }
                if (Date.now() + (s.intervalMs ?? 200) > deadline) {
                    const e = timedOut(`timed out after ${timeoutMs}ms (${attempts} attempts) waiting for ${s.step && s.step.op} to contain ${JSON.stringify(s.contains)}`);
                    e.rpc.data = { last };
                    throw e;
                }
                await sleep(s.intervalMs ?? 200);
            }
        },
        // Runs "steps" concurrently; ok even if some failed (each has its own "ok").
        parallel: async s => ({ steps: await Promise.all((s.steps ?? []).map(sub => runStep(sub))) })
    };
    ops.subscribe = ops.subscribeResource;
    ops.unsubscribe = ops.unsubscribeResource;

    for (const [i, step] of steps.entries()) {
        out.steps.push(await runStep(step, i));
    }

    out.closedByPeer = closedByPeer;
    await shutdown();
    writeAndExit(out, 0);
}

function alive(pid) {
    try {
        process.kill(pid, 0);
        return true;
    } catch (e) {
        return e.code === 'EPERM';
    }
}

// Wait for the stdio child to exit (the SDK closes stdin, then SIGTERM after 2s,
// then SIGKILL after 2s more); escalate ourselves if it is still there.
async function reapChild(pid) {
    const sleep = ms => new Promise(r => setTimeout(r, ms));
    const waitGone = async ms => {
        for (let t = 0; t < ms && alive(pid); t += 50) await sleep(50);
        return !alive(pid);
    };
    if (await waitGone(4500)) return;
    for (const sig of ['SIGTERM', 'SIGKILL']) {
        log(`stdio child ${pid} still running, sending ${sig}`);
        try {
            process.kill(pid, sig);
        } catch {
            return;
        }
        if (await waitGone(1000)) return;
    }
}

function withTimeout(p, ms, what) {
    let t;
    return Promise.race([
        Promise.resolve(p).finally(() => clearTimeout(t)),
        new Promise((_, reject) => {
            t = setTimeout(() => reject(new Error(`${what} timed out after ${ms}ms`)), ms);
        })
    ]);
}

main().catch(e => {
    log('fatal:', e && e.stack ? e.stack : String(e));
    writeAndExit({ error: `fatal: ${e && e.message ? e.message : String(e)}` }, 2);
});
