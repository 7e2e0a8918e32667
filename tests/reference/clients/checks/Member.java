// A consumer-group member of ClientChecks on its own thread: what it owns, consumed, was assigned and
// revoked; commits after each poll when asked to, on revocation, and once more before closing.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;

final class Member {
    final String label;
    final Set<Integer> owned = ConcurrentHashMap.newKeySet();
    final Set<String> values = ConcurrentHashMap.newKeySet();
    final List<String> changes = Collections.synchronizedList(new ArrayList<>());
    final List<Set<Integer>> revoked = Collections.synchronizedList(new ArrayList<>());
    final AtomicInteger assignedCalls = new AtomicInteger();
    final AtomicInteger revokedCalls = new AtomicInteger();
    final AtomicInteger records = new AtomicInteger();
    final AtomicInteger commitsFailed = new AtomicInteger();
    volatile int generation = -1;
    volatile String memberId = "";
    volatile Throwable error;
    volatile boolean stopping;
    final boolean commit;
    final Thread thread;
    private volatile KafkaConsumer<String, String> consumer;

    Member(String label, String topic, Properties props, boolean commit) {
        this.label = label;
        this.commit = commit;
        this.thread = new Thread(() -> loop(topic, props), "member-" + label);
        this.thread.setDaemon(true);
        this.thread.start();
    }

    private void note(String ev, Collection<TopicPartition> parts, KafkaConsumer<String, String> c) {
        Set<Integer> now = new TreeSet<>();
        for (TopicPartition tp : c.assignment()) {
            now.add(tp.partition());
        }
        Set<Integer> changed = new TreeSet<>();
        for (TopicPartition tp : parts) {
            changed.add(tp.partition());
        }
        generation = c.groupMetadata().generationId();
        memberId = c.groupMetadata().memberId();
        if (ev.equals("assigned")) {
            owned.addAll(changed);
        } else {
            owned.removeAll(changed);
        }
        changes.add(ev + changed + "->" + now + "@" + generation);
    }

    private void loop(String topic, Properties props) {
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(props)) {
            consumer = c;
            c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    revokedCalls.incrementAndGet();
                    Set<Integer> s = new TreeSet<>();
                    for (TopicPartition tp : partitions) {
                        s.add(tp.partition());
                    }
                    revoked.add(s);
                    note("revoked", partitions, c);
                    if (commit && !partitions.isEmpty()) {
                        // what Kafka's documentation asks of a listener: commit what was read before the
                        // partitions move, so their next owner starts there
                        commitQuietly(c);
                    }
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    assignedCalls.incrementAndGet();
                    note("assigned", partitions, c);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    note("lost", partitions, c);
                }
            });
            boolean dirty = false; // records returned since the last successful commit
            while (!stopping) {
                ConsumerRecords<String, String> recs;
                try {
                    recs = c.poll(Duration.ofMillis(100));
                } catch (WakeupException e) {
                    break;
                }
                for (ConsumerRecord<String, String> r : recs) {
                    values.add(r.value());
                    records.incrementAndGet();
                }
                dirty |= !recs.isEmpty();
                if (commit && dirty) {
                    try {
                        c.commitSync(Duration.ofSeconds(15));
                        dirty = false;
                    } catch (org.apache.kafka.common.errors.RebalanceInProgressException
                             | org.apache.kafka.clients.consumer.CommitFailedException e) {
                        // the client's own answer while it rebalances: poll again, commit then
                        commitsFailed.incrementAndGet();
                    }
                }
            }
            if (commit && dirty) {
                // the last commit may have met a rebalance (a member leaving): the records read since
                // are committed now, when the group is settled again
                commitQuietly(c);
            }
            c.close(Duration.ofSeconds(5));
        } catch (Throwable t) {
            if (!stopping) {
                error = t;
            }
        }
    }

    private void commitQuietly(KafkaConsumer<String, String> c) {
        try {
            c.commitSync(Duration.ofSeconds(15));
        } catch (org.apache.kafka.common.KafkaException e) {
            commitsFailed.incrementAndGet();
        }
    }

    void stop() throws InterruptedException {
        stopping = true;
        KafkaConsumer<String, String> c = consumer;
        if (c != null) {
            c.wakeup();
        }
        thread.join(20000);
    }

    String summary() {
        return label + "{owned=" + new TreeSet<>(owned) + ", records=" + records.get() + ", commits failed="
                + commitsFailed.get() + ", changes=" + changes
                + (error != null ? ", error=" + error : "") + "}";
    }
}
