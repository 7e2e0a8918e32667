// The shared part of ClientChecks: the run's settings, the JSON lines, the check runner, bounded waits
// and the helpers every check uses (clients, topics, producing and reading records, group members).

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

abstract class Support {
    static String bootstrap;
    static String line;
    static String target;
    static int nodes;
    static final String RUN = UUID.randomUUID().toString().substring(0, 8);
    static final Object OUT = new Object();
    static final AtomicInteger FAILED = new AtomicInteger();

    // ------------------------------------------------------------------ output and checks
    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : String.valueOf(s).toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static void emit(String json) {
        synchronized (OUT) {
            System.out.println(json);
            System.out.flush();
        }
    }

    static void report(String name, boolean ok, String detail) {
        if (!ok) {
            FAILED.incrementAndGet();
        }
        emit("{\"name\":" + quote(name) + ",\"ok\":" + ok + ",\"detail\":" + quote(detail) + "}");
    }

    interface Body {
        String run() throws Exception;
    }

    static final class Failed extends RuntimeException {
        Failed(String message) {
            super(message);
        }
    }

    /** Runs one check; reports it ok with the detail it returns, or failed with what it threw. */
    static boolean check(String name, Body body) {
        try {
            String detail = body.run();
            report(name, true, detail == null ? "" : detail);
            return true;
        } catch (Throwable t) {
            Throwable cause = t instanceof ExecutionException && t.getCause() != null ? t.getCause() : t;
            String what = cause instanceof Failed ? cause.getMessage()
                    : cause.getClass().getName() + ": " + cause.getMessage();
            report(name, false, what);
            return false;
        }
    }

    static void checkIf(String only, String name, Body body) {
        if (name.equals(only)) {
            check(name, body);
        }
    }

    static void require(boolean cond, String message) {
        if (!cond) {
            throw new Failed(message);
        }
    }

    static void require(boolean cond, Supplier<String> message) {
        if (!cond) {
            throw new Failed(message.get());
        }
    }

    static void waitFor(BooleanSupplier cond, long ms, Supplier<String> what) throws InterruptedException {
        long deadline = System.nanoTime() + ms * 1_000_000L;
        while (System.nanoTime() < deadline) {
            if (cond.getAsBoolean()) {
                return;
            }
            Thread.sleep(50);
        }
        if (!cond.getAsBoolean()) {
            throw new Failed("timed out after " + ms + " ms: " + what.get());
        }
    }

    /** The exception an Admin future failed with (ExecutionException unwrapped), or null. */
    static Throwable failure(org.apache.kafka.common.KafkaFuture<?> f) {
        try {
            f.get(30, TimeUnit.SECONDS);
            return null;
        } catch (ExecutionException e) {
            return e.getCause();
        } catch (java.util.concurrent.TimeoutException e) {
            return e;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return e;
        }
    }

    static <T> T get(org.apache.kafka.common.KafkaFuture<T> f) throws Exception {
        return f.get(30, TimeUnit.SECONDS);
    }

    static String name(String base) {
        return base + "-" + RUN;
    }

    // ------------------------------------------------------------------ clients
    static Properties common() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", "15000");
        p.put("default.api.timeout.ms", "30000");
        p.put("reconnect.backoff.max.ms", "200");
        p.put("retry.backoff.max.ms", "200");
        return p;
    }

    static Admin admin() {
        return Admin.create(common());
    }

    static KafkaProducer<String, String> producer(String... kv) {
        Properties p = common();
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("linger.ms", "0");
        p.put("delivery.timeout.ms", "30000");
        p.put("max.block.ms", "30000");
        for (int i = 0; i + 1 < kv.length; i += 2) {
            p.put(kv[i], kv[i + 1]);
        }
        return new KafkaProducer<>(p);
    }

    static Properties consumerProps(String group, String... kv) {
        Properties p = common();
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        if (group != null) {
            p.put("group.id", group);
        }
        for (int i = 0; i + 1 < kv.length; i += 2) {
            p.put(kv[i], kv[i + 1]);
        }
        return p;
    }

    /** Fast classic-group timers (session.timeout.ms at Kafka's default minimum). */
    static String[] classic(String... more) {
        List<String> kv = new ArrayList<>(List.of("session.timeout.ms", "6000", "heartbeat.interval.ms", "300",
                "max.poll.interval.ms", "30000"));
        kv.addAll(List.of(more));
        return kv.toArray(new String[0]);
    }

    static void createTopic(Admin admin, String topic, int partitions) throws Exception {
        get(admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all());
        waitMetadata(admin, topic, partitions);
    }

    static void waitMetadata(Admin admin, String topic, int partitions) throws Exception {
        waitFor(() -> {
            try {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                return d.partitions().size() == partitions
                        && d.partitions().stream().allMatch(p -> p.leader() != null && p.leader().id() >= 0);
            } catch (Exception e) {
                return false;
            }
        }, 15000, () -> "topic " + topic + " with " + partitions + " partitions and leaders");
    }

    /** Sends key/value records (value "tag-p-i", partition p) synchronously; the values. */
    static Set<String> produce(KafkaProducer<String, String> producer, String topic, int partitions, int perPartition,
                               String tag) throws Exception {
        Set<String> values = new TreeSet<>();
        List<java.util.concurrent.Future<RecordMetadata>> acks = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            for (int i = 0; i < perPartition; i++) {
                String v = tag + "-" + p + "-" + i;
                values.add(v);
                acks.add(producer.send(new ProducerRecord<>(topic, p, "k" + i, v)));
            }
        }
        for (java.util.concurrent.Future<RecordMetadata> a : acks) {
            a.get(30, TimeUnit.SECONDS);
        }
        return values;
    }

    /** Every record of the topic from the start to its end offsets (as this isolation level sees them). */
    static List<ConsumerRecord<String, String>> readAll(String topic, String isolation) throws Exception {
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(null, "isolation.level", isolation))) {
            List<TopicPartition> tps = new ArrayList<>();
            for (org.apache.kafka.common.PartitionInfo pi : c.partitionsFor(topic, Duration.ofSeconds(15))) {
                tps.add(new TopicPartition(topic, pi.partition()));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(15));
            List<ConsumerRecord<String, String>> out = new ArrayList<>();
            long deadline = System.nanoTime() + 20_000_000_000L;
            while (System.nanoTime() < deadline) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (c.position(tp, Duration.ofSeconds(15)) < end.get(tp)) {
                        done = false;
                    }
                }
                if (done) {
                    return out;
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    out.add(r);
                }
            }
            throw new Failed("reading " + topic + " did not reach " + end + " in time; got " + out.size());
        }
    }

    /** readAll with read_committed until it returns at least ``n`` records: Kafka writes the markers of a
     * committed transaction after EndTxn answers, so the last stable offset moves a moment later. */
    static List<ConsumerRecord<String, String>> readCommitted(String topic, int n) throws Exception {
        long deadline = System.nanoTime() + 15_000_000_000L;
        List<ConsumerRecord<String, String>> got = readAll(topic, "read_committed");
        while (got.size() < n && System.nanoTime() < deadline) {
            Thread.sleep(100);
            got = readAll(topic, "read_committed");
        }
        return got;
    }

    /** A group's committed offset of one partition; -1 when none, or when listing failed. */
    static long groupOffset(Admin admin, String group, TopicPartition tp) {
        try {
            OffsetAndMetadata om = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                    .get(30, TimeUnit.SECONDS).get(tp);
            return om == null ? -1 : om.offset();
        } catch (Exception e) {
            return -1;
        }
    }

    static Set<String> values(List<ConsumerRecord<String, String>> records) {
        Set<String> out = new TreeSet<>();
        for (ConsumerRecord<String, String> r : records) {
            out.add(r.value());
        }
        return out;
    }

    // ------------------------------------------------------------------ groups of members
    static boolean exactCover(List<Member> ms, int partitions) {
        List<Integer> all = new ArrayList<>();
        for (Member m : ms) {
            if (m.owned.isEmpty() || m.error != null) {
                return false;
            }
            all.addAll(m.owned);
        }
        Collections.sort(all);
        List<Integer> want = new ArrayList<>();
        for (int i = 0; i < partitions; i++) {
            want.add(i);
        }
        return all.equals(want);
    }

    static Set<String> consumed(List<Member> ms) {
        Set<String> out = new TreeSet<>();
        for (Member m : ms) {
            out.addAll(m.values);
        }
        return out;
    }

    static String summaries(List<Member> ms) {
        StringBuilder b = new StringBuilder();
        for (Member m : ms) {
            b.append(m.summary()).append(' ');
        }
        return b.toString();
    }

    static void stopAll(List<Member> ms) {
        for (Member m : ms) {
            m.stopping = true;
        }
        for (Member m : ms) {
            try {
                m.stop();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
