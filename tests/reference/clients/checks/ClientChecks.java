// Kafka's Java clients (producer, consumer, Admin) against one broker or cluster, for shoal's reference
// tests (tests/reference/test_java_clients.py). Compiles unchanged against Kafka 4.x and 3.9.x jars: it
// uses only APIs both lines have; the KIP-848 check runs only with line=4.
//
// Usage: java -cp <kafka lib>/*:<classes> ClientChecks <bootstrap> line=4|3.9 nodes=N target=shoal|kafka
//
// The checks: ProducerChecks, ConsumerChecks, AdminChecks (+ AdminGroupChecks), AdminMoreChecks
// (+ AdminTransactionChecks); their shared helpers in Support, the group member in Member.
//
// Prints one JSON object per check on stdout: {"name": ..., "ok": true|false, "detail": ...}, then
// {"done": true}. Every wait is bounded; the whole program ends within its own deadline.

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

public final class ClientChecks extends Support {
    private ClientChecks() {
    }

    // ------------------------------------------------------------------ main
    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        Map<String, String> opts = new HashMap<>();
        for (int i = 1; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            opts.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        line = opts.getOrDefault("line", "4");
        target = opts.getOrDefault("target", "shoal");
        nodes = Integer.parseInt(opts.getOrDefault("nodes", "1"));
        long deadlineMs = Long.parseLong(opts.getOrDefault("deadline.ms", "110000"));
        Set<String> only = opts.containsKey("only") ? new HashSet<>(List.of(opts.get("only").split(","))) : null;

        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(deadlineMs);
                report("deadline", false, "the checks did not finish within " + deadlineMs + " ms");
                emit("{\"done\":false}");
                Runtime.getRuntime().halt(3);
            } catch (InterruptedException ignored) {
                // finished in time
            }
        }, "watchdog");
        watchdog.setDaemon(true);
        watchdog.start();

        List<Runnable> tasks = new ArrayList<>();
        Map<String, Runnable> named = new java.util.LinkedHashMap<>();
        named.put("admin", () -> {
            try {
                AdminChecks.adminChecks();
            } catch (Exception e) {
                report("admin", false, e.toString());
            }
        });
        named.put("admin2", () -> {
            try {
                AdminMoreChecks.adminMoreChecks();
            } catch (Exception e) {
                report("admin2", false, e.toString());
            }
        });
        for (String check : List.of("producer.plain", "producer.compression+headers", "producer.idempotent",
                "producer.record_too_large", "consumer.offset_out_of_range",
                "producer.transactional", "producer.transactional.consume_transform_produce",
                "consumer.read_committed")) {
            named.put(check, () -> ProducerChecks.producerChecks(check));
        }
        named.put("range", () -> ConsumerChecks.assignorCheck("range", "org.apache.kafka.clients.consumer.RangeAssignor"));
        named.put("roundrobin", () -> ConsumerChecks.assignorCheck("roundrobin",
                "org.apache.kafka.clients.consumer.RoundRobinAssignor"));
        named.put("sticky", () -> ConsumerChecks.assignorCheck("sticky", "org.apache.kafka.clients.consumer.StickyAssignor"));
        named.put("cooperative-sticky", () -> ConsumerChecks.assignorCheck("cooperative-sticky",
                "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"));
        named.put("static", ConsumerChecks::staticMembership);
        if (line.startsWith("4")) {
            named.put("kip848", ConsumerChecks::consumerProtocol);
        }
        long start = System.nanoTime();
        for (Map.Entry<String, Runnable> e : named.entrySet()) {
            if (only == null || only.contains(e.getKey())) {
                tasks.add(() -> {
                    e.getValue().run();
                    emit("{\"task\":" + quote(e.getKey()) + ",\"ms\":" + (System.nanoTime() - start) / 1_000_000
                            + "}");
                });
            }
        }
        ExecutorService pool = Executors.newFixedThreadPool(Integer.parseInt(opts.getOrDefault("threads", "16")));
        for (Runnable t : tasks) {
            pool.submit(t);
        }
        pool.shutdown();
        boolean finished = pool.awaitTermination(deadlineMs, TimeUnit.MILLISECONDS);
        watchdog.interrupt();
        emit("{\"done\":" + finished + ",\"failed\":" + FAILED.get() + "}");
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }
}
