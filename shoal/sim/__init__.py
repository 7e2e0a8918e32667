"""Deterministic simulation of the whole broker under faults (issue 21).

The simulator runs shoal's real code (`Broker` with N nodes, its handlers, the group and
transaction coordinators on their runtime, partition logs and producer state) on virtual time,
reached by simulated clients through a simulated network, with node crashes; a seed fixes
everything, so a failing seed replays bit for bit.

    python -m shoal.sim --seeds 1..200      # one summary line; exit 1 naming failing seeds
    python -m shoal.sim --seeds 1..2000 --jobs 2    # the same in two processes
    python -m shoal.sim --seed 17           # replay one seed, print its trace
    python -m shoal.sim --seed 8 --plant skip-epoch-fence --shrink   # a smaller failing run
    python -m shoal.sim --plant list        # planted bugs the simulator must find
    python -m shoal.sim --swarm --seeds 1..10000 --jobs 2   # seeds that each draw their own mix (CI)

Modules:

- `loop`: `SimLoop`, an asyncio loop whose clock is virtual and which jumps to the next timer
  instead of sleeping; `shoal.clock` reads it through `shoal.clock.set_source`.
- `network`: client and server connections, FIFO per connection, seeded delay, loss,
  duplication, dropped connections, network partitions (a node cut off from every client);
  observers see every request a node handled.
- `wire`: request builders and `SimClient` (routing, retries).
- `cluster`: the `Broker` under test and its crashes (a node; the whole process, recovered
  from its directory), wall-clock jumps and network partitions.
- `workload`: idempotent producers (acks=all and acks=1; one that gives up on a batch bumps its
  epoch, as KIP-360), readers, offset committers.
- `groups`: classic consumer group members (join, sync, heartbeat, commit, leave, pause).
- `consumer_groups`: KIP-848 consumer-protocol members (ConsumerGroupHeartbeat).
- `share_groups`: KIP-932 share group members (ShareGroupHeartbeat, ShareFetch in share sessions,
  acknowledgements); `share_checks` judges their locks, acknowledgements and delivery counts.
- `txn`: transactional producers (some paused past their timeout, then writing as zombies) and
  read_committed readers.
- `admin`: an admin client (create and delete topics, add partitions, delete records, alter a
  config) that checks each acknowledged change stays visible.
- `invariants`, `group_checks`, `consumer_checks`, `txn_checks`, `replay_checks`: what must
  hold, checked as the run goes and at its end; each violation names its step in the trace.
- `plants`: planted bugs (a wrong variant of one real function, for one run).
- `run`: `run_seed`, one seed end to end.
- `shrink`: the same failing seed on a smaller configuration (fewer clients, faults switched
  off), printed as `--set` settings that replay it.
- `swarm`: swarm testing: a seed that draws its own configuration (which kinds of client, how
  many, how much work, nodes, partitions, fault rates); `--swarm`, what CI runs.

Seams: the cores read time from `shoal.clock` and make up ids (topic, member and cluster ids)
with `shoal.entropy`; a run points both at the seed. Still outside the simulator's reach:
`BrokerNode` starts real listeners through `loop.create_server` (the `SimLoop` answers with
placeholders); the coordinator runtime loads logs with `asyncio.to_thread` (the `SimLoop` runs
executor jobs inline); request latency metrics read `time.perf_counter()` (they measure the
process, not the schedule). The coordinators' timers (sessions, rebalance timeouts), share-group
record locks and fetch waits run on `monotonic_ms`, as Kafka's do, so a `clock-jump` of the wall
clock moves only what is stored as a time (record timestamps, transaction and offset expiry).
"""
