// ClientChecks: the producer checks (plain, codecs and headers, record too large, idempotent,
// transactional, consume-transform-produce) and the consumer's read_committed and offset-out-of-range.

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

final class ProducerChecks extends Support {
    private ProducerChecks() {
    }

    // ------------------------------------------------------------------ producer checks
    /** The producer checks (and read_committed), each its own task: runs the one named ``only``. */
    static void producerChecks(String only) {
        try (Admin admin = admin()) {
            checkIf(only, "producer.plain", () -> {
                String topic = name("plain");
                createTopic(admin, topic, 3);
                Set<String> sent;
                try (KafkaProducer<String, String> p = producer("enable.idempotence", "false", "acks", "1")) {
                    sent = produce(p, topic, 3, 5, "plain");
                }
                Set<String> got = values(readAll(topic, "read_uncommitted"));
                require(got.equals(sent), () -> "read back " + got + ", sent " + sent);
                return sent.size() + " records over 3 partitions read back";
            });
            checkIf(only, "producer.compression+headers", () -> {
                String topic = name("codecs");
                createTopic(admin, topic, 1);
                List<String> sent = new ArrayList<>();
                for (String codec : List.of("none", "gzip", "snappy", "lz4", "zstd")) {
                    try (KafkaProducer<String, String> p = producer("compression.type", codec, "linger.ms", "20")) {
                        List<java.util.concurrent.Future<RecordMetadata>> acks = new ArrayList<>();
                        for (int i = 0; i < 10; i++) {
                            String v = codec + "-" + i + "-" + "x".repeat(200);
                            sent.add(v);
                            ProducerRecord<String, String> r = new ProducerRecord<>(topic, 0, "k" + i, v);
                            r.headers().add("codec", codec.getBytes(java.nio.charset.StandardCharsets.UTF_8));
                            r.headers().add("empty", new byte[0]);
                            acks.add(p.send(r));
                        }
                        for (java.util.concurrent.Future<RecordMetadata> a : acks) {
                            a.get(30, TimeUnit.SECONDS);
                        }
                    }
                }
                List<ConsumerRecord<String, String>> back = readAll(topic, "read_uncommitted");
                List<String> got = new ArrayList<>();
                for (ConsumerRecord<String, String> r : back) {
                    got.add(r.value());
                    String codec = r.value().substring(0, r.value().indexOf('-'));
                    org.apache.kafka.common.header.Header h = r.headers().lastHeader("codec");
                    require(h != null && new String(h.value(), java.nio.charset.StandardCharsets.UTF_8).equals(codec)
                            && r.headers().lastHeader("empty") != null
                            && r.headers().lastHeader("empty").value().length == 0, "headers of " + r);
                    require(r.key().equals("k" + r.value().split("-")[1]), "key of " + r);
                }
                require(got.equals(sent), "read back " + got.size() + " values, in order: " + got.equals(sent));
                return "10 records each with none, gzip, snappy, lz4, zstd; values, keys, headers and order kept";
            });
            checkIf(only, "producer.record_too_large", () -> {
                String topic = name("small");
                get(admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1).configs(Map.of("max.message.bytes",
                        "10000")))).all());
                waitMetadata(admin, topic, 1);
                Throwable t = null;
                try (KafkaProducer<String, String> p = producer("compression.type", "none", "retries", "0")) {
                    p.send(new ProducerRecord<>(topic, 0, "k", "y".repeat(20000))).get(30, TimeUnit.SECONDS);
                    p.send(new ProducerRecord<>(topic, 0, "k", "small")).get(30, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    t = e.getCause();
                }
                require(t instanceof org.apache.kafka.common.errors.RecordTooLargeException, "a 20 kB record: " + t);
                return "20 kB record into max.message.bytes=10000: RecordTooLargeException";
            });
            checkIf(only, "consumer.offset_out_of_range", () -> {
                String topic = name("oor");
                createTopic(admin, topic, 1);
                try (KafkaProducer<String, String> p = producer()) {
                    produce(p, topic, 1, 3, "oor");
                }
                TopicPartition tp = new TopicPartition(topic, 0);
                try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(null, "auto.offset.reset",
                        "none"))) {
                    c.assign(List.of(tp));
                    Map<TopicPartition, Long> begin = c.beginningOffsets(List.of(tp), Duration.ofSeconds(15));
                    Map<TopicPartition, Long> end = c.endOffsets(List.of(tp), Duration.ofSeconds(15));
                    Map<TopicPartition, org.apache.kafka.clients.consumer.OffsetAndTimestamp> at =
                            c.offsetsForTimes(Map.of(tp, 0L), Duration.ofSeconds(15));
                    require(begin.get(tp) == 0 && end.get(tp) == 3 && at.get(tp) != null && at.get(tp).offset() == 0,
                            "beginning " + begin + ", end " + end + ", for time 0 " + at);
                    c.seek(tp, 10);
                    Throwable t = null;
                    long deadline = System.nanoTime() + 15_000_000_000L;
                    while (t == null && System.nanoTime() < deadline) {
                        try {
                            c.poll(Duration.ofMillis(200));
                        } catch (org.apache.kafka.clients.consumer.OffsetOutOfRangeException e) {
                            t = e;
                        }
                    }
                    require(t != null, "no OffsetOutOfRangeException for offset 10 of 3");
                    c.seek(tp, 1);
                    List<String> got = new ArrayList<>();
                    while (got.size() < 2 && System.nanoTime() < deadline) {
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                            got.add(r.value());
                        }
                    }
                    require(got.equals(List.of("oor-0-1", "oor-0-2")), "after seek(1): " + got);
                    return "beginning 0, end 3, offsetsForTimes(0) 0; seek(10): OffsetOutOfRangeException; seek(1): "
                            + got;
                }
            });
            checkIf(only, "producer.idempotent", () -> {
                String topic = name("idem");
                createTopic(admin, topic, 2);
                Map<Integer, List<Long>> offsets = new TreeMap<>();
                try (KafkaProducer<String, String> p = producer("enable.idempotence", "true", "acks", "all",
                        "max.in.flight.requests.per.connection", "5")) {
                    List<java.util.concurrent.Future<RecordMetadata>> acks = new ArrayList<>();
                    for (int i = 0; i < 40; i++) {
                        acks.add(p.send(new ProducerRecord<>(topic, i % 2, "k", "idem-" + i)));
                    }
                    for (java.util.concurrent.Future<RecordMetadata> a : acks) {
                        RecordMetadata md = a.get(30, TimeUnit.SECONDS);
                        offsets.computeIfAbsent(md.partition(), k -> new ArrayList<>()).add(md.offset());
                    }
                }
                for (Map.Entry<Integer, List<Long>> e : offsets.entrySet()) {
                    for (int i = 0; i < e.getValue().size(); i++) {
                        require(e.getValue().get(i) == i, "partition " + e.getKey() + " offsets " + e.getValue());
                    }
                }
                List<ConsumerRecord<String, String>> back = readAll(topic, "read_uncommitted");
                require(back.size() == 40 && values(back).size() == 40, "read back " + back.size() + " records");
                TopicPartition tp = new TopicPartition(topic, 0);
                List<ProducerState> states = get(admin.describeProducers(List.of(tp)).partitionResult(tp))
                        .activeProducers();
                require(states.size() == 1 && states.get(0).producerId() >= 0 && states.get(0).lastSequence() == 19,
                        "describeProducers " + states);
                return "offsets contiguous 0..19 on both partitions; producer " + states.get(0).producerId()
                        + " last sequence 19";
            });
            checkIf(only, "producer.transactional", () -> {
                String topic = name("txn");
                String out = name("txn-out");
                String group = name("txn-group");
                createTopic(admin, topic, 2);
                createTopic(admin, out, 1);
                String txnId = name("txn-id");
                try (KafkaProducer<String, String> p = producer("transactional.id", txnId,
                        "transaction.timeout.ms", "30000")) {
                    p.initTransactions();
                    p.beginTransaction();
                    produce(p, topic, 2, 3, "committed");
                    Map<TopicPartition, OffsetAndMetadata> offs = Map.of(new TopicPartition(out, 0),
                            new OffsetAndMetadata(7L, "txn-meta"));
                    p.sendOffsetsToTransaction(offs,
                            new org.apache.kafka.clients.consumer.ConsumerGroupMetadata(group));
                    p.commitTransaction();
                    p.beginTransaction();
                    produce(p, topic, 2, 2, "aborted");
                    p.abortTransaction();
                }
                Set<String> got = values(readCommitted(topic, 6));
                require(got.size() == 6 && got.stream().allMatch(v -> v.startsWith("committed")),
                        "read_committed saw " + got);
                TopicPartition outTp = new TopicPartition(out, 0);
                waitFor(() -> groupOffset(admin, group, outTp) == 7, 10000, () -> "the transaction's offset commit");
                Map<TopicPartition, OffsetAndMetadata> committed =
                        get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
                OffsetAndMetadata om = committed.get(outTp);
                require(om != null && om.offset() == 7 && "txn-meta".equals(om.metadata()),
                        "offsets committed through the transaction: " + committed);
                // Kafka completes the abort (its markers written) a moment after EndTxn answers
                waitFor(() -> {
                    try {
                        String st = admin.describeTransactions(List.of(txnId)).description(txnId).get().state()
                                .toString();
                        return st.equals("CompleteAbort") || st.equals("COMPLETE_ABORT");
                    } catch (Exception e) {
                        return false;
                    }
                }, 10000, () -> "the transaction in CompleteAbort");
                TransactionDescription td = get(admin.describeTransactions(List.of(txnId)).description(txnId));
                return "commit (6 records + offsets via sendOffsetsToTransaction), abort (4 records); state "
                        + td.state();
            });
            checkIf(only, "producer.transactional.consume_transform_produce", () -> {
                String in = name("eos-in");
                String out = name("eos-out");
                String group = name("eos-group");
                createTopic(admin, in, 2);
                createTopic(admin, out, 1);
                try (KafkaProducer<String, String> p = producer()) {
                    produce(p, in, 2, 4, "in");
                }
                int copied = 0;
                int generation;
                try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(group,
                        classic("isolation.level", "read_committed")));
                     KafkaProducer<String, String> p = producer("transactional.id", name("eos-id"))) {
                    p.initTransactions();
                    c.subscribe(List.of(in));
                    long deadline = System.nanoTime() + 30_000_000_000L;
                    while (copied < 8 && System.nanoTime() < deadline) {
                        ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                        if (recs.isEmpty()) {
                            continue;
                        }
                        p.beginTransaction();
                        Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                        for (ConsumerRecord<String, String> r : recs) {
                            p.send(new ProducerRecord<>(out, 0, r.key(), "out-" + r.value()));
                            next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                            copied++;
                        }
                        // the consumer's group metadata (member id, generation): the coordinator fences zombies
                        p.sendOffsetsToTransaction(next, c.groupMetadata());
                        p.commitTransaction();
                    }
                    generation = c.groupMetadata().generationId();
                }
                require(copied == 8, "copied " + copied);
                Set<String> got = values(readCommitted(out, 8));
                require(got.size() == 8 && got.stream().allMatch(v -> v.startsWith("out-in-")), "output " + got);
                waitFor(() -> groupOffset(admin, group, new TopicPartition(in, 0)) == 4
                        && groupOffset(admin, group, new TopicPartition(in, 1)) == 4, 10000,
                        () -> "the group's offsets 4/4");
                return "8 records copied in transactions with the consumer's group metadata (generation "
                        + generation + "); offsets 4/4 committed with them";
            });
            checkIf(only, "consumer.read_committed", () -> {
                String topic = name("rc");
                createTopic(admin, topic, 1);
                String txnId = name("rc-id");
                try (KafkaProducer<String, String> p = producer("transactional.id", txnId)) {
                    p.initTransactions();
                    p.beginTransaction();
                    produce(p, topic, 1, 3, "c1");
                    p.commitTransaction();
                    p.beginTransaction();
                    produce(p, topic, 1, 3, "ab");
                    p.abortTransaction();
                    p.beginTransaction();
                    produce(p, topic, 1, 2, "c2");
                    p.commitTransaction();
                }
                List<ConsumerRecord<String, String>> committed = readCommitted(topic, 5);
                List<ConsumerRecord<String, String>> all = readAll(topic, "read_uncommitted");
                Set<String> rc = values(committed);
                require(rc.equals(new TreeSet<>(List.of("c1-0-0", "c1-0-1", "c1-0-2", "c2-0-0", "c2-0-1"))),
                        "read_committed saw " + rc);
                require(values(all).size() == 8, "read_uncommitted saw " + values(all));
                List<Long> offs = new ArrayList<>();
                for (ConsumerRecord<String, String> r : committed) {
                    offs.add(r.offset());
                }
                require(offs.equals(List.of(0L, 1L, 2L, 8L, 9L)), "read_committed offsets " + offs);
                return "read_committed: 5 committed records at offsets " + offs + "; read_uncommitted: 8";
            });
        }
    }
}
