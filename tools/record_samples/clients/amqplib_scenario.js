// amqplib (Node.js) scenario for tools/record_samples (scenario "amqplib_node").
// Run by scenarios.py as: node amqplib_scenario.js, with AMQPCAP_HOST/USER/PASSWORD/VHOST in the
// environment and NODE_PATH pointing at the folder amqplib is installed in (never the repository).
// Prints one JSON line with what the client saw; scenarios.py turns that into the expected facts.
'use strict';
const amqp = require('amqplib');

const X = 'amqpcap.node.x';
const Q = 'amqpcap.node.q';

async function main() {
  const env = process.env;
  const conn = await amqp.connect({
    protocol: 'amqp', hostname: env.AMQPCAP_HOST, port: 5672, username: env.AMQPCAP_USER,
    password: env.AMQPCAP_PASSWORD, vhost: env.AMQPCAP_VHOST,
  });
  const seen = { returns: [], confirmAcks: [], deliveries: [], getOk: 0, getEmpty: 0 };

  const pub = await conn.createConfirmChannel();            // channel 1: channel.open + confirm.select
  pub.on('return', (m) => seen.returns.push({ replyCode: m.fields.replyCode, messageId: m.properties.messageId }));
  pub.on('ack', (f) => seen.confirmAcks.push({ tag: f.deliveryTag, multiple: f.multiple }));
  await pub.assertExchange(X, 'direct', { durable: false, autoDelete: false });

  const cons = await conn.createChannel();                  // channel 2
  await cons.assertQueue(Q, { exclusive: true, durable: false });
  await cons.bindQueue(Q, X, 'k');
  await cons.prefetch(3);

  // 6 routed mandatory publishes, then 1 unroutable mandatory publish; each awaited with
  // waitForConfirms, so the broker has one unconfirmed message at a time (one basic.ack each).
  const publish = async (i, key) => {
    pub.publish(X, key, Buffer.from(JSON.stringify({ n: i, client: 'amqplib' })), {
      mandatory: true, messageId: `node-${i}`, contentType: 'application/json',
      headers: { 'x-client': 'amqplib', 'x-seq': i }, timestamp: 1700000000 + i,
    });
    await pub.waitForConfirms();
  };
  for (let i = 0; i < 6; i++) await publish(i, 'k');
  await publish(6, 'no-such-key');

  // Consumer: the action depends only on the message id (and the redelivered flag), not on order.
  let held = null;
  const done = new Promise((resolve) => {
    cons.consume(Q, (m) => {
      const id = m.properties.messageId;
      const d = { id, tag: m.fields.deliveryTag, redelivered: m.fields.redelivered };
      seen.deliveries.push(d);
      if (id === 'node-1' && !m.fields.redelivered) { cons.nack(m, false, true); d.action = 'nack-requeue'; }
      else if (id === 'node-2') { cons.reject(m, false); d.action = 'reject'; }
      else if (id === 'node-3') { held = m; d.action = 'hold'; }
      else if (id === 'node-4') { cons.ack(m, true); d.action = 'ack-multiple'; }   // settles node-3 too
      else if (id === 'node-5') { cons.nack(m, false, false); d.action = 'nack'; }
      else { cons.ack(m); d.action = 'ack'; }                                        // node-0, redelivered node-1
      if (seen.deliveries.length === 7) resolve();
    }, { noAck: false }).then((ok) => { seen.consumerTag = ok.consumerTag; });
  });
  await done;
  await cons.cancel(seen.consumerTag);

  // basic.get after the consumer is gone: one get-ok (acked), then get-empty.
  await publish(7, 'k');
  const got = await cons.get(Q, { noAck: false });
  if (got) { seen.getOk++; cons.ack(got); }
  const none = await cons.get(Q, { noAck: false });
  if (none === false) seen.getEmpty++;

  await cons.close();                                        // channel.close 200
  await pub.deleteExchange(X);
  await pub.close();                                         // channel.close 200
  await conn.close();                                        // connection.close 200
  seen.heldId = held && held.properties.messageId;
  process.stdout.write(JSON.stringify(seen) + '\n');
}

main().catch((e) => { console.error(e); process.exit(1); });
