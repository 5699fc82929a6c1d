// SPDX-License-Identifier: Apache-2.0
// A name server for the serve network test (run_serve_net.sh): answers A
// questions for the names it is given, NXDOMAIN for the rest, on UDP.
// Usage: node dns-stub.mjs ADDR:PORT NAME=A.B.C.D...
import dgram from 'node:dgram';

const [where, ...pairs] = process.argv.slice(2);
const [host, port] = where.split(':');
const names = Object.fromEntries(pairs.map((p) => p.split('=')).map(([n, a]) => [n.toLowerCase(), a]));

// the question's name and where the question ends, or null
function question(m) {
  const labels = [];
  let i = 12;
  while (i < m.length && m[i] !== 0) {
    if (m[i] & 0xc0) return null;
    labels.push(m.subarray(i + 1, i + 1 + m[i]).toString('latin1'));
    i += 1 + m[i];
  }
  return i + 5 <= m.length ? { name: labels.join('.').toLowerCase(), end: i + 5, type: m.readUInt16BE(i + 1) } : null;
}

const sock = dgram.createSocket('udp4');
sock.on('message', (m, from) => {
  if (m.length < 12 || m.readUInt16BE(4) !== 1) return;
  const q = question(m);
  if (!q) return;
  const addr = q.type === 1 ? names[q.name] : undefined;
  const head = Buffer.from(m.subarray(0, q.end));
  head.writeUInt16BE(0x8180 | (names[q.name] ? 0 : 3), 2); // a reply; NXDOMAIN for unknown names
  head.writeUInt16BE(addr ? 1 : 0, 6);
  head.writeUInt16BE(0, 8);
  head.writeUInt16BE(0, 10);
  const parts = [head];
  if (addr) {
    const rr = Buffer.alloc(16);
    rr.writeUInt16BE(0xc00c, 0); // the question's name
    rr.writeUInt16BE(1, 2);
    rr.writeUInt16BE(1, 4);
    rr.writeUInt32BE(30, 6);
    rr.writeUInt16BE(4, 10);
    addr.split('.').forEach((b, k) => rr.writeUInt8(Number(b), 12 + k));
    parts.push(rr);
  }
  console.log(`dns-stub: ${q.name} type ${q.type} -> ${addr || 'none'}`);
  sock.send(Buffer.concat(parts), from.port, from.address);
});
sock.bind(Number(port), host, () => console.log(`dns-stub: listening on ${where}`));
