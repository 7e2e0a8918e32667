// ClientChecks: the Admin checks of consumer groups (a static member's group listed, described,
// altered and deleted), part of AdminChecks' chain.

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

final class AdminGroupChecks extends Support {
    private AdminGroupChecks() {
    }

    static void groupAdminChecks(Admin admin, String topic) throws Exception {
        String group = name("adm-group");
        TopicPartition tp0 = new TopicPartition(topic, 0);
        TopicPartition tp1 = new TopicPartition(topic, 1);
        List<Member> ms = new ArrayList<>();
        check("admin.group.setup", () -> {
            Member m = new Member("adm", topic, consumerProps(group, classic("group.instance.id", "adm-inst",
                    "session.timeout.ms", "30000")), true);
            ms.add(m);
            waitFor(() -> m.owned.size() == 3 && m.records.get() >= 3, 30000, () -> "the member: " + m.summary());
            waitFor(() -> {
                try {
                    OffsetAndMetadata om = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                            .get(tp0);
                    return om != null && om.offset() == 5;
                } catch (Exception e) {
                    return false;
                }
            }, 15000, () -> "the member's commit of offset 5: " + m.summary());
            m.stop(); // a static member: it stays in the group until removed (or its session times out)
            require(m.error == null, "member error " + m.error);
            return "static member adm-inst consumed " + m.records.get() + " records and committed";
        });
        check("admin.listTopics.internal", () -> {
            // the group above made the coordinator create __consumer_offsets
            Set<String> names = get(admin.listTopics().names());
            Set<String> withInternal = get(admin.listTopics(new org.apache.kafka.clients.admin.ListTopicsOptions()
                    .listInternal(true)).names());
            require(!names.contains("__consumer_offsets") && withInternal.contains("__consumer_offsets"),
                    "internal topics: " + withInternal);
            TopicDescription offsets = get(admin.describeTopics(List.of("__consumer_offsets")).allTopicNames())
                    .get("__consumer_offsets");
            require(offsets.isInternal(), "__consumer_offsets " + offsets);
            return "__consumer_offsets listed with listInternal only, described as internal ("
                    + offsets.partitions().size() + " partitions)";
        });
        check("admin.listConsumerGroups", () -> {
            Collection<ConsumerGroupListing> all = get(admin.listConsumerGroups().all());
            for (ConsumerGroupListing l : all) {
                if (l.groupId().equals(group)) {
                    require(!l.isSimpleConsumerGroup(), "listing " + l);
                    return all.size() + " groups; ours: " + l;
                }
            }
            throw new Failed("not listed: " + all);
        });
        if (line.startsWith("4")) {
            check("admin.listGroups", () -> {
                // Admin.listGroups (KIP-1043) is 4.x only: called reflectively so the source compiles on 3.9
                Object result = Admin.class.getMethod("listGroups").invoke(admin);
                Collection<?> all = get((org.apache.kafka.common.KafkaFuture<Collection<?>>) result.getClass()
                        .getMethod("all").invoke(result));
                for (Object listing : all) {
                    if (listing.getClass().getMethod("groupId").invoke(listing).equals(group)) {
                        String type = String.valueOf(listing.getClass().getMethod("type").invoke(listing));
                        require(type.contains("Classic") || type.contains("CLASSIC"), "listing " + listing);
                        return all.size() + " groups; ours: " + listing;
                    }
                }
                throw new Failed("not listed: " + all);
            });
        }
        check("admin.describeConsumerGroups", () -> {
            ConsumerGroupDescription d = get(admin.describeConsumerGroups(List.of(group)).all()).get(group);
            require(d.members().size() == 1, "members " + d);
            MemberDescription md = d.members().iterator().next();
            require(md.groupInstanceId().equals(Optional.of("adm-inst"))
                    && md.assignment().topicPartitions().size() == 3, "member " + md);
            require(d.partitionAssignor().equals("range") && d.coordinator() != null, "group " + d);
            require(d.toString().contains("Stable") || d.toString().contains("STABLE"), "state " + d);
            return "Stable, assignor range, member adm-inst with 3 partitions, coordinator " + d.coordinator().id();
        });
        check("admin.describeConsumerGroups.unknown", () -> {
            String unknown = name("no-such-group");
            if (line.startsWith("4")) {
                // DescribeGroups v6 (KIP-1043): GROUP_ID_NOT_FOUND. 3.9 clients speak up to v5, where an unknown
                // group is described as Dead.
                Throwable t = failure(admin.describeConsumerGroups(List.of(unknown)).all());
                require(t instanceof org.apache.kafka.common.errors.GroupIdNotFoundException, "unknown group: " + t);
                return "GroupIdNotFoundException (DescribeGroups v6)";
            }
            ConsumerGroupDescription d = get(admin.describeConsumerGroups(List.of(unknown)).all()).get(unknown);
            require(d.members().isEmpty() && (d.toString().contains("Dead") || d.toString().contains("DEAD")),
                    "unknown group " + d);
            return "Dead, no members";
        });
        check("admin.listConsumerGroupOffsets", () -> {
            Map<TopicPartition, OffsetAndMetadata> offs = get(admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata());
            require(offs.containsKey(tp0) && offs.get(tp0).offset() == 5, "offsets " + offs);
            return "offsets " + new TreeMap<>(Map.of("p0", offs.get(tp0).offset()));
        });
        check("admin.removeMembersFromConsumerGroup", () -> {
            get(admin.removeMembersFromConsumerGroup(group, new RemoveMembersFromConsumerGroupOptions(List.of(
                    new MemberToRemove("adm-inst")))).all());
            ConsumerGroupDescription d = get(admin.describeConsumerGroups(List.of(group)).all()).get(group);
            require(d.members().isEmpty() && (d.toString().contains("Empty") || d.toString().contains("EMPTY")),
                    "after removal " + d);
            Throwable unknown = failure(admin.removeMembersFromConsumerGroup(group,
                    new RemoveMembersFromConsumerGroupOptions(List.of(new MemberToRemove("no-such-inst")))).all());
            require(unknown instanceof org.apache.kafka.common.errors.UnknownMemberIdException,
                    "removing an unknown instance: " + unknown);
            return "adm-inst removed, group Empty; unknown instance: UnknownMemberIdException";
        });
        check("admin.alterConsumerGroupOffsets", () -> {
            get(admin.alterConsumerGroupOffsets(group, Map.of(tp0, new OffsetAndMetadata(3L, "moved"),
                    tp1, new OffsetAndMetadata(1L))).all());
            Map<TopicPartition, OffsetAndMetadata> offs = get(admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata());
            require(offs.get(tp0).offset() == 3 && "moved".equals(offs.get(tp0).metadata())
                    && offs.get(tp1).offset() == 1, "after alter " + offs);
            return "p0 -> 3 (metadata kept), p1 -> 1";
        });
        check("admin.deleteConsumerGroupOffsets", () -> {
            get(admin.deleteConsumerGroupOffsets(group, Set.of(tp1)).all());
            Map<TopicPartition, OffsetAndMetadata> offs = get(admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata());
            require(!offs.containsKey(tp1) && offs.containsKey(tp0), "after delete " + offs);
            return "p1's offset deleted, p0's kept";
        });
        check("admin.deleteConsumerGroups", () -> {
            get(admin.deleteConsumerGroups(List.of(group)).all());
            Collection<ConsumerGroupListing> all = get(admin.listConsumerGroups().all());
            for (ConsumerGroupListing l : all) {
                require(!l.groupId().equals(group), "still listed " + l);
            }
            Throwable again = failure(admin.deleteConsumerGroups(List.of(group)).all());
            require(again instanceof org.apache.kafka.common.errors.GroupIdNotFoundException,
                    "deleting it again: " + again);
            return "deleted; again: GroupIdNotFoundException";
        });
        stopAll(ms);
    }
}
