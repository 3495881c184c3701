// Self-test of the Node harness: drives client.mjs against the pinned reference
// servers directly (no gateway). Run: cd test/node && npm ci && node --test
// HTTP/SSE servers are bound to 127.0.0.1 only (loopback.cjs) on a free port
// and are killed at the end of each test.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import os from 'node:os';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const CLIENT = path.join(here, 'client.mjs');
const EVERYTHING = path.join(here, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const MEMORY = path.join(here, 'node_modules/@modelcontextprotocol/server-memory/dist/index.js');
const LOOPBACK = path.join(here, 'loopback.cjs');

function runClient(args, steps, { timeoutMs = 60000 } = {}) {
    return new Promise((resolve, reject) => {
        const p = spawn(process.execPath, [CLIENT, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
        let out = '';
        let err = '';
        p.stdout.on('data', d => (out += d));
        p.stderr.on('data', d => (err += d));
        const t = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
        p.on('error', reject);
        p.on('close', code => {
            clearTimeout(t);
            try {
                resolve({ code, json: JSON.parse(out), stderr: err });
            } catch (e) {
                reject(new Error(`bad stdout (code ${code}): ${out}\nstderr: ${err}`));
            }
        });
        p.stdin.end(JSON.stringify(steps));
    });
}

function freePort() {
    return new Promise((resolve, reject) => {
        const s = net.createServer();
        s.on('error', reject);
        s.listen(0, '127.0.0.1', () => {
            const { port } = s.address();
            s.close(() => resolve(port));
        });
    });
}

async function startHttpServer(mode) {
    const port = await freePort();
    const child = spawn(process.execPath, ['--require', LOOPBACK, EVERYTHING, mode], {
        env: { ...process.env, PORT: String(port) },
        stdio: ['ignore', 'pipe', 'pipe']
    });
    let log = '';
    const ready = new Promise((resolve, reject) => {
        const onData = d => {
            log += d;
            if (/listening on port|running on port/i.test(log)) resolve();
        };
        child.stdout.on('data', onData);
        child.stderr.on('data', onData);
        child.on('exit', code => reject(new Error(`server exited early (${code}): ${log}`)));
        setTimeout(() => reject(new Error(`server did not start: ${log}`)), 15000).unref();
    });
    const stop = () =>
        new Promise(resolve => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', resolve);
            child.kill('SIGKILL');
        });
    try {
        await ready;
    } catch (e) {
        await stop();
        throw e;
    }
    return { port, stop };
}

const names = step => step.result.items.map(i => i.name);

const BASIC_STEPS = [
    { op: 'listTools' },
    { op: 'callTool', name: 'echo', arguments: { message: 'hello' } },
    { op: 'listResources' },
    { op: 'listResourceTemplates' },
    { op: 'readResource', uri: 'demo://resource/dynamic/text/1' },
    { op: 'listPrompts' },
    { op: 'getPrompt', name: 'args-prompt', arguments: { city: 'Paris' } },
    { op: 'complete', ref: { type: 'ref/prompt', name: 'completable-prompt' }, argument: { name: 'department', value: 'E' } },
    { op: 'ping' },
    { op: 'request', method: 'no/such/method' }
];

function checkBasic(json) {
    assert.equal(json.serverInfo.name, 'mcp-servers/everything');
    assert.match(json.protocolVersion, /^\d{4}-\d{2}-\d{2}$/);
    const [tools, echo, resources, templates, read, prompts, prompt, complete, ping, bogus] = json.steps;
    for (const s of [tools, echo, resources, templates, read, prompts, prompt, complete, ping]) assert.equal(s.ok, true, JSON.stringify(s));
    assert.ok(names(tools).includes('echo'));
    // Unknown fields (title, annotations, execution) survive untouched.
    const echoTool = tools.result.items.find(t => t.name === 'echo');
    assert.ok(echoTool.annotations && echoTool.execution, 'raw tool fields kept');
    assert.deepEqual(echo.result.content, [{ type: 'text', text: 'Echo: hello' }]);
    assert.equal(resources.result.items.length, 7);
    assert.equal(templates.result.items.length, 2);
    assert.match(read.result.contents[0].text, /^Resource 1:/);
    assert.deepEqual(names(prompts).sort(), ['args-prompt', 'completable-prompt', 'resource-prompt', 'simple-prompt']);
    assert.match(prompt.result.messages[0].content.text, /Paris/);
    assert.deepEqual(complete.result.completion.values, ['Engineering']);
    assert.deepEqual(ping.result, {});
    assert.equal(bogus.ok, false);
    assert.equal(bogus.error.code, -32601);
}

test('server-everything over stdio', async () => {
    const { code, json } = await runClient(['--transport', 'stdio', '--command', process.execPath, '--arg', EVERYTHING, '--arg', 'stdio'], [
        { op: 'waitNotification', method: 'notifications/tools/list_changed', timeoutMs: 5000 },
        ...BASIC_STEPS
    ]);
    assert.equal(code, 0);
    assert.equal(json.steps[0].ok, true);
    checkBasic({ ...json, steps: json.steps.slice(1) });
    assert.equal(names(json.steps[1]).length, 13);
});

test('server-everything registers client-capability tools', async () => {
    const caps = { sampling: {}, elicitation: { form: {}, url: {} }, roots: {} };
    const { code, json } = await runClient(
        ['--transport', 'stdio', '--command', process.execPath, '--arg', EVERYTHING, '--capabilities', JSON.stringify(caps), '--roots', '[{"uri":"file:///tmp/r","name":"r"}]'],
        [
            { op: 'listTools' },
            { op: 'callTool', name: 'trigger-sampling-request', arguments: { prompt: 'hi' } },
            { op: 'callTool', name: 'get-roots-list' }
        ]
    );
    assert.equal(code, 0);
    const tools = names(json.steps[0]);
    for (const t of ['get-roots-list', 'trigger-sampling-request', 'trigger-elicitation-request', 'trigger-url-elicitation']) assert.ok(tools.includes(t), t);
    assert.match(json.steps[1].result.content[0].text, /sampled by manifold-test-client/);
    assert.match(json.steps[2].result.content[0].text, /file:\/\/\/tmp\/r/);
    assert.ok(json.serverRequests.some(r => r.method === 'sampling/createMessage'));
});

test('scripted answers, roots changes, marks, filters, until and parallel', async () => {
    const caps = { sampling: {}, elicitation: { form: {}, url: {} }, roots: { listChanged: true } };
    const doc = 'demo://resource/static/document/architecture.md';
    const progress = { op: 'callTool', name: 'trigger-long-running-operation', arguments: { duration: 0.3, steps: 3 }, progress: true };
    const own = { op: 'callTool', name: 'trigger-long-running-operation', arguments: { duration: 0.2, steps: 2 }, _meta: { progressToken: 'mine' } };
    const steps = [
        { op: 'respond', method: 'elicitation/create', result: { action: 'accept', content: { name: 'Ada' } } }, // 0
        { op: 'callTool', name: 'trigger-elicitation-request' }, // 1
        { op: 'respond', method: 'elicitation/create', result: { action: 'cancel' } }, // 2
        { op: 'callTool', name: 'trigger-elicitation-request' }, // 3
        { op: 'respond', method: 'elicitation/create', error: { code: -32600, message: 'no thanks' } }, // 4
        { op: 'callTool', name: 'trigger-elicitation-request' }, // 5
        { op: 'callTool', name: 'trigger-url-elicitation', arguments: { url: 'https://example.com/x', errorPath: true } }, // 6
        { op: 'callTool', name: 'get-roots-list' }, // 7
        { op: 'setRoots', roots: [{ uri: 'file:///two', name: 'two' }] }, // 8
        { op: 'waitServerRequest', method: 'roots/list', since: 8, timeoutMs: 3000 }, // 9
        { op: 'until', step: { op: 'callTool', name: 'get-roots-list' }, contains: 'file:///two', timeoutMs: 3000, intervalMs: 50 }, // 10
        { op: 'parallel', steps: [progress, own] }, // 11
        { op: 'subscribe', uri: doc }, // 12
        { op: 'callTool', name: 'toggle-subscriber-updates' }, // 13
        { op: 'waitNotification', method: 'notifications/resources/updated', since: 13, match: { uri: doc }, timeoutMs: 3000 }, // 14
        { op: 'waitNotification', method: 'notifications/resources/updated', since: 13, match: { uri: 'demo://nope' }, timeoutMs: 100 }, // 15
        { op: 'waitNotification', method: 'notifications/message', pattern: 'Subscribe Resource request', timeoutMs: 3000 }, // 16
        { op: 'until', step: { op: 'ping' }, contains: 'never', timeoutMs: 150, intervalMs: 50 }, // 17
        { op: 'parallel', steps: [{ op: 'nope' }, 42] } // 18
    ];
    const { code, json } = await runClient(
        ['--transport', 'stdio', '--command', process.execPath, '--arg', EVERYTHING, '--capabilities', JSON.stringify(caps), '--roots', '[{"uri":"file:///one","name":"one"}]'],
        steps
    );
    assert.equal(code, 0);
    const s = json.steps;
    for (const i of [0, 1, 2, 3, 5, 7, 8, 9, 10, 11, 12, 13, 14, 16, 18]) assert.equal(s[i].ok, true, `step ${i}: ${JSON.stringify(s[i])}`);
    const text = r => r.result.content.map(c => c.text).join('\n');
    assert.match(text(s[1]), /User provided the requested information[\s\S]*Name: Ada/);
    assert.match(text(s[3]), /User cancelled/);
    assert.match(text(s[5]), /no thanks/); // the server reports our error as a tool error
    // Each step records its request id and when the response arrived.
    assert.equal(typeof s[1].requestId, 'number');
    assert.equal(typeof s[1].ms, 'number');
    const elicits = json.serverRequests.slice(s[1].marks.start.serverRequests, s[1].marks.response.serverRequests);
    assert.deepEqual(elicits.map(r => r.method), ['elicitation/create']);
    assert.equal(typeof elicits[0].t, 'number');
    // -32042 with its data, exactly as the server sent it.
    assert.equal(s[6].ok, false);
    assert.equal(s[6].error.code, -32042);
    assert.equal(s[6].error.data.elicitations[0].url, 'https://modelcontextprotocol.io');
    // Roots: the server asked again after list_changed and now sees the new ones.
    assert.match(text(s[7]), /file:\/\/\/one/);
    assert.equal(s[9].result.request.method, 'roots/list');
    assert.ok(s[10].result.attempts >= 1);
    assert.match(text(s[10].result.step), /file:\/\/\/two/);
    // Progress: the SDK's token is the request id; ours is kept; all before the response.
    const [p1, p2] = s[11].result.steps;
    assert.equal(p1.ok && p2.ok, true);
    const prog = tok => json.notifications.map((n, i) => ({ ...n, i })).filter(n => n.method === 'notifications/progress' && n.params.progressToken === tok);
    assert.deepEqual(prog(p1.requestId).map(n => n.params.progress), [1, 2, 3]);
    assert.deepEqual(prog('mine').map(n => n.params.progress), [1, 2]);
    assert.ok(prog(p1.requestId).every(n => n.i < p1.marks.response.notifications));
    assert.ok(prog('mine').every(n => n.i < p2.marks.response.notifications));
    // Filters.
    assert.equal(s[14].result.notification.params.uri, doc);
    assert.equal(s[15].ok, false);
    assert.equal(s[15].error.code, -32001);
    assert.match(s[16].result.notification.params.data, /Subscribe Resource request/);
    assert.equal(s[17].ok, false);
    assert.equal(s[17].error.code, -32001);
    assert.ok(s[17].error.data.last.ok);
    assert.deepEqual(s[18].result.steps.map(x => x.ok), [false, false]);
});

test('server-memory over stdio', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'manifold-mem-'));
    try {
        const { code, json } = await runClient(
            ['--transport', 'stdio', '--command', process.execPath, '--arg', MEMORY, '--env', `MEMORY_FILE_PATH=${path.join(dir, 'memory.jsonl')}`],
            [
                { op: 'listTools' },
                { op: 'callTool', name: 'create_entities', arguments: { entities: [{ name: 'manifold', entityType: 'project', observations: ['gateway'] }] } },
                { op: 'callTool', name: 'read_graph' },
                { op: 'listPrompts' }
            ]
        );
        assert.equal(code, 0);
        assert.equal(json.serverInfo.name, 'memory-server');
        assert.equal(json.steps[0].result.items.length, 9);
        assert.equal(json.steps[2].result.structuredContent.entities[0].name, 'manifold');
        assert.equal(json.steps[3].ok, false); // no prompts capability
        assert.equal(json.steps[3].error.code, -32601);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

test('server-everything over streamable HTTP', async () => {
    const srv = await startHttpServer('streamableHttp');
    try {
        const { code, json } = await runClient(['--transport', 'http', '--url', `http://127.0.0.1:${srv.port}/mcp`, '--header', 'X-Test: 1'], BASIC_STEPS);
        assert.equal(code, 0);
        assert.equal(typeof json.sessionId, 'string');
        checkBasic(json);
    } finally {
        await srv.stop();
    }
});

test('server-everything over SSE', async () => {
    const srv = await startHttpServer('sse');
    try {
        const { code, json } = await runClient(['--transport', 'sse', '--url', `http://127.0.0.1:${srv.port}/sse`], BASIC_STEPS);
        assert.equal(code, 0);
        checkBasic(json);
    } finally {
        await srv.stop();
    }
});

test('connect failure exits 2', async () => {
    const port = await freePort();
    const { code, json } = await runClient(['--transport', 'http', '--url', `http://127.0.0.1:${port}/mcp`, '--timeout-ms', '3000'], []);
    assert.equal(code, 2);
    assert.match(json.error, /connect failed/);
});
