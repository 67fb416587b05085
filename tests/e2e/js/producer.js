'use strict';
// ali-ons Producer: sends args.messages ({body, tags, keys: [..], properties: {..}}) to
// args.topic, one {"event": "sent"} line per message, then {"event": "done"}.

const { Producer, Message } = require('ali-ons');
const { emit, logger, httpclient, start, hardLimit } = require('./common');

async function main() {
  const args = await start(null);
  hardLimit((args.deadline_s || 60) + 15);
  const producer = new Producer({
    httpclient,
    logger,
    nameSrv: args.namesrv,
    producerGroup: args.group,
  });
  await producer.ready();
  let ok = 0;
  let errors = 0;
  for (const [index, spec] of args.messages.entries()) {
    const msg = new Message(args.topic, spec.tags || null, spec.body);
    if (spec.keys) msg.keys = spec.keys;
    for (const [key, value] of Object.entries(spec.properties || {})) {
      msg.properties[key] = value;
    }
    try {
      const result = await producer.send(msg);
      emit('sent', {
        index,
        status: result.sendStatus,
        msg_id: result.msgId,
        queue_id: Number(result.messageQueue.queueId),
        offset: Number(result.queueOffset),
      });
      if (result.sendStatus === 'SEND_OK') ok += 1;
    } catch (err) {
      errors += 1;
      emit('sent', { index, error: `${err.name}: ${err.message}` });
    }
  }
  await producer.close();
  emit('done', { ok, errors });
  process.exit(0);
}

main().catch(err => {
  emit('done', { error: `${err.name}: ${err.message}` });
  process.exit(1);
});
