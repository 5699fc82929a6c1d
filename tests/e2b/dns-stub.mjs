// SPDX-License-Identifier: Apache-2.0
// A name server for the serve network test (run_serve_net.sh): answers A
// questions for the names it is given, NXDOMAIN for the rest, on UDP and on
// TCP (RFC 7766: each message after its 2-byte length, many a connection).
// NAME=A.B.C.D+N gives NAME N more addresses (198.51.100.1 on): an answer
// over 512 bytes, which UDP gets truncated (TC set, no records), as a
// resolver that then asks over TCP expects.
// Usage: node dns-stub.mjs ADDR:PORT NAME=A.B.C.D[+N]...
import dgram from 'node:dgram';
import net from 'node:net';

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

// the answer to query @m, or null; @udp: at most 512 bytes
function reply(m, udp, how) {
  if (m.length < 12 || m.readUInt16BE(4) !== 1) return null;
  const q = question(m);
  if (!q) return null;
  const [addr, more] = (names[q.name] || '').split('+');
  const addrs = q.type === 1 && addr ? [addr] : [];
  for (let k = 1; addrs.length && k <= Number(more || 0); k++) addrs.push(`198.51.100.${k}`);
  const head = Buffer.from(m.subarray(0, q.end));
  head.writeUInt16BE(0x8180 | (names[q.name] ? 0 : 3), 2); // a reply; NXDOMAIN for unknown names
  head.writeUInt16BE(addrs.length, 6);
  head.writeUInt16BE(0, 8);
  head.writeUInt16BE(0, 10);
  const parts = [head];
  for (const a of addrs) {
    const rr = Buffer.alloc(16);
    rr.writeUInt16BE(0xc00c, 0); // the question's name
    rr.writeUInt16BE(1, 2);
    rr.writeUInt16BE(1, 4);
    rr.writeUInt32BE(30, 6);
    rr.writeUInt16BE(4, 10);
    a.split('.').forEach((b, k) => rr.writeUInt8(Number(b), 12 + k));
    parts.push(rr);
  }
  let out = Buffer.concat(parts);
  let tc = '';
  if (udp && out.length > 512) {
    out = head;
    out.writeUInt16BE(0x8380, 2); // TC: ask again over TCP
    out.writeUInt16BE(0, 6);
    tc = ' (truncated)';
  }
  console.log(`dns-stub: ${how} ${q.name} type ${q.type} -> ${addrs.length ? addrs.length + ' addresses, ' + out.length + ' bytes' + tc : 'none'}`);
  return out;
}

const sock = dgram.createSocket('udp4');
sock.on('message', (m, from) => {
  const r = reply(m, true, 'udp');
  if (r) sock.send(r, from.port, from.address);
});
sock.bind(Number(port), host, () => console.log(`dns-stub: listening on ${where} (udp)`));

net.createServer((c) => {
  let got = Buffer.alloc(0);
  c.on('error', () => {});
  c.on('data', (d) => {
    got = Buffer.concat([got, d]);
    while (got.length >= 2 && got.length >= 2 + got.readUInt16BE(0)) {
      const r = reply(got.subarray(2, 2 + got.readUInt16BE(0)), false, 'tcp');
      got = got.subarray(2 + got.readUInt16BE(0));
      if (!r) return c.destroy();
      const len = Buffer.alloc(2);
      len.writeUInt16BE(r.length);
      c.write(Buffer.concat([len, r]));
    }
  });
}).listen(Number(port), host, () => console.log(`dns-stub: listening on ${where} (tcp)`));
