// A Kafka Streams 4.x word count with exactly_once_v2 for shoal's reference tests (issue 17, part 4):
// input lines -> words -> a repartition topic (groupBy word) -> a count per word in a state store with
// its changelog -> the output topic. Prints one JSON line per state change; closes when stdin ends.
//
// usage: WordCount <bootstrap> <application.id> <input topic> <output topic> <state dir>

import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public class WordCount {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        props.put("consumer.auto.offset.reset", "earliest");

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.with("by-word", Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("{\"ev\":\"state\",\"state\":\"" + now + "\"}");
            System.out.flush();
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("{\"ev\":\"error\",\"err\":\"" + String.valueOf(e).replace("\"", "'") + "\"}");
            System.out.flush();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
                    .SHUTDOWN_CLIENT;
        });
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() != -1) {
                    // end of input is the signal to close
                }
            } catch (Exception ignored) {
                // a closed stream is the same as end of input
            }
            done.countDown();
        }, "stdin");
        stdin.setDaemon(true);
        stdin.start();
        streams.start();
        done.await();
        streams.close();
        System.out.println("{\"ev\":\"closed\"}");
        System.out.flush();
    }
}
