// A group member on Kafka's Java client (group.protocol=consumer, KIP-848) for shoal's reference tests.
//
// Usage: java -cp <kafka lib>/*:<classes> GroupMember <bootstrap> <group> <topic> [key=value ...]
// (extra consumer properties, for one group.instance.id=...); a topic "re:<regex>" subscribes to a
// pattern the broker resolves (SubscriptionPattern, RE2/J).
//
// Prints one JSON object per line on stdout: start, assigned/revoked/lost (with the member's whole
// assignment after the change, its member id and epoch), rec (partition, offset, value), committed
// (the offsets committed synchronously after each batch), commit_failed, error, closed.
// Exits cleanly (leaves the group, or for a static member leaves with epoch -2) when its standard
// input closes or on SIGTERM.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class GroupMember {
    private static final Object OUT = new Object();

    static void emit(String json) {
        synchronized (OUT) {
            System.out.println(json);
            System.out.flush();
        }
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
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

    static String parts(Collection<TopicPartition> tps) {
        TreeSet<Integer> sorted = new TreeSet<>();
        for (TopicPartition tp : tps) {
            sorted.add(tp.partition());
        }
        return sorted.toString().replace(" ", "");
    }

    static String tps(Collection<TopicPartition> tps) {
        TreeSet<String> sorted = new TreeSet<>();
        for (TopicPartition tp : tps) {
            sorted.add(quote(tp.topic() + ":" + tp.partition()));
        }
        return "[" + String.join(",", sorted) + "]";
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("group.protocol", "consumer");
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "earliest");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        for (int i = 3; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        String topic = args[2];
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
        AtomicBoolean stopping = new AtomicBoolean(false);
        CountDownLatch closed = new CountDownLatch(1);

        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() != -1) {
                    // commands are not needed: end of input is the signal
                }
            } catch (Exception ignored) {
                // a closed stream is the same as end of input
            }
            stopping.set(true);
            consumer.wakeup();
        }, "stdin");
        stdin.setDaemon(true);
        stdin.start();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping.set(true);
            consumer.wakeup();
            try {
                closed.await();
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }, "sigterm"));

        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            private void report(String ev, Collection<TopicPartition> changed) {
                emit("{\"ev\":\"" + ev + "\",\"parts\":" + parts(changed) + ",\"owned\":"
                        + parts(consumer.assignment()) + ",\"tps\":" + tps(consumer.assignment())
                        + ",\"epoch\":" + consumer.groupMetadata().generationId()
                        + ",\"member\":" + quote(consumer.groupMetadata().memberId()) + "}");
            }

            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                report("revoked", partitions);
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                report("assigned", partitions);
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                report("lost", partitions);
            }
        };

        emit("{\"ev\":\"start\",\"client\":\"java\"}");
        try {
            if (topic.startsWith("re:")) {  // a regex the broker resolves (KIP-848 SubscribedTopicRegex)
                consumer.subscribe(new SubscriptionPattern(topic.substring(3)), listener);
            } else {
                consumer.subscribe(List.of(topic), listener);
            }
            while (!stopping.get()) {
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = consumer.poll(Duration.ofMillis(200));
                } catch (WakeupException e) {
                    break;
                }
                if (records.isEmpty()) {
                    continue;
                }
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                List<String> lines = new ArrayList<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    String value = r.value() == null ? "" : new String(r.value(), StandardCharsets.UTF_8);
                    lines.add("{\"ev\":\"rec\",\"topic\":" + quote(r.topic()) + ",\"p\":" + r.partition()
                            + ",\"o\":" + r.offset() + ",\"v\":"
                            + quote(value) + "}");
                    next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                for (String line : lines) {
                    emit(line);
                }
                StringBuilder committed = new StringBuilder("{");
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : next.entrySet()) {
                    if (committed.length() > 1) {
                        committed.append(',');
                    }
                    committed.append('"').append(e.getKey().partition()).append("\":").append(e.getValue().offset());
                }
                committed.append('}');
                try {
                    consumer.commitSync(next, Duration.ofSeconds(10));
                    emit("{\"ev\":\"committed\",\"offsets\":" + committed + "}");
                } catch (WakeupException e) {
                    emit("{\"ev\":\"commit_failed\",\"offsets\":" + committed + ",\"err\":\"wakeup\"}");
                    break;
                } catch (Exception e) {
                    emit("{\"ev\":\"commit_failed\",\"offsets\":" + committed + ",\"err\":"
                            + quote(e.getClass().getSimpleName() + ": " + e.getMessage()) + "}");
                }
            }
        } catch (Exception e) {
            emit("{\"ev\":\"error\",\"err\":" + quote(e.getClass().getSimpleName() + ": " + e.getMessage()) + "}");
        } finally {
            try {
                consumer.close(Duration.ofSeconds(10));
            } catch (Exception e) {
                emit("{\"ev\":\"error\",\"err\":" + quote("close: " + e) + "}");
            }
            emit("{\"ev\":\"closed\"}");
            closed.countDown();
        }
    }
}
