// ClientChecks: the Admin checks of producers and transactions (describe, list, abort, fence), on a
// transaction left open.

import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;

final class AdminTransactionChecks extends Support {
    private AdminTransactionChecks() {
    }

    static void transactionAdminChecks(Admin admin) throws Exception {
        String topic = name("hanging");
        String txnId = name("hanging-id");
        TopicPartition tp = new TopicPartition(topic, 0);
        createTopic(admin, topic, 1);
        KafkaProducer<String, String> hanging = producer("transactional.id", txnId, "transaction.timeout.ms", "60000");
        try {
            hanging.initTransactions();
            hanging.beginTransaction();
            hanging.send(new ProducerRecord<>(topic, 0, "k", "hanging")).get(30, TimeUnit.SECONDS);
            ProducerState[] state = new ProducerState[1];
            check("admin.describeProducers", () -> {
                List<ProducerState> ps = get(admin.describeProducers(List.of(tp)).partitionResult(tp))
                        .activeProducers();
                require(ps.size() == 1 && ps.get(0).currentTransactionStartOffset().isPresent()
                        && ps.get(0).currentTransactionStartOffset().getAsLong() == 0, "producers " + ps);
                state[0] = ps.get(0);
                long committedEnd = get(admin.listOffsets(Map.of(tp, OffsetSpec.latest()),
                        new org.apache.kafka.clients.admin.ListOffsetsOptions(
                                org.apache.kafka.common.IsolationLevel.READ_COMMITTED)).partitionResult(tp)).offset();
                long end = get(admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp)).offset();
                require(committedEnd == 0 && end == 1, "latest: read_committed " + committedEnd + ", uncommitted "
                        + end);
                return "producer " + ps.get(0).producerId() + " epoch " + ps.get(0).producerEpoch()
                        + ", open transaction from offset 0, coordinator epoch " + ps.get(0).coordinatorEpoch()
                        + "; listOffsets latest: read_committed 0 (LSO), read_uncommitted 1";
            });
            check("admin.listTransactions", () -> {
                Collection<TransactionListing> ls = get(admin.listTransactions().all());
                for (TransactionListing l : ls) {
                    if (l.transactionalId().equals(txnId)) {
                        require(l.state().toString().equalsIgnoreCase("Ongoing"), "listing " + l);
                        return ls.size() + " transactions; ours Ongoing, producer " + l.producerId();
                    }
                }
                throw new Failed("not listed: " + ls);
            });
            check("admin.describeTransactions", () -> {
                TransactionDescription d = get(admin.describeTransactions(List.of(txnId)).description(txnId));
                require(d.state().toString().equalsIgnoreCase("Ongoing") && d.topicPartitions().contains(tp)
                        && d.transactionTimeoutMs() == 60000, "description " + d);
                Throwable unknown = failure(admin.describeTransactions(List.of(name("no-txn"))).all());
                require(unknown instanceof org.apache.kafka.common.errors.TransactionalIdNotFoundException,
                        "unknown id: " + unknown);
                return "Ongoing on " + d.topicPartitions() + ", coordinator " + d.coordinatorId()
                        + "; unknown id: TransactionalIdNotFoundException";
            });
            check("admin.abortTransaction", () -> {
                require(state[0] != null, "no producer state");
                ProducerState s = state[0];
                get(admin.abortTransaction(new AbortTransactionSpec(tp, s.producerId(), (short) s.producerEpoch(),
                        s.coordinatorEpoch().orElse(0))).all());
                waitFor(() -> {
                    try {
                        return admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers()
                                .stream().noneMatch(p -> p.currentTransactionStartOffset().isPresent());
                    } catch (Exception e) {
                        return false;
                    }
                }, 10000, () -> "no open transaction on " + tp);
                List<ConsumerRecord<String, String>> rc = readAll(topic, "read_committed");
                require(rc.isEmpty(), "read_committed after the abort: " + values(rc));
                return "marker written: no open transaction on " + tp + ", nothing visible to read_committed";
            });
            check("admin.fenceProducers", () -> {
                get(admin.fenceProducers(List.of(txnId)).all());
                Throwable t = null;
                try {
                    hanging.send(new ProducerRecord<>(topic, 0, "k", "after-fence")).get(30, TimeUnit.SECONDS);
                    hanging.commitTransaction();
                } catch (Exception e) {
                    t = e instanceof ExecutionException ? e.getCause() : e;
                }
                boolean fenced = false;
                for (Throwable c = t; c != null; c = c.getCause()) {
                    fenced |= c instanceof ProducerFencedException
                            || c instanceof org.apache.kafka.common.errors.InvalidProducerEpochException;
                }
                require(fenced, "the fenced producer went on: " + t);
                TransactionDescription d = get(admin.describeTransactions(List.of(txnId)).description(txnId));
                return "fenced: " + t.getClass().getSimpleName() + "; state now " + d.state() + ", epoch "
                        + d.producerEpoch();
            });
        } finally {
            hanging.close(Duration.ofSeconds(2));
        }
    }
}
