// Command go4trace drives the official RocketMQ 4.x Go client
// (github.com/apache/rocketmq-client-go/v2, remoting protocol) with message trace on, for
// tests/interop/test_go_trace.py. Built by that test with `go build` into build/ and run as
//
//	build/go4trace produce -n 127.0.0.1:9876 -group G -topic T -count 3 -keys K -tag TAG
//	build/go4trace consume -n 127.0.0.1:9876 -group G -topic T -expect 3
//
// Both print JSON lines on stdout, the protocol of tests/processes.py's DriverRun: "started",
// then "sent" per message (msg_id: the client's unique id, offset_msg_id: the broker's,
// queue_id, broker, keys) or "msg" per consumed message (msg_id, offset_msg_id, queue_id,
// keys, tags, reconsume_times), and last "done" ("error" in it when something failed or the
// deadline passed). The program exits by itself: -deadline bounds the whole run.
//
// Message i (from 0) has the body "go4trace <i>", the tag -tag and the keys "<K>-<i>" and
// "<K>-all" (the client joins them with a space in KEYS).
//
// Trace: producer.WithTrace / consumer.WithTrace with a TraceConfig on the same name server
// and the default trace topic RMQ_SYS_TRACE_TOPIC (or -trace-topic). The client's trace
// dispatcher batches records every 5 ms on a goroutine of its own and does not flush them
// on Shutdown (it cancels its context and sends what is pending on yet another goroutine
// while Shutdown returns), so both subcommands wait -linger before shutting down, letting
// the last records (a consume's SubAfter is appended after the listener returns) reach the
// broker.
//
// The client logs through logrus to stderr; its level is -log-level (warn by default), so
// stdout carries only the JSON lines.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// clientVersion is the module version go.mod pins (reported in "started").
const clientVersion = "v2.1.2"

var stdout sync.Mutex

func emit(event string, fields map[string]any) {
	line := map[string]any{"event": event}
	for k, v := range fields {
		line[k] = v
	}
	data, err := json.Marshal(line)
	if err != nil {
		data = []byte(fmt.Sprintf(`{"event":"done","error":%q}`, err.Error()))
	}
	stdout.Lock()
	defer stdout.Unlock()
	os.Stdout.Write(append(data, '\n'))
}

type common struct {
	namesrv    string
	group      string
	topic      string
	traceTopic string
	deadline   time.Duration
	linger     time.Duration
	logLevel   string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.namesrv, "n", "127.0.0.1:9876", "name server address (host:port)")
	fs.StringVar(&c.group, "group", "", "producer or consumer group")
	fs.StringVar(&c.topic, "topic", "", "topic")
	fs.StringVar(&c.traceTopic, "trace-topic", "", "trace topic (empty: RMQ_SYS_TRACE_TOPIC)")
	fs.DurationVar(&c.deadline, "deadline", 60*time.Second, "the whole run's deadline")
	fs.DurationVar(&c.linger, "linger", 2*time.Second, "wait before Shutdown (trace flush)")
	fs.StringVar(&c.logLevel, "log-level", "warn", "the client's log level (to stderr)")
}

func (c *common) trace() *primitive.TraceConfig {
	return &primitive.TraceConfig{
		TraceTopic:   c.traceTopic,
		Access:       primitive.Local,
		NamesrvAddrs: []string{c.namesrv},
	}
}

// watchdog ends the program with a "done" error line once the deadline passed.
func watchdog(deadline time.Duration) {
	time.AfterFunc(deadline+10*time.Second, func() {
		emit("done", map[string]any{"error": fmt.Sprintf("deadline %s passed", deadline)})
		os.Exit(3)
	})
}

func produce(args []string) error {
	var c common
	var count int
	var keys, tag string
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	c.register(fs)
	fs.IntVar(&count, "count", 1, "messages to send")
	fs.StringVar(&keys, "keys", "go4trace", "prefix of each message's keys")
	fs.StringVar(&tag, "tag", "TagGo", "each message's tag")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rlog.SetLogLevel(c.logLevel)
	watchdog(c.deadline)

	p, err := rocketmq.NewProducer(
		producer.WithNameServer([]string{c.namesrv}),
		producer.WithGroupName(c.group),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(5*time.Second),
		producer.WithTrace(c.trace()),
	)
	if err != nil {
		return fmt.Errorf("new producer: %w", err)
	}
	if err := p.Start(); err != nil {
		return fmt.Errorf("start producer: %w", err)
	}
	emit("started", map[string]any{"version": clientVersion, "role": "producer"})
	ctx, cancel := context.WithTimeout(context.Background(), c.deadline)
	defer cancel()
	sent := 0
	var sendErr error
	for i := 0; i < count; i++ {
		msg := primitive.NewMessage(c.topic, []byte(fmt.Sprintf("go4trace %d", i)))
		msg.WithTag(tag)
		msg.WithKeys([]string{fmt.Sprintf("%s-%d", keys, i), keys + "-all"})
		res, err := p.SendSync(ctx, msg)
		if err != nil {
			sendErr = fmt.Errorf("send %d: %w", i, err)
			break
		}
		if res.Status != primitive.SendOK {
			sendErr = fmt.Errorf("send %d: status %d", i, res.Status)
			break
		}
		sent++
		emit("sent", map[string]any{
			"index":         i,
			"msg_id":        res.MsgID,
			"offset_msg_id": res.OffsetMsgID,
			"queue_id":      res.MessageQueue.QueueId,
			"broker":        res.MessageQueue.BrokerName,
			"queue_offset":  res.QueueOffset,
			"region":        res.RegionID,
			"trace_on":      res.TraceOn,
			"keys":          msg.GetKeys(),
		})
	}
	time.Sleep(c.linger)
	if err := p.Shutdown(); err != nil && sendErr == nil {
		sendErr = fmt.Errorf("shutdown producer: %w", err)
	}
	if sendErr != nil {
		return sendErr
	}
	emit("done", map[string]any{"ok": sent})
	return nil
}

func consume(args []string) error {
	var c common
	var expect int
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	c.register(fs)
	fs.IntVar(&expect, "expect", 1, "messages to consume before leaving")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rlog.SetLogLevel(c.logLevel)
	watchdog(c.deadline)

	pc, err := rocketmq.NewPushConsumer(
		consumer.WithNameServer([]string{c.namesrv}),
		consumer.WithGroupName(c.group),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithTrace(c.trace()),
	)
	if err != nil {
		return fmt.Errorf("new push consumer: %w", err)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	enough := make(chan struct{})
	err = pc.Subscribe(c.topic, consumer.MessageSelector{}, func(_ context.Context,
		msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			emit("msg", map[string]any{
				"msg_id":          m.MsgId,
				"offset_msg_id":   m.OffsetMsgId,
				"queue_id":        m.Queue.QueueId,
				"queue_offset":    m.QueueOffset,
				"keys":            m.GetKeys(),
				"tags":            m.GetTags(),
				"body":            string(m.Body),
				"reconsume_times": m.ReconsumeTimes,
			})
			if !seen[m.MsgId] {
				seen[m.MsgId] = true
				if len(seen) == expect {
					close(enough)
				}
			}
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	if err := pc.Start(); err != nil {
		return fmt.Errorf("start push consumer: %w", err)
	}
	emit("started", map[string]any{"version": clientVersion, "role": "consumer"})
	var waitErr error
	select {
	case <-enough:
	case <-time.After(c.deadline):
		waitErr = errors.New("deadline passed before every message came")
	}
	time.Sleep(c.linger) // the last SubAfter is appended once the listener returned
	if err := pc.Shutdown(); err != nil && waitErr == nil {
		waitErr = fmt.Errorf("shutdown push consumer: %w", err)
	}
	mu.Lock()
	count := len(seen)
	mu.Unlock()
	if waitErr != nil {
		return fmt.Errorf("%w (%d of %d)", waitErr, count, expect)
	}
	emit("done", map[string]any{"count": count})
	return nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: go4trace produce|consume [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "produce":
		err = produce(os.Args[2:])
	case "consume":
		err = consume(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q (produce, consume)", os.Args[1])
	}
	if err != nil {
		emit("done", map[string]any{"error": strings.TrimSpace(err.Error())})
		os.Exit(1)
	}
	os.Exit(0)
}
