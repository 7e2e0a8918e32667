// An interop driver for segmentio/kafka-go against shoal (tests/interop/test_go_js_clients.py).
//
// Usage: kafkago-driver -brokers host:port[,...] -topic t -group g -n 60 [-txtopic tt -txwant 7]
//
// It creates -topic (3 partitions) with kafka.Client.CreateTopics and reads its metadata back; writes
// -n keyed records with a synchronous kafka.Writer (acks=all, hash balancer; each record's partition
// and offset from the Completion callback); consumes them with a group Reader (FetchMessage, then a
// synchronous CommitMessages per record); reads the committed offsets back with OffsetFetch. kafka-go
// has no idempotent or transactional producer: with -txtopic it reads that topic (written by the test
// with committed and aborted transactions) with a read_committed group Reader until -txwant records,
// reporting each record's key in hex (kafka-go returns transaction markers as records: see the test).
// Progress goes to stderr; one JSON summary line goes to stdout at the end.
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// rec is one record as the driver saw it: partition, offset, value.
type rec struct {
	P int    `json:"p"`
	O int64  `json:"o"`
	V string `json:"v"`
	K string `json:"k,omitempty"` // hex of the key, read_committed reads only
}

// consume reads topic with a group Reader until want records, committing each one synchronously.
func consume(brokers []string, group, topic string, isolation kafka.IsolationLevel, want int, timeout time.Duration) ([]rec, error) {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           brokers,
		GroupID:           group,
		Topic:             topic,
		StartOffset:       kafka.FirstOffset,
		MinBytes:          1,
		MaxBytes:          1 << 20,
		MaxWait:           200 * time.Millisecond,
		ReadBackoffMin:    50 * time.Millisecond,
		ReadBackoffMax:    200 * time.Millisecond,
		HeartbeatInterval: 500 * time.Millisecond,
		SessionTimeout:    10 * time.Second,
		RebalanceTimeout:  10 * time.Second,
		JoinGroupBackoff:  200 * time.Millisecond,
		IsolationLevel:    isolation,
		ErrorLogger:       log.New(os.Stderr, "[kafka-go reader] ", log.LstdFlags),
	})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	got := []rec{}
	for len(got) < want {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return got, fmt.Errorf("fetch after %d of %d records of %s: %w", len(got), want, topic, err)
		}
		seen := rec{P: m.Partition, O: m.Offset, V: string(m.Value)}
		if isolation == kafka.ReadCommitted {
			seen.K = hex.EncodeToString(m.Key)
		}
		got = append(got, seen)
		if err := r.CommitMessages(ctx, m); err != nil {
			return got, fmt.Errorf("commit: %w", err)
		}
	}
	return got, nil
}

func run(brokers []string, topic, group, txTopic string, n, txWant int) (map[string]any, error) {
	out := map[string]any{"client": "kafka-go", "version": "v0.4.51"}
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 15 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	created, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{
		Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: 3, ReplicationFactor: 1}},
	})
	if err != nil {
		return out, fmt.Errorf("create topics: %w", err)
	}
	if err := created.Errors[topic]; err != nil {
		return out, fmt.Errorf("create topic %s: %w", topic, err)
	}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return out, fmt.Errorf("metadata: %w", err)
	}
	parts := map[string]int{}
	for _, t := range meta.Topics {
		if t.Error != nil {
			return out, fmt.Errorf("metadata of %s: %w", t.Name, t.Error)
		}
		parts[t.Name] = len(t.Partitions)
	}
	out["partitions"] = parts
	out["brokers"] = len(meta.Brokers)

	var mu sync.Mutex
	produced := []rec{}
	w := &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond,
		WriteTimeout: 15 * time.Second,
		ErrorLogger:  log.New(os.Stderr, "[kafka-go writer] ", log.LstdFlags),
		Completion: func(messages []kafka.Message, err error) {
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, m := range messages {
				produced = append(produced, rec{P: m.Partition, O: m.Offset, V: string(m.Value)})
			}
		},
	}
	// Two batches, each in one call: the writer keeps the order of the records of each partition.
	for half := 0; half < 2; half++ {
		msgs := []kafka.Message{}
		for i := half * n / 2; i < (half+1)*n/2; i++ {
			msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprintf("k%d", i%7)), Value: []byte(fmt.Sprintf("kafka-go-%d", i))})
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			w.Close()
			return out, fmt.Errorf("write messages: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return out, fmt.Errorf("close writer: %w", err)
	}
	out["produced"] = produced

	consumed, err := consume(brokers, group, topic, kafka.ReadUncommitted, n, 40*time.Second)
	out["consumed"] = consumed
	if err != nil {
		return out, err
	}
	fetched, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: {0, 1, 2}}})
	if err != nil {
		return out, fmt.Errorf("offset fetch: %w", err)
	}
	if fetched.Error != nil {
		return out, fmt.Errorf("offset fetch: %w", fetched.Error)
	}
	committed := map[string]int64{}
	for _, p := range fetched.Topics[topic] {
		if p.Error != nil {
			return out, fmt.Errorf("committed offset of partition %d: %w", p.Partition, p.Error)
		}
		committed[fmt.Sprint(p.Partition)] = p.CommittedOffset
	}
	out["committed"] = committed

	if txTopic != "" {
		txRecs, err := consume(brokers, group+"-txn", txTopic, kafka.ReadCommitted, txWant, 40*time.Second)
		out["txn_consumed"] = txRecs
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func main() {
	brokers := flag.String("brokers", "", "bootstrap servers")
	topic := flag.String("topic", "", "topic (3 partitions)")
	group := flag.String("group", "", "consumer group")
	n := flag.Int("n", 60, "records to produce")
	txTopic := flag.String("txtopic", "", "a topic with transactions to read with read_committed")
	txWant := flag.Int("txwant", 0, "committed records to read from -txtopic")
	flag.Parse()
	out, err := run(strings.Split(*brokers, ","), *topic, *group, *txTopic, *n, *txWant)
	if err != nil {
		out["error"] = err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			out["timeout"] = true
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
	if err != nil {
		os.Exit(1)
	}
}
