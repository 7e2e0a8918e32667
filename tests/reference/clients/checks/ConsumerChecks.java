// ClientChecks: consumer groups, the classic protocol with each assignor and static membership, and the
// consumer protocol (KIP-848, 4.x clients only).

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.TopicPartition;

final class ConsumerChecks extends Support {
    private ConsumerChecks() {
    }

    // ------------------------------------------------------------------ classic groups
    static void assignorCheck(String assignor, String className) {
        check("consumer.classic." + assignor, () -> {
            String topic = name("as-" + assignor);
            String group = name("g-" + assignor);
            int parts = 4;
            Set<String> sent;
            try (Admin admin = admin()) {
                createTopic(admin, topic, parts);
            }
            try (KafkaProducer<String, String> p = producer()) {
                sent = produce(p, topic, parts, 3, assignor);
            }
            List<Member> ms = new ArrayList<>();
            try {
                String[] kv = classic("partition.assignment.strategy", className);
                Member m1 = new Member("m1", topic, consumerProps(group, kv), true);
                ms.add(m1);
                waitFor(() -> m1.owned.size() == parts, 30000, () -> "m1 to own all: " + summaries(ms));
                Member m2 = new Member("m2", topic, consumerProps(group, kv), true);
                ms.add(m2);
                waitFor(() -> exactCover(ms, parts) && m1.owned.size() == 2 && m2.owned.size() == 2
                        && m1.generation == m2.generation, 30000, () -> "a 2/2 cover: " + summaries(ms));
                waitFor(() -> consumed(ms).equals(sent), 20000, () -> "every record: " + summaries(ms));
                Set<Integer> a = new TreeSet<>(m1.owned);
                Set<Integer> b = new TreeSet<>(m2.owned);
                switch (assignor) {
                    case "range":
                        require(a.equals(Set.of(0, 1)) || a.equals(Set.of(2, 3)), "range layout " + a + " " + b);
                        break;
                    case "roundrobin":
                        require(a.equals(Set.of(0, 2)) || a.equals(Set.of(1, 3)), "roundrobin layout " + a + " " + b);
                        break;
                    case "sticky":
                    case "cooperative-sticky":
                        // sticky: m1 keeps two of the partitions it had (it had them all)
                        break;
                    default:
                        break;
                }
                if (assignor.equals("cooperative-sticky")) {
                    // incremental: m1 gave up only the two partitions that moved, never all four
                    for (Set<Integer> r : new ArrayList<>(m1.revoked)) {
                        require(r.size() <= 2, "cooperative revocation of " + r + ": " + summaries(ms));
                    }
                } else {
                    boolean eagerAll = false;
                    for (Set<Integer> r : new ArrayList<>(m1.revoked)) {
                        eagerAll |= r.size() == parts;
                    }
                    require(eagerAll, "eager rebalance revoked everything first: " + summaries(ms));
                }
                m1.stop(); // a dynamic member leaves the group (LeaveGroup): m2 takes everything
                waitFor(() -> m2.owned.size() == parts, 20000, () -> "m2 to own all after m1 left: " + summaries(ms));
                stopAll(ms);
                try (Admin admin = admin()) {
                    Map<TopicPartition, OffsetAndMetadata> offs = get(admin.listConsumerGroupOffsets(group)
                            .partitionsToOffsetAndMetadata());
                    for (int p = 0; p < parts; p++) {
                        OffsetAndMetadata om = offs.get(new TopicPartition(topic, p));
                        require(om != null && om.offset() == 3, "committed offsets " + offs + ": " + summaries(ms));
                    }
                }
                return "m1 " + a + ", m2 " + b + ", generation " + m1.generation + ", " + sent.size()
                        + " records once each, committed 3 on every partition; m1 left, m2 took all; " + m1.changes;
            } finally {
                stopAll(ms);
            }
        });
    }

    static void staticMembership() {
        check("consumer.classic.static_membership", () -> {
            String topic = name("static");
            String group = name("g-static");
            int parts = 4;
            try (Admin admin = admin()) {
                createTopic(admin, topic, parts);
            }
            List<Member> ms = new ArrayList<>();
            try {
                Member a = new Member("a", topic, consumerProps(group, classic("group.instance.id", "inst-a",
                        "session.timeout.ms", "10000")), true);
                Member b = new Member("b", topic, consumerProps(group, classic("group.instance.id", "inst-b",
                        "session.timeout.ms", "10000")), true);
                ms.add(a);
                ms.add(b);
                waitFor(() -> exactCover(ms, parts) && a.owned.size() == 2 && b.generation == a.generation,
                        30000, () -> "a 2/2 cover: " + summaries(ms));
                Thread.sleep(700); // two heartbeats of b: the group is stable
                Set<Integer> had = new TreeSet<>(a.owned);
                int bAssigned = b.assignedCalls.get();
                int bRevoked = b.revokedCalls.get();
                int gen = a.generation;
                a.stop(); // a static member does not leave the group when it closes
                ms.remove(a);
                Member a2 = new Member("a2", topic, consumerProps(group, classic("group.instance.id", "inst-a",
                        "session.timeout.ms", "10000")), true);
                ms.add(a2);
                waitFor(() -> !a2.owned.isEmpty(), 20000, () -> "the restarted member's partitions: "
                        + summaries(ms));
                Thread.sleep(1000); // three heartbeats of b: a rebalance would reach it
                require(new TreeSet<>(a2.owned).equals(had), () -> "restarted member got " + a2.owned + ", had "
                        + had + ": " + summaries(ms));
                require(b.assignedCalls.get() == bAssigned && b.revokedCalls.get() == bRevoked,
                        () -> "the other member rebalanced: " + summaries(ms));
                return "restarted inst-a got " + had + " back (generation " + gen + " -> " + a2.generation
                        + "); inst-b untouched: " + b.changes;
            } finally {
                stopAll(ms);
            }
        });
    }

    static void consumerProtocol() {
        check("consumer.protocol_consumer", () -> {
            String topic = name("kip848");
            String group = name("g-kip848");
            int parts = 4;
            Set<String> sent;
            try (Admin admin = admin()) {
                createTopic(admin, topic, parts);
            }
            try (KafkaProducer<String, String> p = producer()) {
                sent = produce(p, topic, parts, 3, "kip848");
            }
            List<Member> ms = new ArrayList<>();
            try {
                Member m1 = new Member("m1", topic, consumerProps(group, "group.protocol", "consumer"), true);
                ms.add(m1);
                waitFor(() -> m1.owned.size() == parts, 30000, () -> "m1 to own all: " + summaries(ms));
                Member m2 = new Member("m2", topic, consumerProps(group, "group.protocol", "consumer"), true);
                ms.add(m2);
                waitFor(() -> exactCover(ms, parts) && m1.owned.size() == 2 && m2.owned.size() == 2, 30000,
                        () -> "a 2/2 cover: " + summaries(ms));
                waitFor(() -> consumed(ms).equals(sent), 20000, () -> "every record: " + summaries(ms));
                try (Admin admin = admin()) {
                    ConsumerGroupDescription d = get(admin.describeConsumerGroups(List.of(group)).all()).get(group);
                    require(d.members().size() == 2, "describeConsumerGroups " + d);
                    Map<String, Set<Integer>> described = new TreeMap<>();
                    for (MemberDescription md : d.members()) {
                        Set<Integer> ps = new TreeSet<>();
                        for (TopicPartition tp : md.assignment().topicPartitions()) {
                            ps.add(tp.partition());
                        }
                        described.put(md.consumerId(), ps);
                    }
                    require(new TreeSet<>(m1.owned).equals(described.get(m1.memberId))
                            && new TreeSet<>(m2.owned).equals(described.get(m2.memberId)),
                            () -> "described assignments " + described + " vs " + summaries(ms));
                    String type = String.valueOf(d.getClass().getMethod("type").invoke(d));
                    require(type.equalsIgnoreCase("consumer"), "group type " + type);
                    return "m1 " + new TreeSet<>(m1.owned) + " epoch " + m1.generation + ", m2 "
                            + new TreeSet<>(m2.owned) + " epoch " + m2.generation + "; group type " + type;
                }
            } finally {
                stopAll(ms);
            }
        });
    }
}
