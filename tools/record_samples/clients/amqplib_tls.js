// amqplib (Node.js) over amqps:// for tools/record_samples (scenario "tls_node_amqplib").
// Run by tls.py as: node amqplib_tls.js tls13|tls12, with AMQPCAP_HOST/PORT/USER/PASSWORD/VHOST/SNI/CA/
// KEYLOG in the environment and NODE_PATH pointing at the folder amqplib is installed in (never the
// repository). Every TLS socket's 'keylog' lines are appended to AMQPCAP_KEYLOG: tls.connect is
// wrapped so the listener is there before the handshake starts. Prints one JSON line with what the
// client did and saw.
'use strict';
const fs = require('fs');
const tls = require('tls');

const keylog = fs.openSync(process.env.AMQPCAP_KEYLOG, 'a');
const sockets = [];
const origConnect = tls.connect;
tls.connect = function (...args) {
  const s = origConnect.apply(this, args);
  s.on('keylog', (line) => fs.writeSync(keylog, line));
  sockets.push(s);
  return s;
};
const amqp = require('amqplib');

const IANA = {
  'TLS_AES_128_GCM_SHA256': 'TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384': 'TLS_AES_256_GCM_SHA384',
  'TLS_CHACHA20_POLY1305_SHA256': 'TLS_CHACHA20_POLY1305_SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256': 'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256',
  'ECDHE-RSA-AES256-GCM-SHA384': 'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384',
};

async function main() {
  const mode = process.argv[2];
  const env = process.env;
  const alpn = ['amqp'];
  const socketOptions = {
    ca: [fs.readFileSync(env.AMQPCAP_CA)], servername: env.AMQPCAP_SNI, ALPNProtocols: alpn,
  };
  if (mode === 'tls12') { socketOptions.maxVersion = 'TLSv1.2'; socketOptions.ciphers = 'ECDHE-RSA-AES256-GCM-SHA384'; }
  else { socketOptions.minVersion = 'TLSv1.3'; }
  const conn = await amqp.connect({
    protocol: 'amqps', hostname: env.AMQPCAP_HOST, port: Number(env.AMQPCAP_PORT), username: env.AMQPCAP_USER,
    password: env.AMQPCAP_PASSWORD, vhost: env.AMQPCAP_VHOST, heartbeat: 0,
  }, socketOptions);
  const sock = sockets[sockets.length - 1];
  const q = `node.tls.${mode}`;
  const seen = { confirms: 0, deliveries: 0, getOk: 0, getEmpty: 0, sizes: [] };

  const ch = await conn.createConfirmChannel();             // channel.open + confirm.select
  await ch.assertQueue(q, { durable: false });
  const publish = async (i) => {
    const body = Buffer.from(`node ${mode} message ${i}`);
    seen.sizes.push(body.length);
    ch.publish('', q, body, { messageId: `node-tls-${i}` });
    await ch.waitForConfirms();
    seen.confirms++;
  };
  for (let i = 0; i < 3; i++) await publish(i);
  let tag;
  await new Promise((resolve) => {
    ch.consume(q, (m) => {
      ch.ack(m);
      seen.deliveries++;
      if (seen.deliveries === 3) resolve();
    }, { noAck: false }).then((ok) => { tag = ok.consumerTag; });
  });
  while (!tag) await new Promise((r) => setTimeout(r, 10));
  await ch.cancel(tag);
  await publish(3);
  const got = await ch.get(q, { noAck: false });
  if (got) { seen.getOk++; ch.ack(got); }
  const none = await ch.get(q, { noAck: false });
  if (none === false) seen.getEmpty++;
  await ch.deleteQueue(q);
  await ch.close();
  const cipher = sock.getCipher();
  const peer = sock.getPeerCertificate(false);
  const out = {
    client_port: sock.localPort, version: sock.getProtocol(), cipher_openssl: cipher.name,
    cipher_suite: IANA[cipher.name] || cipher.standardName, alpn_offered: alpn, alpn: sock.alpnProtocol || null,
    resumed: sock.isSessionReused(), peer_cert_der: peer.raw.toString('base64'),
    tls_sockets: sockets.length, ...seen,
  };
  await conn.close();
  fs.closeSync(keylog);
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => { console.error(e); process.exit(1); });
