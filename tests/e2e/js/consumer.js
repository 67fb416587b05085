'use strict';
// ali-ons push Consumer (clustering) on args.topic with args.expression: one {"event": "msg"}
// line per delivered message. Stops once args.expect messages arrived and args.settle_s passed
// without another, on a "stop" line or EOF on stdin, or at args.deadline_s; close() persists
// the consumed offsets before {"event": "done"}.

const { Consumer } = require('ali-ons');
const { emit, logger, httpclient, start, hardLimit } = require('./common');

async function main() {
  let finish;
  const finished = new Promise(resolve => { finish = resolve; });
  const args = await start(reason => finish(reason));
  const deadlineS = args.deadline_s || 60;
  hardLimit(deadlineS + 20);
  const expect = args.expect === undefined ? null : args.expect;
  const settleMs = (args.settle_s === undefined ? 3 : args.settle_s) * 1000;
  let count = 0;
  let last = Date.now();

  const consumer = new Consumer({
    httpclient,
    logger,
    nameSrv: args.namesrv,
    consumerGroup: args.group,
  });
  consumer.on('error', err => emit('client_error', { error: `${err.name}: ${err.message}` }));
  consumer.subscribe(args.topic, args.expression || '*', async msg => {
    count += 1;
    last = Date.now();
    emit('msg', {
      topic: msg.topic,
      body: msg.body.toString('utf8'),
      tags: msg.tags || null,
      keys: msg.keys || null,
      properties: Object.fromEntries(
        (args.property_keys || []).filter(k => msg.properties[k]).map(k => [k, msg.properties[k]])),
      msg_id: msg.msgId,
      queue_id: Number(msg.queueId),
      queue_offset: Number(msg.queueOffset),
      reconsume_times: msg.reconsumeTimes,
    });
  });
  await consumer.ready();
  emit('started', { pid: process.pid });

  const timer = setInterval(() => {
    if (expect !== null && count >= expect && Date.now() - last >= settleMs) finish('expected');
  }, 100);
  const deadline = setTimeout(() => finish('deadline'), deadlineS * 1000);
  const reason = await finished;
  clearInterval(timer);
  clearTimeout(deadline);
  await consumer.close();
  emit('done', { reason, count });
  process.exit(0);
}

main().catch(err => {
  emit('done', { error: `${err.name}: ${err.message}` });
  process.exit(1);
});
