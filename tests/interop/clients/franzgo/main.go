// An interop driver for twmb/franz-go (kgo and kadm) against shoal (tests/interop/test_go_js_clients.py).
//
// Usage: franzgo-driver -brokers host:port[,...] -topic t -out o -group g -n 60
//
// Steps, each reported in one JSON summary line on stdout at the end (progress goes to stderr):
//  1. kadm creates -topic and -out (3 partitions each) and reads the metadata back;
//  2. an idempotent producer (kgo's default) writes -n keyed records to -topic (partition and offset
//     of each);
//  3. a classic consumer group (cooperative-sticky) reads them, committing synchronously, then kadm
//     describes the group while the member is in it and fetches its committed offsets;
//  4. the same with KIP-848's protocol (kgo.ServerSideBalancer, group.protocol=consumer), described
//     with ConsumerGroupDescribe;
//  5. exactly once: a GroupTransactSession (its own group, classic or with -eos-protocol consumer
//     KIP-848's; read_committed, require-stable)
//     reads -topic and writes "eos-<value>" to -out in transactions that also commit the group's
//     offsets; then a plain transactional producer aborts a transaction of "aborted-<i>" records and
//     commits one "tail-<p>" record to each partition of -out;
//  6. a read_committed consumer (no group) reads -out from the start until every eos and tail record.
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
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// rec is one record as the driver saw it: partition, offset, value.
type rec struct {
	P int32  `json:"p"`
	O int64  `json:"o"`
	V string `json:"v"`
}

func base(brokers []string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ClientID("shoal-franzgo-driver"),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.RetryTimeout(20 * time.Second),
	}
}

// committedOffsets reads a group's committed offsets of topic with kadm.
func committedOffsets(ctx context.Context, adm *kadm.Client, group, topic string) (map[string]int64, error) {
	resp, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("fetch offsets of %s: %w", group, err)
	}
	out := map[string]int64{}
	var ferr error
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			ferr = o.Err
		}
		if o.Topic == topic {
			out[fmt.Sprint(o.Partition)] = o.At
		}
	})
	return out, ferr
}

// groupConsume reads want records of topic in a group (KIP-848 when nextGen), committing each poll's
// records synchronously; before leaving it describes the group. The records and the description.
func groupConsume(ctx context.Context, brokers []string, adm *kadm.Client, group, topic string, nextGen bool, want int) ([]rec, map[string]any, error) {
	opts := append(base(brokers),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.SessionTimeout(10*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond),
	)
	if nextGen {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	got := []rec{}
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return got, nil, fmt.Errorf("group %s consumed %d of %d records: %w", group, len(got), want, ctx.Err())
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			log.Printf("fetch error %s/%d: %v", t, p, err)
			ferr = err
		})
		if ferr != nil && errors.Is(ferr, context.DeadlineExceeded) {
			return got, nil, ferr
		}
		recs := fs.Records()
		for _, r := range recs {
			got = append(got, rec{r.Partition, r.Offset, string(r.Value)})
		}
		if len(recs) > 0 {
			if err := cl.CommitRecords(ctx, recs...); err != nil {
				return got, nil, fmt.Errorf("commit: %w", err)
			}
		}
	}
	desc := map[string]any{}
	if nextGen {
		dg, err := adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			return got, nil, fmt.Errorf("describe consumer group: %w", err)
		}
		d := dg[group]
		if d.Err != nil {
			return got, nil, fmt.Errorf("describe consumer group %s: %w", group, d.Err)
		}
		desc["state"], desc["assignor"], desc["members"] = d.State, d.AssignorName, len(d.Members)
		assigned := 0
		for _, t := range d.AssignedPartitions().Sorted() {
			assigned += len(t.Partitions)
		}
		desc["assigned"] = assigned
	} else {
		dg, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return got, nil, fmt.Errorf("describe group: %w", err)
		}
		d := dg[group]
		if d.Err != nil {
			return got, nil, fmt.Errorf("describe group %s: %w", group, d.Err)
		}
		desc["state"], desc["protocol_type"], desc["protocol"], desc["members"] = d.State, d.ProtocolType, d.Protocol, len(d.Members)
	}
	return got, desc, nil
}

// eos copies want records of topic to out as "eos-<value>", in transactions that commit the offsets.
func eos(ctx context.Context, brokers []string, group, topic, out string, want int, nextGen bool) (int, error) {
	opts := append(base(brokers),
		kgo.TransactionalID("franzgo-eos-"+group),
		kgo.TransactionTimeout(20*time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.SessionTimeout(10*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond),
	)
	if nextGen {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return 0, err
	}
	defer sess.Close()
	copied := 0
	for copied < want {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			return copied, fmt.Errorf("eos copied %d of %d records: %w", copied, want, ctx.Err())
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return copied, fmt.Errorf("begin: %w", err)
		}
		outs := make([]*kgo.Record, 0, len(recs))
		for _, r := range recs {
			outs = append(outs, &kgo.Record{Topic: out, Key: r.Key, Value: []byte("eos-" + string(r.Value))})
		}
		perr := sess.ProduceSync(ctx, outs...).FirstErr()
		committed, err := sess.End(ctx, kgo.TransactionEndTry(perr == nil))
		if err != nil || perr != nil {
			return copied, fmt.Errorf("end transaction (produce error %v): %w", perr, err)
		}
		if committed {
			copied += len(recs)
		}
	}
	return copied, nil
}

// abortAndTail aborts a transaction of records to out, then commits one "tail-<p>" record per partition.
func abortAndTail(ctx context.Context, brokers []string, id, out string) ([]string, error) {
	cl, err := kgo.NewClient(append(base(brokers), kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	for i := 0; i < 6; i++ {
		r := &kgo.Record{Topic: out, Partition: int32(i % 3), Value: []byte(fmt.Sprintf("aborted-%d", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			return nil, fmt.Errorf("produce in the aborted transaction: %w", err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		return nil, fmt.Errorf("abort: %w", err)
	}
	if err := cl.BeginTransaction(); err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	tails := []string{}
	for p := int32(0); p < 3; p++ {
		v := fmt.Sprintf("tail-%d", p)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: out, Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
			return nil, fmt.Errorf("produce tail: %w", err)
		}
		tails = append(tails, v)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return tails, nil
}

// readCommitted reads out from the start with read_committed until want records.
func readCommitted(ctx context.Context, brokers []string, out string, want int) ([]rec, error) {
	cl, err := kgo.NewClient(append(base(brokers),
		kgo.ConsumeTopics(out),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	got := []rec{}
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return got, fmt.Errorf("read_committed read %d of %d records: %w", len(got), want, ctx.Err())
		}
		for _, r := range fs.Records() {
			got = append(got, rec{r.Partition, r.Offset, string(r.Value)})
		}
	}
	return got, nil
}

func run(brokers []string, topic, out, group string, n int, eosProtocol string) (map[string]any, error) {
	res := map[string]any{"client": "franz-go", "version": "v1.22.3"}
	ctx, cancel := context.WithTimeout(context.Background(), 75*time.Second)
	defer cancel()
	admCl, err := kgo.NewClient(base(brokers)...)
	if err != nil {
		return res, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)

	created, err := adm.CreateTopics(ctx, 3, 1, nil, topic, out)
	if err != nil {
		return res, fmt.Errorf("create topics: %w", err)
	}
	for _, c := range created {
		if c.Err != nil {
			return res, fmt.Errorf("create topic %s: %w (%s)", c.Topic, c.Err, c.ErrMessage)
		}
	}
	meta, err := adm.Metadata(ctx, topic, out)
	if err != nil {
		return res, fmt.Errorf("metadata: %w", err)
	}
	parts := map[string]int{}
	for name, t := range meta.Topics {
		if t.Err != nil {
			return res, fmt.Errorf("metadata of %s: %w", name, t.Err)
		}
		parts[name] = len(t.Partitions)
	}
	res["partitions"], res["brokers"] = parts, len(meta.Brokers)

	// Idempotent produce (kgo's default): one record at a time, synchronously.
	pr, err := kgo.NewClient(append(base(brokers), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		return res, err
	}
	produced := []rec{}
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i%7)), Value: []byte(fmt.Sprintf("franz-go-%d", i))}
		if err := pr.ProduceSync(ctx, r).FirstErr(); err != nil {
			pr.Close()
			return res, fmt.Errorf("produce %d: %w", i, err)
		}
		produced = append(produced, rec{r.Partition, r.Offset, string(r.Value)})
	}
	pr.Close()
	res["produced"] = produced

	for _, mode := range []struct {
		name    string
		nextGen bool
	}{{"classic", false}, {"consumer", true}} {
		g := group + "-" + mode.name
		got, desc, err := groupConsume(ctx, brokers, adm, g, topic, mode.nextGen, n)
		res["consumed_"+mode.name], res["describe_"+mode.name] = got, desc
		if err != nil {
			return res, fmt.Errorf("%s group: %w", mode.name, err)
		}
		committed, err := committedOffsets(ctx, adm, g, topic)
		res["committed_"+mode.name] = committed
		if err != nil {
			return res, err
		}
	}

	copied, err := eos(ctx, brokers, group+"-eos", topic, out, n, eosProtocol == "consumer")
	res["eos_copied"] = copied
	if err != nil {
		return res, err
	}
	eosCommitted, err := committedOffsets(ctx, adm, group+"-eos", topic)
	res["committed_eos"] = eosCommitted
	if err != nil {
		return res, err
	}
	tails, err := abortAndTail(ctx, brokers, "franzgo-abort-"+group, out)
	if err != nil {
		return res, err
	}
	outRecs, err := readCommitted(ctx, brokers, out, n+len(tails))
	res["txn_consumed"] = outRecs
	return res, err
}

func main() {
	brokers := flag.String("brokers", "", "bootstrap servers")
	topic := flag.String("topic", "", "input topic (3 partitions)")
	out := flag.String("out", "", "output topic of the transactions (3 partitions)")
	group := flag.String("group", "", "prefix of the consumer groups")
	n := flag.Int("n", 60, "records to produce")
	eosProtocol := flag.String("eos-protocol", "classic", "group protocol of the exactly-once copy: classic or consumer")
	flag.Parse()
	res, err := run(strings.Split(*brokers, ","), *topic, *out, *group, *n, *eosProtocol)
	if err != nil {
		res["error"] = err.Error()
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
	if err != nil {
		os.Exit(1)
	}
}
