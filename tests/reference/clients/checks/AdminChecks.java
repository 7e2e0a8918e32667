// ClientChecks: the Admin checks of the main chain, on topics of their own: topics, partitions, cluster,
// configs, offsets, records, (the group checks: AdminGroupChecks), log dirs, leader elections,
// reassignments, topic deletion.

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ElectionNotNeededException;

final class AdminChecks extends Support {
    private AdminChecks() {
    }

    // ------------------------------------------------------------------ Admin
    static void adminChecks() throws Exception {
        try (Admin admin = admin()) {
            String topic = name("adm");
            String other = name("adm-other");
            short rf = (short) Math.min(nodes, 3);
            check("admin.createTopics", () -> {
                Map<String, String> configs = Map.of("retention.ms", "123456789", "cleanup.policy", "delete");
                get(admin.createTopics(List.of(new NewTopic(topic, 3, rf).configs(configs),
                        new NewTopic(other, 1, (short) 1))).all());
                String dry = name("dry-run");
                get(admin.createTopics(List.of(new NewTopic(dry, 2, (short) 1)),
                        new org.apache.kafka.clients.admin.CreateTopicsOptions().validateOnly(true)).all());
                require(!get(admin.listTopics().names()).contains(dry), "validateOnly created " + dry);
                Throwable badConfig = failure(admin.createTopics(List.of(new NewTopic(name("bad"), 1, (short) 1)
                        .configs(Map.of("cleanup.policy", "sometimes")))).all());
                require(badConfig instanceof org.apache.kafka.common.errors.InvalidConfigurationException,
                        "an invalid config: " + badConfig);
                Throwable dup = failure(admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all());
                require(dup instanceof org.apache.kafka.common.errors.TopicExistsException,
                        "creating it again: " + dup);
                waitMetadata(admin, topic, 3);
                waitMetadata(admin, other, 1);
                return topic + " (3 partitions, rf " + rf + "), " + other + "; again: TopicExistsException; "
                        + "validateOnly: nothing created; invalid config: InvalidConfigurationException";
            });
            check("admin.listTopics", () -> {
                Set<String> names = get(admin.listTopics().names());
                require(names.contains(topic) && names.contains(other), "listTopics " + names);

                return names.size() + " topics, ours among them";
            });
            check("admin.describeTopics", () -> {
                TopicDescription d = get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic);
                require(d.partitions().size() == 3, "partitions " + d);
                for (TopicPartitionInfo p : d.partitions()) {
                    require(p.replicas().size() == rf && p.isr().size() == rf && p.leader() != null,
                            "partition " + p);
                }
                require(d.topicId() != null && !d.topicId().toString().isEmpty(), "topic id " + d.topicId());
                TopicDescription withOps = get(admin.describeTopics(List.of(topic),
                        new org.apache.kafka.clients.admin.DescribeTopicsOptions().includeAuthorizedOperations(true))
                        .allTopicNames()).get(topic);
                require(withOps.authorizedOperations() != null
                        && withOps.authorizedOperations().contains(AclOperation.READ)
                        && withOps.authorizedOperations().contains(AclOperation.DELETE),
                        "authorized operations " + withOps.authorizedOperations());
                Throwable missing = failure(admin.describeTopics(List.of(name("nope"))).allTopicNames());
                require(missing instanceof org.apache.kafka.common.errors.UnknownTopicOrPartitionException,
                        "unknown topic: " + missing);
                return "3 partitions, rf " + rf + ", id " + d.topicId() + "; unknown: UnknownTopicOrPartition";
            });
            check("admin.createPartitions", () -> {
                get(admin.createPartitions(Map.of(other, NewPartitions.increaseTo(3))).all());
                waitMetadata(admin, other, 3);
                Throwable fewer = failure(admin.createPartitions(Map.of(other, NewPartitions.increaseTo(2))).all());
                require(fewer instanceof org.apache.kafka.common.errors.InvalidPartitionsException,
                        "decreasing: " + fewer);
                return other + " 1 -> 3 partitions; 3 -> 2: InvalidPartitionsException";
            });
            List<Integer> nodeIds = new ArrayList<>();
            check("admin.describeCluster", () -> {
                DescribeClusterResult r = admin.describeCluster();
                Collection<org.apache.kafka.common.Node> ns = get(r.nodes());
                String id = get(r.clusterId());
                org.apache.kafka.common.Node controller = get(r.controller());
                for (org.apache.kafka.common.Node n : ns) {
                    nodeIds.add(n.id());
                }
                Collections.sort(nodeIds);
                require(ns.size() == nodes, "nodes " + ns);
                require(id != null && !id.isEmpty(), "cluster id " + id);
                require(controller != null && nodeIds.contains(controller.id()), "controller " + controller);
                Set<AclOperation> ops = get(admin.describeCluster(new org.apache.kafka.clients.admin
                        .DescribeClusterOptions().includeAuthorizedOperations(true)).authorizedOperations());
                require(ops != null && ops.contains(AclOperation.ALTER) && ops.contains(AclOperation.DESCRIBE),
                        "cluster authorized operations " + ops);
                return "cluster " + id + ", nodes " + nodeIds + ", controller " + controller.id();
            });
            if (nodeIds.isEmpty()) {
                for (org.apache.kafka.common.Node n : get(admin.describeCluster().nodes())) {
                    nodeIds.add(n.id());
                }
                Collections.sort(nodeIds);
            }
            ConfigResource topicRes = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            check("admin.describeConfigs", () -> {
                ConfigResource brokerRes = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(nodeIds.get(0)));
                Map<ConfigResource, org.apache.kafka.clients.admin.Config> cs =
                        get(admin.describeConfigs(List.of(topicRes, brokerRes)).all());
                ConfigEntry retention = cs.get(topicRes).get("retention.ms");
                require(retention != null && retention.value().equals("123456789")
                        && retention.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, "retention.ms " + retention);
                ConfigEntry segment = cs.get(topicRes).get("segment.bytes");
                require(segment != null && segment.isDefault(), "segment.bytes " + segment);
                ConfigEntry parts = cs.get(brokerRes).get("num.partitions");
                require(parts != null && parts.value() != null, "broker num.partitions " + parts);
                return "topic: " + cs.get(topicRes).entries().size() + " entries, retention.ms dynamic; broker "
                        + nodeIds.get(0) + ": " + cs.get(brokerRes).entries().size() + " entries";
            });
            check("admin.incrementalAlterConfigs", () -> {
                get(admin.incrementalAlterConfigs(Map.of(topicRes, List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "86400000"), AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("max.message.bytes", "200000"), AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("cleanup.policy", ""), AlterConfigOp.OpType.DELETE))))
                        .all());
                // Kafka applies config changes through its metadata log: describe sees them a moment later
                waitFor(() -> {
                    try {
                        org.apache.kafka.clients.admin.Config now = admin.describeConfigs(List.of(topicRes)).all().get()
                                .get(topicRes);
                        return now.get("retention.ms").value().equals("86400000") && now.get("cleanup.policy")
                                .isDefault();
                    } catch (Exception e) {
                        return false;
                    }
                }, 10000, () -> "the altered configs described");
                org.apache.kafka.clients.admin.Config c = get(admin.describeConfigs(List.of(topicRes)).all())
                        .get(topicRes);
                require(c.get("retention.ms").value().equals("86400000")
                        && c.get("max.message.bytes").value().equals("200000"), "after SET: " + c);
                require(c.get("cleanup.policy").isDefault(), "after DELETE: " + c.get("cleanup.policy"));
                Throwable bad = failure(admin.incrementalAlterConfigs(Map.of(topicRes, List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "not-a-number"), AlterConfigOp.OpType.SET))))
                        .all());
                require(bad instanceof org.apache.kafka.common.errors.InvalidConfigurationException
                        || bad instanceof org.apache.kafka.common.errors.InvalidRequestException, "bad value: " + bad);
                return "SET retention.ms, max.message.bytes; DELETE cleanup.policy; bad value: "
                        + bad.getClass().getSimpleName();
            });
            check("admin.incrementalAlterConfigs.broker", () -> {
                ConfigResource clusterDefault = new ConfigResource(ConfigResource.Type.BROKER, "");
                ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(nodeIds.get(0)));
                get(admin.incrementalAlterConfigs(Map.of(clusterDefault, List.of(new AlterConfigOp(
                        new ConfigEntry("log.retention.ms", "604800001"), AlterConfigOp.OpType.SET)))).all());
                try {
                    waitFor(() -> {
                        try {
                            ConfigEntry e = admin.describeConfigs(List.of(broker)).all().get().get(broker)
                                    .get("log.retention.ms");
                            return e != null && "604800001".equals(e.value())
                                    && e.source() == ConfigEntry.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG;
                        } catch (Exception ex) {
                            return false;
                        }
                    }, 10000, () -> "log.retention.ms from the cluster default");
                } finally {
                    get(admin.incrementalAlterConfigs(Map.of(clusterDefault, List.of(new AlterConfigOp(
                            new ConfigEntry("log.retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all());
                }
                Throwable readOnly = failure(admin.incrementalAlterConfigs(Map.of(broker, List.of(new AlterConfigOp(
                        new ConfigEntry("log.dirs", "/elsewhere"), AlterConfigOp.OpType.SET)))).all());
                require(readOnly instanceof org.apache.kafka.common.errors.InvalidRequestException
                        || readOnly instanceof org.apache.kafka.common.errors.InvalidConfigurationException,
                        "a read-only broker config: " + readOnly);
                return "cluster default log.retention.ms SET (DYNAMIC_DEFAULT_BROKER_CONFIG on " + nodeIds.get(0)
                        + ") and DELETEd; log.dirs: " + readOnly.getClass().getSimpleName();
            });
            TopicPartition tp0 = new TopicPartition(topic, 0);
            check("admin.listOffsets", () -> {
                try (KafkaProducer<String, String> p = producer()) {
                    for (int i = 0; i < 5; i++) {
                        p.send(new ProducerRecord<>(topic, 0, 1_600_000_000_000L + i * 1000L, "k", "ts-" + i))
                                .get(30, TimeUnit.SECONDS);
                    }
                }
                ListOffsetsResult.ListOffsetsResultInfo earliest = get(admin.listOffsets(Map.of(tp0,
                        OffsetSpec.earliest())).partitionResult(tp0));
                ListOffsetsResult.ListOffsetsResultInfo latest = get(admin.listOffsets(Map.of(tp0,
                        OffsetSpec.latest())).partitionResult(tp0));
                ListOffsetsResult.ListOffsetsResultInfo max = get(admin.listOffsets(Map.of(tp0,
                        OffsetSpec.maxTimestamp())).partitionResult(tp0));
                ListOffsetsResult.ListOffsetsResultInfo at = get(admin.listOffsets(Map.of(tp0,
                        OffsetSpec.forTimestamp(1_600_000_002_500L))).partitionResult(tp0));
                require(earliest.offset() == 0 && latest.offset() == 5, "earliest " + earliest + " latest " + latest);
                require(max.offset() == 4 && max.timestamp() == 1_600_000_004_000L, "max timestamp " + max);
                require(at.offset() == 3 && at.timestamp() == 1_600_000_003_000L, "for timestamp " + at);
                return "earliest 0, latest 5, max timestamp at 4, timestamp 2.5s -> 3";
            });
            check("admin.deleteRecords", () -> {
                long low = get(admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(2))).lowWatermarks()
                        .get(tp0)).lowWatermark();
                long earliest = get(admin.listOffsets(Map.of(tp0, OffsetSpec.earliest())).partitionResult(tp0))
                        .offset();
                require(low == 2 && earliest == 2, "low watermark " + low + ", earliest " + earliest);
                return "low watermark 2, earliest offset 2";
            });
            AdminGroupChecks.groupAdminChecks(admin, topic);
            check("admin.describeLogDirs", () -> {
                Map<Integer, Map<String, LogDirDescription>> dirs = get(admin.describeLogDirs(nodeIds)
                        .allDescriptions());
                require(dirs.keySet().equals(new HashSet<>(nodeIds)), "nodes " + dirs.keySet());
                int replicas = 0;
                long size = 0;
                for (Map<String, LogDirDescription> perNode : dirs.values()) {
                    require(!perNode.isEmpty(), "a node without a log dir: " + dirs);
                    for (LogDirDescription d : perNode.values()) {
                        require(d.error() == null, "log dir error " + d.error());
                        for (Map.Entry<TopicPartition, ReplicaInfo> e : d.replicaInfos().entrySet()) {
                            if (e.getKey().topic().equals(topic)) {
                                replicas++;
                                size += e.getValue().size();
                            }
                        }
                    }
                }
                require(replicas == 3 * rf, "replicas of " + topic + ": " + replicas);
                require(size > 0, "sizes of " + topic + ": " + size);
                return replicas + " replicas of " + topic + " over " + dirs.size() + " node(s), " + size + " bytes";
            });
            check("admin.describeReplicaLogDirs+alterReplicaLogDirs", () -> {
                List<org.apache.kafka.common.TopicPartitionReplica> replicas = new ArrayList<>();
                TopicDescription d = get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic);
                for (org.apache.kafka.common.Node n : d.partitions().get(0).replicas()) {
                    replicas.add(new org.apache.kafka.common.TopicPartitionReplica(topic, 0, n.id()));
                }
                Map<org.apache.kafka.common.TopicPartitionReplica,
                        org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo> infos =
                        get(admin.describeReplicaLogDirs(replicas).all());
                String dir = null;
                for (org.apache.kafka.common.TopicPartitionReplica r : replicas) {
                    org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo i = infos.get(r);
                    require(i != null && i.getCurrentReplicaLogDir() != null, "replica " + r + ": " + infos);
                    dir = i.getCurrentReplicaLogDir();
                }
                org.apache.kafka.common.TopicPartitionReplica first = replicas.get(0);
                get(admin.alterReplicaLogDirs(Map.of(first, infos.get(first).getCurrentReplicaLogDir())).all());
                String after = get(admin.describeReplicaLogDirs(List.of(first)).all()).get(first)
                        .getCurrentReplicaLogDir();
                require(after.equals(infos.get(first).getCurrentReplicaLogDir()), "after the move " + after);
                return replicas.size() + " replica(s) of " + topic + "-0 in " + dir + "; moved to its own dir: ok";
            });
            check("admin.electLeaders", () -> {
                Map<TopicPartition, Optional<Throwable>> r = get(admin.electLeaders(ElectionType.PREFERRED,
                        Set.of(tp0)).partitions());
                Optional<Throwable> e = r.get(tp0);
                require(e != null && (e.isEmpty() || e.get() instanceof ElectionNotNeededException),
                        "preferred election: " + r);
                return "preferred: " + (e.isEmpty() ? "elected" : "ElectionNotNeeded");
            });
            check("admin.alterPartitionReassignments", () -> {
                TopicPartition tp = new TopicPartition(other, 0);
                TopicDescription before = get(admin.describeTopics(List.of(other)).allTopicNames()).get(other);
                int from = before.partitions().get(0).replicas().get(0).id();
                int to = from;
                for (int n : nodeIds) {
                    if (n != from) {
                        to = n;
                        break;
                    }
                }
                int dest = to;
                get(admin.alterPartitionReassignments(Map.of(tp, Optional.of(
                        new NewPartitionReassignment(List.of(dest))))).all());
                waitFor(() -> {
                    try {
                        Map<TopicPartition, PartitionReassignment> ongoing =
                                admin.listPartitionReassignments().reassignments().get();
                        TopicPartitionInfo p = admin.describeTopics(List.of(other)).allTopicNames().get()
                                .get(other).partitions().get(0);
                        return !ongoing.containsKey(tp) && p.replicas().size() == 1 && p.replicas().get(0).id() == dest
                                && p.leader() != null && p.leader().id() == dest;
                    } catch (Exception ex) {
                        return false;
                    }
                }, 20000, () -> "the reassignment of " + tp + " to " + dest + " to complete");
                Throwable unknown = failure(admin.alterPartitionReassignments(Map.of(
                        new TopicPartition(name("nope"), 0), Optional.of(new NewPartitionReassignment(List.of(dest)))))
                        .all());
                require(unknown instanceof org.apache.kafka.common.errors.UnknownTopicOrPartitionException,
                        "unknown partition: " + unknown);
                return tp + " replicas [" + from + "] -> [" + dest + "]; unknown: UnknownTopicOrPartition";
            });
            check("admin.listPartitionReassignments", () -> {
                Map<TopicPartition, PartitionReassignment> all = get(admin.listPartitionReassignments().reassignments());
                Map<TopicPartition, PartitionReassignment> one = get(admin.listPartitionReassignments(
                        Set.of(tp0)).reassignments());
                require(one.isEmpty(), "reassignments of " + tp0 + ": " + one);
                return "ongoing: " + all.size();
            });
            check("admin.deleteTopics", () -> {
                get(admin.deleteTopics(List.of(other)).all());
                waitFor(() -> {
                    try {
                        return !admin.listTopics().names().get().contains(other);
                    } catch (Exception e) {
                        return false;
                    }
                }, 15000, () -> other + " gone from listTopics");
                Throwable again = failure(admin.deleteTopics(List.of(other)).all());
                require(again instanceof org.apache.kafka.common.errors.UnknownTopicOrPartitionException,
                        "deleting it again: " + again);
                String byId = name("by-id");
                org.apache.kafka.common.Uuid id = get(admin.createTopics(List.of(new NewTopic(byId, 1, (short) 1)))
                        .topicId(byId));
                waitMetadata(admin, byId, 1);
                get(admin.deleteTopics(org.apache.kafka.common.TopicCollection.ofTopicIds(List.of(id))).all());
                waitFor(() -> {
                    try {
                        return !admin.listTopics().names().get().contains(byId);
                    } catch (Exception e) {
                        return false;
                    }
                }, 15000, () -> byId + " gone from listTopics");
                Throwable unknownId = failure(admin.deleteTopics(org.apache.kafka.common.TopicCollection.ofTopicIds(
                        List.of(id))).all());
                require(unknownId instanceof org.apache.kafka.common.errors.UnknownTopicIdException,
                        "deleting the id again: " + unknownId);
                return other + " deleted; again: UnknownTopicOrPartition; " + byId + " deleted by id " + id
                        + "; again: UnknownTopicId";
            });
        }
    }
}
