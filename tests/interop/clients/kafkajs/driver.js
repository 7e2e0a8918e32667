// An interop driver for KafkaJS against shoal (tests/interop/test_go_js_clients.py).
//
// Usage: node driver.js <brokers> <topic> <txtopic> <group> <n>
// (kafkajs is resolved through NODE_PATH: the test installs package.json's pinned version in a cache.)
//
// It creates <topic> (3 partitions) and <txtopic> (1 partition) with the admin client and reads their
// metadata back; sends <n> keyed records with an idempotent producer (acks=all, one send at a time,
// each send's partition and base offset); consumes them in a consumer group from the beginning,
// committing each record's offset explicitly; fetches the group's committed offsets with the admin;
// then runs three transactions on <txtopic> (commit, abort, commit), the first two also committing
// offsets of a group through the transaction (sendOffsets), and reads <txtopic> with a read_committed
// consumer group. Progress goes to stderr; one JSON summary line goes to stdout at the end.
'use strict';

const { Kafka, logLevel } = require('kafkajs');

const [brokers, topic, txTopic, group, nArg] = process.argv.slice(2);
const n = Number(nArg || 60);

const kafka = new Kafka({
  clientId: 'shoal-kafkajs-driver',
  brokers: brokers.split(','),
  logLevel: logLevel.WARN,
  logCreator: () => ({ namespace, level, log }) => {
    process.stderr.write(`[kafkajs ${namespace} ${level}] ${log.message} ${log.error || ''}\n`);
  },
  retry: { retries: 8, initialRetryTime: 100 },
});

/** Consume `want` records of `topicName` in group `groupId`, committing each; the records. */
async function consume(groupId, topicName, want, readUncommitted) {
  const consumer = kafka.consumer({
    groupId, sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 200, readUncommitted,
  });
  const got = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topicName], fromBeginning: true });
    let finish;
    const done = new Promise((resolve) => { finish = resolve; });
    const timer = setTimeout(() => finish(), 40000);
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        got.push({ p: partition, o: Number(message.offset), v: message.value.toString() });
        const next = (BigInt(message.offset) + 1n).toString();
        await consumer.commitOffsets([{ topic: topicName, partition, offset: next }]);
        if (got.length >= want) finish();
      },
    });
    await done;
    clearTimeout(timer);
  } finally {
    await consumer.disconnect();
  }
  if (got.length < want) throw new Error(`consumed ${got.length} of ${want} records of ${topicName}`);
  return got;
}

/** A group's committed offsets of a topic, partition -> offset. */
async function committedOffsets(admin, groupId, topicName) {
  const [entry] = await admin.fetchOffsets({ groupId, topics: [topicName] });
  const out = {};
  for (const p of entry.partitions) out[String(p.partition)] = Number(p.offset);
  return out;
}

async function run(out) {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({
      waitForLeaders: true,
      topics: [
        { topic, numPartitions: 3, replicationFactor: 1 },
        { topic: txTopic, numPartitions: 1, replicationFactor: 1 },
      ],
    });
    const meta = await admin.fetchTopicMetadata({ topics: [topic, txTopic] });
    out.partitions = Object.fromEntries(meta.topics.map((t) => [t.name, t.partitions.length]));

    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    out.produced = [];
    try {
      for (let i = 0; i < n; i++) {
        const v = `kafkajs-${i}`;
        const [md] = await producer.send({ topic, acks: -1, messages: [{ key: `k${i % 7}`, value: v }] });
        out.produced.push({ p: md.partition, o: Number(md.baseOffset), v });
      }
    } finally {
      await producer.disconnect();
    }

    out.consumed = await consume(group, topic, n, true);
    out.committed = await committedOffsets(admin, group, topic);

    const tp = kafka.producer({ transactionalId: `kafkajs-txn-${group}`, idempotent: true, maxInFlightRequests: 1 });
    await tp.connect();
    out.txn_committed = [];
    try {
      const txns = [['c1', 4, true, 2], ['a1', 3, false, 5], ['c2', 3, true, null]];
      for (const [prefix, count, commit, offset] of txns) {
        const txn = await tp.transaction();
        const values = [];
        for (let i = 0; i < count; i++) values.push(`${prefix}-${i}`);
        await txn.send({ topic: txTopic, messages: values.map((value) => ({ value })) });
        if (offset !== null) {
          await txn.sendOffsets({
            consumerGroupId: `${group}-txoffsets`,
            topics: [{ topic, partitions: [{ partition: 0, offset: String(offset) }] }],
          });
        }
        if (commit) {
          await txn.commit();
          out.txn_committed.push(...values);
        } else {
          await txn.abort();
        }
      }
    } finally {
      await tp.disconnect();
    }
    out.txn_offsets = await committedOffsets(admin, `${group}-txoffsets`, topic);
    const txRecs = await consume(`${group}-txn`, txTopic, out.txn_committed.length, false);
    out.txn_consumed = txRecs.map((r) => r.v);
  } finally {
    await admin.disconnect();
  }
}

async function main() {
  const out = { client: 'kafkajs', version: require('kafkajs/package.json').version };
  let failed = false;
  try {
    await run(out);
  } catch (e) {
    out.error = String(e && e.stack ? e.stack : e);
    failed = true;
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
  process.exit(failed ? 1 : 0);
}

main();
