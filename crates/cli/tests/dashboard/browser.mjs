// Drives the dashboard in headless Chromium (the system's, through
// playwright-core: no browser download) for crates/cli/tests/dashboard.rs.
//
//   node browser.mjs <scenario> <url with token> <screenshot dir> [args…]
//
// Each scenario prints what it saw as `ok: …` lines and exits 0, or prints
// `FAIL: …` and exits 1. Steps that wait give up after a bounded time.
import { chromium } from "playwright-core";

const [scenario, url, shots, ...rest] = process.argv.slice(2);
const executablePath = process.env.ORCH_CHROMIUM || "/usr/bin/chromium-headless-shell";
const browser = await chromium.launch({
  executablePath,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
});
const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
page.setDefaultTimeout(20000);
const ok = (what) => console.log("ok: " + what);
const stamp = () => new Date().toISOString();

async function openSession(state) {
  await page.goto(url);
  const row = page.locator(`#sessions tbody tr[data-state="${state}"]`).first();
  await row.waitFor();
  ok(`the list shows a session in state ${state}: ${await row.getAttribute("data-key")} at ${stamp()}`);
  await row.click();
  await page.locator("#session-view").waitFor({ state: "visible" });
}

async function planex() {
  await openSession("waiting");
  await page.locator("#approve").waitFor({ state: "visible" });
  await page.screenshot({ path: `${shots}/planex-waiting.png`, fullPage: true });
  const reloads = [];
  page.on("framenavigated", (f) => { if (f === page.mainFrame()) reloads.push(f.url()); });
  // When each task first shows as done, to compare with the engine's
  // job_finished times in events.ndjson.
  await page.evaluate(() => {
    window.__doneAt = {};
    const seen = () => document.querySelectorAll('#items .item[data-status="done"]').forEach((r) => {
      window.__doneAt[r.dataset.item] ??= Date.now();
    });
    new MutationObserver(seen).observe(document.querySelector("#items"), { childList: true, subtree: true, attributes: true });
  });
  await page.locator("#approve").click();
  ok("clicked approve at " + stamp());
  const items = page.locator("#items .item");
  await page.waitForFunction(() => {
    const rows = [...document.querySelectorAll("#items .item")];
    return rows.length > 0 && rows.every((r) => r.dataset.status === "done");
  }, null, { timeout: 60000 });
  const n = await items.count();
  ok(`${n} tasks done on the page without a reload (navigations: ${reloads.length}) at ${stamp()}`);
  if (reloads.length) throw new Error("the page reloaded: " + reloads.join(", "));
  console.log("shown-done: " + JSON.stringify(await page.evaluate(() => window.__doneAt)));
  const buttons = page.locator("#items button.diff");
  const count = await buttons.count();
  if (count < n) throw new Error(`expected a commit per task, found ${count} diff buttons for ${n} tasks`);
  for (let i = 0; i < count; i++) {
    const sha = await buttons.nth(i).getAttribute("data-sha");
    await buttons.nth(i).click();
    await page.waitForFunction((s) => document.querySelector("#diff").dataset.sha === s &&
      document.querySelector("#diff pre").textContent.includes("diff --git"), sha);
    const text = await page.locator("#diff pre").textContent();
    ok(`diff of ${sha.slice(0, 7)} opened: ${text.split("\n").find((l) => l.startsWith("+++"))} ${JSON.stringify(text.split("\n").filter((l) => l.startsWith("+") && !l.startsWith("+++")))}`);
  }
  await page.locator("#items .item").first().click();
  await page.screenshot({ path: `${shots}/planex-done.png`, fullPage: true });
  // The README's picture: the top of the page, small.
  await page.setViewportSize({ width: 1000, height: 640 });
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: `${shots}/dashboard.png` });
}

async function reviewFix() {
  const [expected] = rest;
  await openSession("failed");
  const failed = page.locator('#items .item[data-status="failed"]').first();
  await failed.click();
  const output = page.locator("#item-detail pre.failure").first();
  await output.waitFor();
  const text = await page.locator("#item-detail").textContent();
  if (!text.includes(expected)) throw new Error(`the failure shown does not hold ${JSON.stringify(expected)}: ${text.slice(0, 400)}`);
  ok(`the failed finding shows its test output (${JSON.stringify(expected)} found)`);
  await page.screenshot({ path: `${shots}/review-fix-failed.png`, fullPage: true });
}

async function cancel() {
  await openSession("running");
  await page.locator("#cancel").waitFor({ state: "visible" });
  await page.screenshot({ path: `${shots}/review-fix-running.png`, fullPage: true });
  await page.locator("#cancel").click();
  ok("clicked cancel at " + stamp());
  await page.waitForFunction(() => {
    const badge = document.querySelector("#s-state .badge");
    return badge && !/running/.test(badge.textContent);
  }, null, { timeout: 60000 });
  ok("the page shows the run stopped: " + (await page.locator("#s-state").textContent()));
  const log = await page.locator("#notes").textContent();
  if (!/cancel from dashboard/.test(log)) throw new Error("the cancel is not in the session's log: " + log);
  ok("the session's log holds the cancel and where it came from");
  await page.screenshot({ path: `${shots}/review-fix-cancelled.png`, fullPage: true });
}

async function ciAutofix() {
  await openSession("waiting");
  const gate = page.locator("#gate");
  await gate.waitFor();
  await page.locator("#approve").waitFor({ state: "visible" });
  await page.locator("#decline").waitFor({ state: "visible" });
  const shown = await gate.textContent();
  for (const want of ["mechanical/trivial", "rustfmt", "+pub fn add(a: i32, b: i32) -> i32 {", "src/lib.rs"]) {
    if (!shown.includes(want)) throw new Error(`the gate does not show ${JSON.stringify(want)}: ${shown.slice(0, 600)}`);
  }
  ok("the gate shows the patch's diff, its classification and evidence");
  const waiting = await page.locator('#items .item[data-item="iter-1"]').getAttribute("data-status");
  if (waiting !== "waiting") throw new Error("iteration 1 is not shown waiting: " + waiting);
  await gate.scrollIntoViewIfNeeded();
  await page.screenshot({ path: `${shots}/ci-autofix-gate.png`, fullPage: true });
  // The guide's picture: the gate panel alone, small.
  await page.setViewportSize({ width: 1000, height: 900 });
  await gate.screenshot({ path: `${shots}/ci-autofix-gate-panel.png` });
  await page.setViewportSize({ width: 1280, height: 1000 });
  const reloads = [];
  page.on("framenavigated", (f) => { if (f === page.mainFrame()) reloads.push(f.url()); });
  await page.locator("#approve").click();
  ok("clicked approve at " + stamp());
  await page.waitForFunction(() => {
    const row = document.querySelector('#items .item[data-item="iter-1"]');
    const badge = document.querySelector("#s-state .badge");
    return row && row.dataset.status === "done" && !document.querySelector("#gate") &&
      badge && /done/.test(badge.textContent);
  }, null, { timeout: 60000 });
  if (reloads.length) throw new Error("the page reloaded: " + reloads.join(", "));
  const sha = await page.locator('#items .item[data-item="iter-1"] button.diff').first().getAttribute("data-sha");
  ok(`iteration 1 landed as ${sha} and the run is done, without a reload`);
  console.log("landed: " + sha);
  await page.locator('#items .item[data-item="iter-1"] button.diff').first().click();
  await page.waitForFunction(() => document.querySelector("#diff pre").textContent.includes("+pub fn add(a: i32, b: i32) -> i32 {"));
  const log = await page.locator("#notes").textContent();
  if (!/approve from dashboard/.test(log)) throw new Error("the approval is not in the session's log: " + log);
  ok("the session's log holds the approval and where it came from");
  await page.screenshot({ path: `${shots}/ci-autofix-landed.png`, fullPage: true });
}

try {
  if (scenario === "planex") await planex();
  else if (scenario === "ci-autofix") await ciAutofix();
  else if (scenario === "review-fix-failed") await reviewFix();
  else if (scenario === "cancel") await cancel();
  else throw new Error("unknown scenario " + scenario);
  await browser.close();
} catch (err) {
  console.log("FAIL: " + err.message);
  try { await page.screenshot({ path: `${shots}/${scenario}-failure.png`, fullPage: true }); } catch {}
  await browser.close();
  process.exit(1);
}
