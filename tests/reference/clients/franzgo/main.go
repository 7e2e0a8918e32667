// A group member on franz-go (kgo.ServerSideBalancer: KIP-848, group.protocol=consumer) for shoal's
// reference tests.
//
// Usage: franzgo-member -brokers host:port -group g -topic t [-instance id]
// (-topic re:<regex> subscribes to a regex the broker resolves)
//
// Prints one JSON object per line on stdout, as tests/reference/clients/GroupMember.java does: start,
// assigned/revoked/lost (with the member's whole assignment after the change, member id and epoch),
// rec, committed (synchronous commit after each batch), commit_failed, error, closed. Exits cleanly
// (leaves the group) when its standard input closes or on SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	outMu sync.Mutex
	enc   = json.NewEncoder(os.Stdout)
)

func emit(v map[string]any) {
	outMu.Lock()
	defer outMu.Unlock()
	_ = enc.Encode(v)
}

type owned struct {
	mu  sync.Mutex
	tps map[string]int32 // "topic:partition" -> partition
}

// change applies an assignment change; the whole assignment after it, as partitions and as topic:partition.
func (o *owned) change(add bool, m map[string][]int32) ([]int32, []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for t, ps := range m {
		for _, p := range ps {
			key := t + ":" + strconv.Itoa(int(p))
			if add {
				o.tps[key] = p
			} else {
				delete(o.tps, key)
			}
		}
	}
	parts := []int32{}
	keys := []string{}
	for k, p := range o.tps {
		parts = append(parts, p)
		keys = append(keys, k)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	sort.Strings(keys)
	return parts, keys
}

func changed(m map[string][]int32) []int32 {
	out := []int32{}
	for _, ps := range m {
		out = append(out, ps...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func main() {
	brokers := flag.String("brokers", "", "bootstrap servers")
	group := flag.String("group", "", "group id")
	topic := flag.String("topic", "", "topic")
	instance := flag.String("instance", "", "group.instance.id (static member)")
	flag.Parse()

	own := &owned{tps: map[string]int32{}}
	var cl *kgo.Client
	// The callbacks get the client as an argument: the first assignment can come before NewClient
	// has returned (and `cl` is set).
	report := func(c *kgo.Client, ev string, add bool, m map[string][]int32) {
		now, tps := own.change(add, m)
		member, epoch := c.GroupMetadata()
		emit(map[string]any{"ev": ev, "parts": changed(m), "owned": now, "tps": tps, "epoch": epoch,
			"member": member})
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.ConsumerGroup(*group),
		kgo.ServerSideBalancer(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(_ context.Context, c *kgo.Client, m map[string][]int32) {
			report(c, "assigned", true, m)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, c *kgo.Client, m map[string][]int32) {
			report(c, "revoked", false, m)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, c *kgo.Client, m map[string][]int32) {
			report(c, "lost", false, m)
		}),
	}
	if strings.HasPrefix(*topic, "re:") { // a regex the broker resolves (SubscribedTopicRegex)
		opts = append(opts, kgo.ConsumeTopics(strings.TrimPrefix(*topic, "re:")), kgo.ConsumeRegex())
	} else {
		opts = append(opts, kgo.ConsumeTopics(*topic))
	}
	if *instance != "" {
		opts = append(opts, kgo.InstanceID(*instance))
	}
	var err error
	cl, err = kgo.NewClient(opts...)
	if err != nil {
		emit(map[string]any{"ev": "error", "err": err.Error()})
		os.Exit(2)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		cancel()
	}()

	emit(map[string]any{"ev": "start", "client": "franz-go"})
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			cl.AllowRebalance()
			break
		}
		fetches.EachError(func(t string, p int32, err error) {
			emit(map[string]any{"ev": "error", "err": err.Error(), "p": p})
		})
		var recs []*kgo.Record
		fetches.EachRecord(func(r *kgo.Record) {
			recs = append(recs, r)
			emit(map[string]any{"ev": "rec", "topic": r.Topic, "p": r.Partition, "o": r.Offset, "v": string(r.Value)})
		})
		if len(recs) > 0 {
			next := map[string]int64{}
			for _, r := range recs {
				next[strconv.Itoa(int(r.Partition))] = r.Offset + 1
			}
			if err := cl.CommitRecords(context.Background(), recs...); err != nil {
				emit(map[string]any{"ev": "commit_failed", "offsets": next, "err": err.Error()})
			} else {
				emit(map[string]any{"ev": "committed", "offsets": next})
			}
		}
		cl.AllowRebalance()
	}
	cl.Close() // leaves the group (a static member does not)
	emit(map[string]any{"ev": "closed"})
}
