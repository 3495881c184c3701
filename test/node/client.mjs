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
            if (hasId) {
                this.serverRequests.push({ id: msg.id, method: msg.method, params: msg.params });
            } else {
                const n = { method: msg.method };
                if (msg.params !== undefined) n.params = msg.params;
                this.notifications.push(n);
                for (const w of this.waiters) w();
            }
            return;
        }
        if (hasId && ('result' in msg || 'error' in msg)) {
            if (msg.id === this.initializeId && 'result' in msg) {
                this.initializeResult = msg.result;
            }
            this.responses.set(msg.id, msg);
        }
    }

    countNotifications(method) {
        return this.notifications.filter(n => n.method === method).length;
    }

    waitForNotification(method, count, timeoutMs) {
        return new Promise(resolve => {
            const check = () => {
                if (this.countNotifications(method) >= count) {
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
    client.fallbackRequestHandler = async request => {
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
    const request = async (method, params, step) => {
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
            const parsed = await client.request(req, ResultSchema, ropts);
            sentId = wire.lastRequestId;
            const raw = sentId !== undefined ? wire.responses.get(sentId) : undefined;
            return raw && 'result' in raw ? raw.result : parsed;
        } catch (err) {
            sentId = wire.lastRequestId;
            throw Object.assign(new Error('request failed'), { rpc: errorObject(err, wire, sentId) });
        } finally {
            if (sentId !== undefined) wire.responses.delete(sentId);
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

    const ops = {
        listTools: s => listAll('tools/list', 'tools', s),
        listPrompts: s => listAll('prompts/list', 'prompts', s),
        listResources: s => listAll('resources/list', 'resources', s),
        listResourceTemplates: s => listAll('resources/templates/list', 'resourceTemplates', s),
        callTool: s => request('tools/call', withMeta({ name: s.name, arguments: s.arguments ?? {} }, s), s),
        getPrompt: s => request('prompts/get', withMeta(s.arguments !== undefined ? { name: s.name, arguments: s.arguments } : { name: s.name }, s), s),
        readResource: s => request('resources/read', withMeta({ uri: s.uri }, s), s),
        subscribeResource: s => request('resources/subscribe', withMeta({ uri: s.uri }, s), s),
        unsubscribeResource: s => request('resources/unsubscribe', withMeta({ uri: s.uri }, s), s),
        complete: s => request('completion/complete', withMeta({ ref: s.ref, argument: s.argument, ...(s.context !== undefined ? { context: s.context } : {}) }, s), s),
        setLoggingLevel: s => request('logging/setLevel', withMeta({ level: s.level }, s), s),
        ping: s => request('ping', undefined, s),
        // Escape hatches: any request / notification, verbatim.
        request: s => request(s.method, s.params, s),
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
        }
    };

    for (const step of steps) {
        const fn = ops[step.op];
        if (!fn) {
            out.steps.push({ op: step.op, ok: false, error: { code: null, message: `unknown op ${JSON.stringify(step.op)}`, local: true } });
            continue;
        }
        try {
            const result = await fn(step);
            out.steps.push({ op: step.op, ok: true, result });
        } catch (err) {
            const error = err && err.rpc ? err.rpc : errorObject(err, wire, undefined);
            out.steps.push({ op: step.op, ok: false, error });
        }
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
