// SPDX-License-Identifier: Apache-2.0
// For run_sdk.sh on the host: stands in for cubicle's vsock Unix socket, so
// forward.mjs is exercised without a VM. Answers "CONNECT <port>\n" with
// "OK 1024\n" and joins the connection to the agent's Unix socket.
// Usage: node vsock-stub.mjs STUB_SOCKET AGENT_SOCKET
import fs from 'node:fs';
import net from 'node:net';

const [stubPath, agentPath] = process.argv.slice(2);
try { fs.unlinkSync(stubPath); } catch { /* not there */ }
net.createServer((c) => {
  let head = Buffer.alloc(0);
  const onData = (d) => {
    head = Buffer.concat([head, d]);
    const nl = head.indexOf(10);
    if (nl < 0) return;
    c.off('data', onData);
    c.pause();
    if (!/^CONNECT \d+$/.test(head.subarray(0, nl).toString())) return c.destroy();
    const a = net.createConnection(agentPath, () => {
      c.write('OK 1024\n');
      const rest = head.subarray(nl + 1);
      if (rest.length) a.write(rest);
      a.pipe(c);
      c.pipe(a);
      c.resume();
    });
    a.on('error', () => c.destroy());
    c.on('error', () => a.destroy());
    a.on('close', () => c.destroy());
    c.on('close', () => a.destroy());
  };
  c.on('data', onData);
}).listen(stubPath, () => console.log('vsock-stub: listening'));
