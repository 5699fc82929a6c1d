// SPDX-License-Identifier: Apache-2.0
// The real E2B JavaScript SDK (npm e2b, pinned in package.json) against a
// cubicle-agent: commands.run (stdout, exit codes), files.write/read/list,
// files.watchDir (and allowNetworkMounts, on $SDK_FUSE_DIR when set), and a
// background command killed by commands.kill.
//
// Usage: node sdk-test.mjs SANDBOX_URL [ACCESS_TOKEN]
//   SANDBOX_URL   where the agent answers, e.g. http://127.0.0.1:49983 (also
//                 $E2B_SANDBOX_URL); ACCESS_TOKEN the agent's --token (also
//                 $CUBICLE_AGENT_TOKEN; none: no token).
//   $SDK_TEST_DIR the guest folder the file checks use (default /tmp/cubicle-sdk-<pid>).
// The SDK's control-plane calls (Sandbox.create, connect, kill) go to a tiny
// stub REST API served by this script on 127.0.0.1; only the in-sandbox
// calls reach SANDBOX_URL. Prints "ok - ..." lines, then "N passed, M failed".
import http from 'node:http';
import { Sandbox, CommandExitError } from 'e2b';

const sandboxUrl = process.argv[2] || process.env.E2B_SANDBOX_URL;
const token = process.argv[3] ?? process.env.CUBICLE_AGENT_TOKEN ?? '';
if (!sandboxUrl) {
  console.error('usage: node sdk-test.mjs SANDBOX_URL [ACCESS_TOKEN]');
  process.exit(2);
}
const dir = process.env.SDK_TEST_DIR || `/tmp/cubicle-sdk-${process.pid}`;

// ---- the stub REST API: just enough for Sandbox.create/connect/kill ----
const sandboxID = 'cubicle0';
const info = () => ({
  sandboxID, templateID: 'base', clientID: 'cubicle', alias: 'cubicle',
  envdVersion: '0.6.4', ...(token ? { envdAccessToken: token } : {}),
});
const api = http.createServer((req, res) => {
  let body = '';
  req.on('data', (d) => { body += d; });
  req.on('end', () => {
    const send = (status, obj) => {
      res.writeHead(status, obj ? { 'Content-Type': 'application/json' } : {});
      res.end(obj ? JSON.stringify(obj) : undefined);
    };
    const path = req.url.split('?')[0];
    if (req.method === 'POST' && /^(\/v2)?\/sandboxes$/.test(path)) return send(201, info());
    if (req.method === 'POST' && /^(\/v2)?\/sandboxes\/[^/]+\/connect$/.test(path)) return send(200, info());
    if (req.method === 'DELETE' && /^\/sandboxes\/[^/]+$/.test(path)) return send(204);
    if (req.method === 'GET' && /^\/sandboxes\/[^/]+$/.test(path)) {
      return send(200, { ...info(), state: 'running', cpuCount: 1, memoryMB: 256, diskSizeMB: 0,
        startedAt: new Date().toISOString(), endAt: new Date(Date.now() + 3600e3).toISOString(), metadata: {} });
    }
    return send(404, { code: 404, message: `stub API: no ${req.method} ${path}` });
  });
});
await new Promise((resolve) => api.listen(0, '127.0.0.1', resolve));
const apiUrl = `http://127.0.0.1:${api.address().port}`;

let pass = 0;
let fail = 0;
const ok = (name) => { console.log(`ok - ${name}`); pass++; };
const notok = (name, why) => { console.log(`not ok - ${name}: ${why}`); fail++; };
async function check(name, fn) {
  try {
    const why = await fn();
    if (why === true || why === undefined) ok(name); else notok(name, why);
  } catch (e) {
    notok(name, `${e?.name}: ${e?.message}`);
  }
}
const withTimeout = (p, ms, what) => Promise.race([p,
  new Promise((_, rej) => setTimeout(() => rej(new Error(`${what}: no answer in ${ms} ms`)), ms))]);

const opts = { apiKey: 'e2b_0000000000000000000000000000000000000000', apiUrl, sandboxUrl, requestTimeoutMs: 30000 };
let sbx;
await check('Sandbox.create through the stub API', async () => {
  sbx = await Sandbox.create('base', opts);
  return sbx.sandboxId === sandboxID || `sandboxId ${sbx.sandboxId}`;
});
if (!sbx) {
  console.log(`${pass} passed, ${fail + 1} failed`);
  process.exit(1);
}

await check('commands.run: stdout 42, exit code 0', async () => {
  const r = await sbx.commands.run('echo $((6*7))');
  return (r.stdout.trim() === '42' && r.exitCode === 0) || `stdout ${JSON.stringify(r.stdout)} exit ${r.exitCode}`;
});
await check('commands.run: exit 3 and stderr', async () => {
  try {
    await sbx.commands.run('echo err >&2; exit 3');
    return 'no CommandExitError';
  } catch (e) {
    if (!(e instanceof CommandExitError)) throw e;
    return (e.exitCode === 3 && e.stderr.trim() === 'err') || `exit ${e.exitCode} stderr ${JSON.stringify(e.stderr)}`;
  }
});
await check('commands.run: output as it comes (onStdout)', async () => {
  const seen = [];
  await sbx.commands.run('for i in 1 2 3; do echo line$i; sleep 0.1; done', { onStdout: (d) => seen.push(d) });
  const all = seen.join('');
  return (all.includes('line1') && all.includes('line3') && seen.length >= 2) || `chunks ${JSON.stringify(seen)}`;
});
await check('commands.run with envs and cwd', async () => {
  const r = await sbx.commands.run('echo "$GREETING" && pwd', { envs: { GREETING: 'hi there' }, cwd: '/' });
  return r.stdout === 'hi there\n/\n' || JSON.stringify(r.stdout);
});

const text = `hello from the E2B SDK ${Date.now()}\n`;
await check('files.write then files.read (text)', async () => {
  await sbx.files.write(`${dir}/hello.txt`, text);
  const back = await sbx.files.read(`${dir}/hello.txt`);
  return back === text || JSON.stringify(back);
});
await check('files.write then files.read (1 MiB of bytes)', async () => {
  const data = new Uint8Array(1 << 20);
  for (let i = 0; i < data.length; i++) data[i] = (i * 7 + (i >> 11)) & 0xff;
  await sbx.files.write(`${dir}/sub/blob.bin`, data.buffer);
  const back = new Uint8Array(await sbx.files.read(`${dir}/sub/blob.bin`, { format: 'bytes' }));
  if (back.length !== data.length) return `length ${back.length}`;
  for (let i = 0; i < data.length; i++) if (back[i] !== data[i]) return `byte ${i} differs`;
  return true;
});
await check('files.list', async () => {
  const entries = await sbx.files.list(dir);
  const names = entries.map((e) => `${e.name}:${e.type}`).sort();
  return JSON.stringify(names) === JSON.stringify(['hello.txt:file', 'sub:dir']) || JSON.stringify(names);
});
await check('files.exists and files.remove', async () => {
  if (!(await sbx.files.exists(`${dir}/hello.txt`))) return 'hello.txt missing';
  await sbx.files.remove(dir);
  return !(await sbx.files.exists(`${dir}/hello.txt`)) || 'still there after remove';
});

// Until cond() holds, or ms pass: whether it held.
async function waitFor(cond, ms) {
  for (const end = Date.now() + ms; Date.now() < end;) {
    if (cond()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return cond();
}
await check('files.watchDir (recursive, includeEntry): create, write, rename, remove; a new folder followed', async () => {
  const wdir = `${dir}-watch`;
  const seen = [];
  await sbx.files.makeDir(wdir);
  const entries = {};
  const h = await sbx.files.watchDir(wdir, (e) => {
    seen.push(`${e.type}:${e.name}`);
    if (e.entry) entries[`${e.type}:${e.name}`] = `${e.entry.name}:${e.entry.type}:${e.entry.size}`;
  }, { recursive: true, includeEntry: true });
  try {
    await sbx.files.write(`${wdir}/a.txt`, 'one');
    await sbx.files.makeDir(`${wdir}/sub`);
    if (!(await waitFor(() => seen.includes('create:sub'), 15000))) return `no create:sub in ${JSON.stringify(seen)}`;
    await sbx.files.write(`${wdir}/sub/b.txt`, 'two');
    await sbx.files.rename(`${wdir}/a.txt`, `${wdir}/c.txt`);
    await sbx.files.remove(`${wdir}/sub/b.txt`);
    const want = ['create:a.txt', 'write:a.txt', 'create:sub', 'create:sub/b.txt', 'write:sub/b.txt',
      'rename:a.txt', 'create:c.txt', 'remove:sub/b.txt'];
    await waitFor(() => want.every((w) => seen.includes(w)), 15000);
    const missing = want.filter((w) => !seen.includes(w));
    if (missing.length) return `missing ${missing.join(' ')} in ${JSON.stringify(seen)}`;
    // the entry as it was when the event came (includeEntry); none once removed
    return entries['create:sub']?.startsWith('sub:dir:') &&
      entries['create:c.txt'] === 'c.txt:file:3' && !entries['remove:sub/b.txt'] ||
      `entries ${JSON.stringify(entries)}`;
  } finally {
    await h.stop();
    await sbx.files.remove(wdir);
  }
});

// $SDK_FUSE_DIR: a folder on FUSE (run_sdk.sh mounts one with bindfs)
const fuseDir = process.env.SDK_FUSE_DIR;
await check(`files.watchDir, allowNetworkMounts (envd 0.6.4)${fuseDir ? ': a FUSE folder refused without it, watched with it' : ''}`, async () => {
  const wdir = fuseDir || `${dir}-watch2`;
  const seen = [];
  if (!fuseDir) await sbx.files.makeDir(wdir);
  if (fuseDir) {
    try {
      const h0 = await sbx.files.watchDir(wdir, () => {});
      await h0.stop();
      return 'watched without allowNetworkMounts';
    } catch (e) {
      if (!/network file system \(fuse\)/.test(e.message)) return `refused with: ${e.name}: ${e.message}`;
    }
  }
  const h = await sbx.files.watchDir(wdir, (e) => seen.push(`${e.type}:${e.name}`), { allowNetworkMounts: true });
  try {
    await sbx.files.write(`${wdir}/n.txt`, 'n');
    return (await waitFor(() => seen.includes('create:n.txt'), 15000)) || `seen ${JSON.stringify(seen)}`;
  } finally {
    await h.stop();
    await sbx.files.remove(fuseDir ? `${wdir}/n.txt` : wdir);
  }
});

await check('a background command killed by commands.kill', async () => {
  const h = await sbx.commands.run('sleep 1000', { background: true });
  const listed = (await sbx.commands.list()).some((p) => p.pid === h.pid);
  if (!listed) return `pid ${h.pid} not in commands.list`;
  const killed = await sbx.commands.kill(h.pid);
  if (killed !== true) return `kill answered ${killed}`;
  try {
    const r = await withTimeout(h.wait(), 10000, 'wait after kill');
    return `exited normally: ${JSON.stringify(r)}`;
  } catch (e) {
    if (!(e instanceof CommandExitError)) throw e;
    return /killed/.test(e.error ?? '') || /killed/.test(e.message) || `${e.exitCode} ${e.message}`;
  }
});

await check('Sandbox.kill through the stub API', async () => {
  await sbx.kill();
});
api.close();
console.log(`${pass} passed, ${fail} failed`);
process.exit(fail ? 1 : 0);
