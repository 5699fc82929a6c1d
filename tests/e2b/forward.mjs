// SPDX-License-Identifier: Apache-2.0
// A TCP to vsock forwarder for tests: each TCP connection accepted on
// 127.0.0.1:LISTEN_PORT is joined to a guest's vsock port through cubicle's
// Unix socket (Firecracker's hybrid vsock: write "CONNECT <port>\n", read
// "OK <hostport>\n", then raw bytes both ways).
//
// Usage: node forward.mjs LISTEN_PORT UDS_PATH [GUEST_PORT]
//   LISTEN_PORT 0 picks a free port; GUEST_PORT defaults to 49983. Prints
//   "forward: listening on 127.0.0.1:PORT" once it listens.
import net from 'node:net';

const [listenArg, uds, guestArg] = process.argv.slice(2);
if (listenArg === undefined || !uds) {
  console.error('usage: node forward.mjs LISTEN_PORT UDS_PATH [GUEST_PORT]');
  process.exit(2);
}
const guestPort = Number(guestArg ?? 49983);

const server = net.createServer((client) => {
  client.pause();
  const up = net.createConnection(uds);
  let head = Buffer.alloc(0);
  const fail = (why) => {
    console.error(`forward: ${why}`);
    client.destroy();
    up.destroy();
  };
  up.on('error', (e) => fail(`${uds}: ${e.message}`));
  client.on('error', () => up.destroy());
  up.on('connect', () => up.write(`CONNECT ${guestPort}\n`));
  const onHead = (d) => {
    head = Buffer.concat([head, d]);
    const nl = head.indexOf(10);
    if (nl < 0) {
      if (head.length > 256) fail('no line in the vsock answer');
      return;
    }
    const line = head.subarray(0, nl).toString();
    if (!line.startsWith('OK ')) return fail(`vsock said ${JSON.stringify(line)}`);
    up.off('data', onHead);
    const rest = head.subarray(nl + 1);
    if (rest.length) client.write(rest);
    up.pipe(client);
    client.pipe(up);
    client.resume();
  };
  up.on('data', onHead);
  up.on('close', () => client.destroy());
  client.on('close', () => up.destroy());
});
server.listen(Number(listenArg), '127.0.0.1', () => {
  console.log(`forward: listening on 127.0.0.1:${server.address().port}`);
});
