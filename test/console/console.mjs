// Drives the operator console in headless Chromium (the Debian package) against a running
// gateway, as test/e2e/console_test.go sets it up: signs in with the operator's key through
// the form, checks each page's DOM, makes a denied call as bob and waits for it in the audit
// view, and saves a screenshot of each page. Prints one JSON report on stdout; exits 1 with
// the reason on stderr when a check fails.
//
// Environment: GATEWAY_URL, OPERATOR_KEY, BOB_KEY, SCREENSHOT_DIR, CHROMIUM (the executable),
// and SECRETS, a JSON list of strings no page may contain.
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const base = env("GATEWAY_URL");
const operatorKey = env("OPERATOR_KEY");
const bobKey = env("BOB_KEY");
const shots = env("SCREENSHOT_DIR");
const secrets = JSON.parse(process.env.SECRETS || "[]");
const report = { checks: [] };

function check(cond, what) {
  if (!cond) throw new Error("check failed: " + what);
  report.checks.push(what);
}

// mcp sends one JSON-RPC message to /mcp as key's principal.
async function mcp(key, sid, msg) {
  const headers = { "Content-Type": "application/json", Accept: "application/json, text/event-stream", Authorization: "Bearer " + key };
  if (sid) Object.assign(headers, { "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25" });
  const res = await fetch(base + "/mcp", { method: "POST", headers, body: JSON.stringify(msg) });
  return { status: res.status, sid: res.headers.get("mcp-session-id"), text: await res.text() };
}

// session opens an MCP session as key's principal and returns a function calling a tool.
async function session(key, client) {
  const init = await mcp(key, null, { jsonrpc: "2.0", id: 1, method: "initialize",
    params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: client, version: "1.0" } } });
  if (init.status !== 200 || !init.sid) throw new Error(`initialize as ${client}: ${init.status} ${init.text}`);
  await mcp(key, init.sid, { jsonrpc: "2.0", method: "notifications/initialized" });
  let id = 1;
  return (name, args, meta) => mcp(key, init.sid, { jsonrpc: "2.0", id: ++id, method: "tools/call", params: { name, arguments: args, _meta: meta } });
}

async function noSecrets(page, where) {
  const html = await page.content();
  for (const s of secrets) check(!html.includes(s), `${where}: no secret in the page`);
}

// A fresh profile (--user-data-dir) for every run.
const profile = mkdtempSync(join(tmpdir(), "manifold-console-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: env("CHROMIUM"),
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  viewport: { width: 1360, height: 860 }, deviceScaleFactor: 1, colorScheme: "light",
});
try {
  // Some traffic first, so that the pages have something to show.
  const asBob = await session(bobKey, "claude-code");
  const asAlice = await session(operatorKey, "cursor");
  for (let i = 0; i < 5; i++) {
    await asBob("alpha__echo", { message: "hello " + i });
    await asAlice("alpha__add", { a: i, b: 2 });
  }
  await fetch(base + "/reload", { method: "POST", headers: { Authorization: "Bearer " + operatorKey } });

  const page = context.pages()[0] || await context.newPage();
  page.on("pageerror", (e) => { report.pageErrors = (report.pageErrors || []).concat(String(e)); });

  // Sign in.
  const first = await page.goto(base + "/ui/");
  check(first.status() === 401, "without a session /ui/ answers 401");
  check(await page.locator("form[action='/ui/signin'] input[type=password]").count() === 1, "the sign-in form is shown");
  await page.screenshot({ path: join(shots, "console-signin.png") });
  await page.fill("#token", operatorKey);
  await Promise.all([page.waitForURL(base + "/ui/"), page.click("button[type=submit]")]);
  const cookies = await context.cookies();
  const ck = cookies.find((c) => c.name === "manifold_console");
  check(ck && ck.httpOnly && ck.sameSite === "Strict" && ck.path === "/ui", "the session cookie is HttpOnly, SameSite=Strict, Path=/ui");
  check(!ck.value.includes(operatorKey), "the cookie does not hold the key");

  // Overview: the failing upstream is marked.
  await page.waitForSelector("body[data-loaded=overview]");
  await page.waitForSelector("#upstreams tr[data-upstream=broken][data-state=failed]", { timeout: 20000 });
  check(await page.locator("#upstreams tr[data-upstream=broken] .badge.bad").innerText() === "failed", "the failing upstream is marked failed");
  check(await page.locator("#upstreams tr[data-upstream=alpha][data-state=ready]").count() === 1, "the working upstream is ready");
  await page.waitForSelector("#upstreams tr[data-upstream=alpha] td[title$='audited calls']");
  check((await page.locator("#operator").innerText()).includes("alice"), "the operator is named");
  await noSecrets(page, "overview");
  await page.screenshot({ path: join(shots, "console-overview.png"), fullPage: true });

  // Catalog: bob's view lacks the denied tool, and says which rule hid it.
  await page.click("nav a[data-section=catalog]");
  await page.waitForSelector("body[data-loaded=catalog]");
  await page.selectOption("#principal", "bob");
  await page.waitForSelector("#hidden caption:has-text('Hidden from bob')");
  await page.waitForSelector("#hidden tr[data-name=alpha__fail]");
  check(await page.locator("#visible tr[data-name=alpha__fail]").count() === 0, "bob's visible tools lack alpha__fail");
  check(await page.locator("#visible tr[data-name=alpha__echo]").count() === 1, "bob sees alpha__echo");
  const rule = await page.locator("#hidden tr[data-name=alpha__fail] td.rule").innerText();
  check(rule.includes('"no-fail"') && rule.includes("deny"), "alpha__fail is hidden by the no-fail rule: " + rule);
  await noSecrets(page, "catalog");
  await page.screenshot({ path: join(shots, "console-catalog.png"), fullPage: true });

  // Audit: a denied call appears within 2 s, without reloading the page.
  await page.click("nav a[data-section=audit]");
  await page.waitForSelector("body[data-loaded=audit]");
  await page.waitForSelector("#records tr[data-name=alpha__echo]");
  // The call carries a trace context, so its record links to the trace.
  const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
  const denied = await asBob("alpha__fail", { why: "test" }, { traceparent: `00-${traceId}-00f067aa0ba902b7-01` });
  const t0 = Date.now();
  check(denied.text.includes("error"), "bob's call of alpha__fail is refused");
  await page.waitForSelector("#records tr[data-name=alpha__fail][data-decision=deny][data-principal=bob]", { timeout: 2000 });
  report.deniedShownAfterMs = Date.now() - t0;
  check(report.deniedShownAfterMs <= 2000, `the denied call is shown within 2 s (${report.deniedShownAfterMs} ms)`);
  check(await page.locator(`#records tr[data-name=alpha__fail] a[data-trace='${traceId}']`).count() === 1, "the denied call links to its trace");
  // Filters: denied calls only.
  await page.selectOption("#f-outcome", "deny");
  // (waitForFunction would evaluate a string, which the console's CSP forbids.)
  await page.waitForSelector("#records tr[data-decision=allow]", { state: "detached" });
  check(await page.locator("#records tr[data-name=alpha__echo]").count() === 0, "the outcome filter leaves denied calls only");
  await page.selectOption("#f-outcome", "");
  await page.waitForSelector("#records tr[data-name=alpha__echo]");
  await noSecrets(page, "audit");
  await page.screenshot({ path: join(shots, "console-audit.png"), fullPage: true });

  // Sign out, then in again at the OIDC issuer: another site, whose redirect back lands on
  // a page of the console's that moves on with the new SameSite=Strict cookie.
  await Promise.all([page.waitForURL(base + "/ui/"), page.click("#signout button")]);
  check(await page.locator("form[action='/ui/oidc/start'] button").count() === 1, "the sign-in page offers the OIDC issuer");
  await page.click("form[action='/ui/oidc/start'] button");
  await page.waitForSelector("body[data-loaded=overview]");
  check((await page.locator("#operator").innerText()).includes("carol"), "carol is signed in by the OIDC issuer");
  const oidcCookie = (await context.cookies()).find((c) => c.name === "manifold_console");
  check(oidcCookie && oidcCookie.httpOnly && oidcCookie.sameSite === "Strict", "the OIDC sign-in's cookie is HttpOnly, SameSite=Strict");

  check(!report.pageErrors, "no script error: " + JSON.stringify(report.pageErrors));
  report.ok = true;
  console.log(JSON.stringify(report));
} catch (e) {
  console.error(e.stack || String(e));
  for (const p of context.pages()) console.error("page at " + p.url() + ":\n" + (await p.content().catch(() => "")).slice(0, 2000));
  console.log(JSON.stringify(report));
  process.exitCode = 1;
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
