// SPDX-License-Identifier: Apache-2.0
// bench/serve.sh's client: through the real E2B SDK against `cubicle serve`,
// the time from Sandbox.create to its first command finished, at concurrency
// 1 and 10; then IDLE sandboxes left idle for the caller to weigh.
// Usage: node serve-bench.mjs URL API_KEY RUNS IDLE
// Prints "create-first-command c=N p50=MS p95=MS n=K" lines, then
// "idle-ready N" once IDLE sandboxes run idle, and waits for stdin to end.
const [url, apiKey, runsArg = '10', idleArg = '50'] = process.argv.slice(2);
const { Sandbox } = await import('e2b');
const opts = { apiKey, apiUrl: url, sandboxUrl: url, requestTimeoutMs: 300000 };
const runs = Number(runsArg);
const idle = Number(idleArg);

async function createRun() {
  const t0 = performance.now();
  const s = await Sandbox.create('base', { ...opts, timeoutMs: 600000 });
  const r = await s.commands.run('echo ready');
  const ms = performance.now() - t0;
  if (r.stdout !== 'ready\n') throw new Error(`stdout ${JSON.stringify(r.stdout)}`);
  await s.kill();
  return ms;
}
const pct = (a, p) => a[Math.min(a.length - 1, Math.ceil((p / 100) * a.length) - 1)];
function report(c, times) {
  times.sort((x, y) => x - y);
  console.log(`create-first-command c=${c} p50=${pct(times, 50).toFixed(0)} p95=${pct(times, 95).toFixed(0)} n=${times.length}`);
}
// one warm-up: the template's pages into the page cache
await createRun();
const one = [];
for (let i = 0; i < runs; i++) one.push(await createRun());
report(1, one);
const ten = [];
for (let round = 0; round < Math.max(1, Math.round(runs / 5)); round++) {
  ten.push(...(await Promise.all(Array.from({ length: 10 }, createRun))));
}
report(10, ten);
const boxes = [];
for (let i = 0; i < idle; i += 10) {
  boxes.push(...(await Promise.all(Array.from({ length: Math.min(10, idle - i) }, async () => {
    const s = await Sandbox.create('base', { ...opts, timeoutMs: 600000 });
    await s.commands.run('true');
    return s;
  }))));
}
console.log(`idle-ready ${boxes.length}`);
process.stdin.resume();
await new Promise((r) => process.stdin.on('end', r));
await Promise.all(boxes.map((b) => b.kill()));
process.exit(0);
