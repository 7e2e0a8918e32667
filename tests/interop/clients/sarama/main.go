// An interop driver for IBM/sarama against shoal (tests/interop/test_go_js_clients.py).
//
// Usage: sarama-driver -brokers host:port[,...] -topic t -txtopic tt -group g -n 60
//
// It creates both topics with the cluster admin (-topic with 3 partitions, -txtopic with 1) and reads
// their metadata back; produces -n keyed records with the idempotent SyncProducer (each send's
// partition and offset); consumes them with a consumer group from the oldest offset, marking and
// committing synchronously; reads the group's committed offsets back with the admin; then runs three
// transactions on -txtopic (commit, abort, commit; the first two also commit offsets of another group,
// AddOffsetsToTxn) and reads it with a read_committed consumer group.
// Progress goes to stderr; one JSON summary line goes to stdout at the end.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// rec is one record as the driver saw it: partition, offset, value.
type rec struct {
	P int32  `json:"p"`
	O int64  `json:"o"`
	V string `json:"v"`
}

// collector is a consumer-group handler that keeps every record and commits after each one.
type collector struct {
	mu   sync.Mutex
	got  []rec
	want int
	done chan struct{}
	once sync.Once
}

func (c *collector) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (c *collector) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (c *collector) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		c.mu.Lock()
		c.got = append(c.got, rec{msg.Partition, msg.Offset, string(msg.Value)})
		n := len(c.got)
		c.mu.Unlock()
		sess.MarkMessage(msg, "")
		sess.Commit() // synchronous when auto-commit is off
		if n >= c.want {
			c.once.Do(func() { close(c.done) })
		}
	}
	return nil
}

func config(version sarama.KafkaVersion) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.ClientID = "shoal-sarama-driver"
	cfg.Metadata.AllowAutoTopicCreation = false
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Producer.Retry.Max = 5
	cfg.Net.MaxOpenRequests = 1
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRoundRobin()}
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	return cfg
}

// consume runs a consumer group on topic until want records arrived (or the timeout); the records.
func consume(brokers []string, cfg *sarama.Config, group, topic string, want int, timeout time.Duration) ([]rec, error) {
	cg, err := sarama.NewConsumerGroup(brokers, group, cfg)
	if err != nil {
		return nil, fmt.Errorf("new consumer group: %w", err)
	}
	defer cg.Close()
	h := &collector{want: want, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
				log.Printf("consume: %v", err)
				time.Sleep(200 * time.Millisecond)
			}
		}
		errc <- nil
	}()
	go func() {
		for err := range cg.Errors() {
			log.Printf("group error: %v", err)
		}
	}()
	select {
	case <-h.done:
	case <-ctx.Done():
	}
	cancel()
	<-errc
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.got) < want {
		return h.got, fmt.Errorf("consumed %d of %d records of %s before the timeout", len(h.got), want, topic)
	}
	return h.got, nil
}

func run(brokers []string, topic, txTopic, group string, n int) (map[string]any, error) {
	out := map[string]any{"client": "sarama", "version": "v1.61.1"}
	cfg := config(sarama.V4_0_0_0)

	// Admin: create the topics, read their metadata back.
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		return out, fmt.Errorf("cluster admin: %w", err)
	}
	defer admin.Close()
	for t, parts := range map[string]int32{topic: 3, txTopic: 1} {
		if err := admin.CreateTopic(t, &sarama.TopicDetail{NumPartitions: parts, ReplicationFactor: 1}, false); err != nil {
			return out, fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	metas, err := admin.DescribeTopics([]string{topic, txTopic})
	if err != nil {
		return out, fmt.Errorf("describe topics: %w", err)
	}
	parts := map[string]int{}
	for _, m := range metas {
		if m.Err != sarama.ErrNoError {
			return out, fmt.Errorf("metadata of %s: %v", m.Name, m.Err)
		}
		parts[m.Name] = len(m.Partitions)
	}
	out["partitions"] = parts

	// Idempotent produce, synchronously, one record at a time.
	producer, err := sarama.NewSyncProducer(brokers, cfg)
	if err != nil {
		return out, fmt.Errorf("producer: %w", err)
	}
	produced := []rec{}
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("sarama-%d", i)
		p, o, err := producer.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i%7)), Value: sarama.StringEncoder(v)})
		if err != nil {
			producer.Close()
			return out, fmt.Errorf("send %d: %w", i, err)
		}
		produced = append(produced, rec{p, o, v})
	}
	producer.Close()
	out["produced"] = produced

	// Consumer group, committing as it goes.
	consumed, err := consume(brokers, cfg, group, topic, n, 40*time.Second)
	out["consumed"] = consumed
	if err != nil {
		return out, err
	}
	offsets, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1, 2}})
	if err != nil {
		return out, fmt.Errorf("list group offsets: %w", err)
	}
	committed := map[string]int64{}
	for p, b := range offsets.Blocks[topic] {
		if b.Err != sarama.ErrNoError {
			return out, fmt.Errorf("committed offset of partition %d: %v", p, b.Err)
		}
		committed[fmt.Sprint(p)] = b.Offset
	}
	out["committed"] = committed

	// Transactions: commit, abort, commit; then a read_committed group reads what was committed.
	tcfg := config(sarama.V4_0_0_0)
	tcfg.Producer.Transaction.ID = "sarama-txn-" + group
	tp, err := sarama.NewSyncProducer(brokers, tcfg)
	if err != nil {
		return out, fmt.Errorf("transactional producer: %w", err)
	}
	defer tp.Close()
	committedValues := []string{}
	for _, txn := range []struct {
		prefix string
		count  int
		commit bool
		offset int64 // committed for group-txoffsets on -topic partition 0 through the transaction; -1: none
	}{{"c1", 4, true, 2}, {"a1", 3, false, 5}, {"c2", 3, true, -1}} {
		if err := tp.BeginTxn(); err != nil {
			return out, fmt.Errorf("begin txn: %w", err)
		}
		if txn.offset >= 0 {
			offsets := map[string][]*sarama.PartitionOffsetMetadata{topic: {{Partition: 0, Offset: txn.offset}}}
			if err := tp.AddOffsetsToTxn(offsets, group+"-txoffsets"); err != nil {
				return out, fmt.Errorf("add offsets to txn: %w", err)
			}
		}
		for i := 0; i < txn.count; i++ {
			v := fmt.Sprintf("%s-%d", txn.prefix, i)
			if _, _, err := tp.SendMessage(&sarama.ProducerMessage{Topic: txTopic, Value: sarama.StringEncoder(v)}); err != nil {
				return out, fmt.Errorf("send in txn: %w", err)
			}
			if txn.commit {
				committedValues = append(committedValues, v)
			}
		}
		if txn.commit {
			err = tp.CommitTxn()
		} else {
			err = tp.AbortTxn()
		}
		if err != nil {
			return out, fmt.Errorf("end txn %s: %w", txn.prefix, err)
		}
	}
	out["txn_committed"] = committedValues
	txOffsets, err := admin.ListConsumerGroupOffsets(group+"-txoffsets", map[string][]int32{topic: {0, 1, 2}})
	if err != nil {
		return out, fmt.Errorf("list txn group offsets: %w", err)
	}
	txCommitted := map[string]int64{}
	for p, b := range txOffsets.Blocks[topic] {
		txCommitted[fmt.Sprint(p)] = b.Offset
	}
	out["txn_offsets"] = txCommitted
	ccfg := config(sarama.V4_0_0_0)
	ccfg.Consumer.IsolationLevel = sarama.ReadCommitted
	txRecs, err := consume(brokers, ccfg, group+"-txn", txTopic, len(committedValues), 40*time.Second)
	values := []string{}
	for _, r := range txRecs {
		values = append(values, r.V)
	}
	out["txn_consumed"] = values
	return out, err
}

func main() {
	brokers := flag.String("brokers", "", "bootstrap servers")
	topic := flag.String("topic", "", "topic (3 partitions)")
	txTopic := flag.String("txtopic", "", "topic for the transactions (1 partition)")
	group := flag.String("group", "", "consumer group")
	n := flag.Int("n", 60, "records to produce")
	flag.Parse()
	if os.Getenv("SHOAL_SARAMA_DEBUG") != "" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags)
	}
	out, err := run(strings.Split(*brokers, ","), *topic, *txTopic, *group, *n)
	if err != nil {
		out["error"] = err.Error()
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
	if err != nil {
		os.Exit(1)
	}
}
