// A share group member (KIP-932) on Kafka's Java client (KafkaShareConsumer) for shoal's reference tests.
//
// Usage: java -cp <kafka lib>/*:<classes> ShareMember <bootstrap> <group> <topic> [key=value ...]
// The key=value arguments are share consumer properties (share.acknowledgement.mode=implicit|explicit,
// max.poll.records, share.acquire.mode, ...), except sleep.ms=N: a pause after each record (slow
// processing). The acknowledgement mode may also come from $SHARE_ACK_MODE.
//
// Prints one JSON object per line on stdout: start; rec (partition, offset, value, deliveryCount, with
// "dc":null when the client does not know it) for every record a poll returns; acked (offset and type)
// per record in explicit mode; committed / commit_failed (per partition errors of commitSync); error;
// closed. In explicit mode each record is acknowledged as its value says:
//   "release-N" -> RELEASE on its first delivery, ACCEPT later;  "reject-N" -> REJECT;
//   "poison-N"  -> RELEASE every time;  "hold-N" -> on its first delivery, sleep (until killed) before
//   acknowledging;  anything else -> ACCEPT.
// then commitSync(). Exits cleanly (close()) when its standard input closes or on SIGTERM; SIGKILL crashes
// it with whatever it holds unacknowledged.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class ShareMember {
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

    static AcknowledgeType instruction(String value, Optional<Short> deliveryCount) {
        int dc = deliveryCount.map(Short::intValue).orElse(1);
        if (value.startsWith("release-")) {
            return dc <= 1 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT;
        }
        if (value.startsWith("reject-")) {
            return AcknowledgeType.REJECT;
        }
        if (value.startsWith("poison-")) {
            return AcknowledgeType.RELEASE;
        }
        return AcknowledgeType.ACCEPT;
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        String envMode = System.getenv("SHARE_ACK_MODE");
        if (envMode != null && !envMode.isEmpty()) {
            props.put("share.acknowledgement.mode", envMode);
        }
        long sleepMs = 0;
        for (int i = 3; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            String k = args[i].substring(0, eq);
            String v = args[i].substring(eq + 1);
            if (k.equals("sleep.ms")) {
                sleepMs = Long.parseLong(v);
            } else {
                props.put(k, v);
            }
        }
        boolean explicit = "explicit".equals(props.getProperty("share.acknowledgement.mode", "implicit"));
        String topic = args[2];
        KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props);
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

        emit("{\"ev\":\"start\",\"client\":\"java\",\"explicit\":" + explicit + "}");
        try {
            consumer.subscribe(List.of(topic));
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
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    String value = r.value() == null ? "" : new String(r.value(), StandardCharsets.UTF_8);
                    Optional<Short> dc = r.deliveryCount();
                    emit("{\"ev\":\"rec\",\"p\":" + r.partition() + ",\"o\":" + r.offset() + ",\"v\":" + quote(value)
                            + ",\"dc\":" + (dc.isPresent() ? dc.get().toString() : "null") + "}");
                }
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    String value = r.value() == null ? "" : new String(r.value(), StandardCharsets.UTF_8);
                    if (value.startsWith("hold-") && r.deliveryCount().map(Short::intValue).orElse(1) <= 1) {
                        emit("{\"ev\":\"holding\",\"o\":" + r.offset() + "}");
                        while (!stopping.get()) {
                            Thread.sleep(100);  // never acknowledges: the test kills this member
                        }
                        break;
                    }
                    if (sleepMs > 0) {
                        Thread.sleep(sleepMs);
                    }
                    if (explicit) {
                        AcknowledgeType type = instruction(value, r.deliveryCount());
                        consumer.acknowledge(r, type);
                        emit("{\"ev\":\"acked\",\"p\":" + r.partition() + ",\"o\":" + r.offset() + ",\"type\":\""
                                + type.name() + "\"}");
                    }
                }
                if (stopping.get()) {
                    break;
                }
                if (explicit) {
                    try {
                        Map<TopicIdPartition, Optional<KafkaException>> result = consumer.commitSync(Duration.ofSeconds(20));
                        StringBuilder failed = new StringBuilder();
                        for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : result.entrySet()) {
                            if (e.getValue().isPresent()) {
                                failed.append(e.getKey().partition()).append(": ").append(e.getValue().get()).append("; ");
                            }
                        }
                        if (failed.length() == 0) {
                            emit("{\"ev\":\"committed\",\"n\":" + records.count() + "}");
                        } else {
                            emit("{\"ev\":\"commit_failed\",\"err\":" + quote(failed.toString()) + "}");
                        }
                    } catch (WakeupException e) {
                        break;
                    } catch (KafkaException e) {
                        emit("{\"ev\":\"commit_failed\",\"err\":" + quote(String.valueOf(e)) + "}");
                    }
                }
            }
        } catch (Exception e) {
            emit("{\"ev\":\"error\",\"err\":" + quote(String.valueOf(e)) + "}");
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
