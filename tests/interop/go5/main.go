// Command go5client drives the official RocketMQ 5 Go client
// (github.com/apache/rocketmq-clients/golang/v5, gRPC) for
// tests/interop (clients5.py), as java5/Java5Client.java drives the Java one: same
// arguments, same steps, same JSON lines, so that tests/proxy/scenarios.py serves both.
//
// Built by the test with `go build` into bin/ (see the test module) and run as
//
//	bin/go5client run
//
// It reads one JSON line of arguments on stdin,
//
//	{"endpoint": "127.0.0.1:PORT", "ssl": false, "deadline_s": 60, "request_timeout_ms": 5000,
//	 "steps": [...]}
//
// and prints JSON lines on stdout: "started" (with the client's module version), "configured"
// (whether TLS is on), then what each step did, and last "done" ("error" in it when a step
// failed in a way it does not report itself, or when deadline_s passed: the program then exits
// at once). `go5client version` prints the client version and exits.
//
// TLS: the Go client always dials with TLS (any certificate accepted) and has no switch for
// it: the ClientOption WithConnOptions is never handed to the connections it makes
// (client_manager.go calls NewRpcClient(target) with no options). "ssl": false therefore swaps
// the package's exported NewRpcClient hook for one that dials in plaintext; "ssl" true or
// absent leaves the client's own TLS.
//
// Credentials: the client signs every request (an "authorization" header, HMAC-SHA1 of the
// date) with Config.Credentials, which must not be nil; the driver gives empty ones, which a
// broker without ACL does not look at.
//
// request_timeout_ms is the client's request timeout (its ClientOption WithQueryRouteTimeout
// sets it, for every RPC, not only QueryRoute). It also sets how long the broker long-polls a
// receive: the client puts no long_polling_timeout in a ReceiveMessageRequest, so the proxy
// polls for what the call's deadline (await + request timeout) leaves after half the request
// timeout.
//
// Steps, by "op", run in order on the clients earlier steps made; each may have a "label" that
// every line it prints carries (its index and op by default). A message spec has "body", "tag",
// "keys" (a list), "properties", "group" (FIFO message group), "delay_ms" (delivery timestamp
// that many ms from now).
//   - producer: "topics", "checker" (COMMIT / ROLLBACK / UNKNOWN, or {"default": ...,
//     "bodies": {body: answer}}): a Producer; each transaction check is a "checked" line.
//   - send: "topic", "messages" -> per message "sent" (message_id, offset, deliver_at_ms) or
//     "send_error" (type, code, text).
//   - transaction: "topic", "message", "end" (commit / rollback / none) -> "sent" (with the
//     transaction id), then "ended" (the client's Commit and RollBack only log a failure: they
//     never return one, so there is no "end_error" here).
//   - wait_checks: "count", "within_s" -> "checks".
//   - simple: "group", "topic", "expression", "expression_type" (TAG / SQL92), "await_s": a
//     SimpleConsumer.
//   - receive: "max", "invisible_s", "until", "until_total", "within_s", "ack" -> "msg" per
//     message ("index": its place among all received; "corrupted": the client's verdict on
//     the body's digest; "digest": that digest as it came on the wire, and whether it is the
//     body's, see wireDigest), then "received". Receives at least once. The client answers an
//     empty receive with the status MESSAGE_NOT_FOUND as an error; that is no error here,
//     just no messages.
//   - ack: "indices" (or "all") -> "acked" or "ack_error" per message. The client's Ack
//     returns no error for an answer whose status is not OK: only a failed call is an
//     "ack_error".
//   - change: "index", "invisible_s" -> "changed" (old and new receipt handle) or
//     "change_error".
//   - sleep: "s".
//   - push: the Go client (v5.1.2) has no PushConsumer: the run ends with an error.
//
// The client logs to $rocketmq.client.logRoot, else $user.home/logs/rocketmqlogs (an
// environment variable with a dot in its name, which no shell sets: the client then writes
// to /logs/rocketmqlogs), and its gRPC interceptor to /tmp/rocketmq-logger.log. The driver
// sends both under $HOME/logs/rocketmqlogs: run it with HOME in a temp dir.
package main

import (
	"bufio"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"github.com/apache/rocketmq-clients/golang/v5/metadata"
	"github.com/apache/rocketmq-clients/golang/v5/pkg/zaplog"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// clientModule is the module whose version "started" reports.
const clientModule = "github.com/apache/rocketmq-clients/golang/v5"

// ------------------------------------------------------------------ output

var (
	// outMu keeps lines whole: the transaction checker prints from the client's goroutines.
	outMu sync.Mutex
	// label is the running step's label, on every line (checker lines included).
	label string
)

// fields is one JSON line's fields besides "event" and "label".
type fields map[string]any

func setLabel(l string) {
	outMu.Lock()
	defer outMu.Unlock()
	label = l
}

// emit prints one JSON line; encoding/json sorts the keys, which the tests do not mind.
func emit(event string, more fields) {
	outMu.Lock()
	defer outMu.Unlock()
	line := fields{"event": event, "label": label}
	for k, v := range more {
		line[k] = v
	}
	text, err := json.Marshal(line)
	if err != nil { // only a driver bug gets here: say so rather than print half a line
		text, _ = json.Marshal(fields{"event": "emit_error", "label": label, "text": err.Error()})
	}
	os.Stdout.Write(append(text, '\n'))
}

// errorFields names an error as the Java driver does: type, code and text. The code is the
// RocketMQ status code of an ErrRpcStatus (a response's non-OK status), else the gRPC
// status code of a failed call, else null.
func errorFields(err error) fields {
	var code any
	var grpcErr interface{ GRPCStatus() *status.Status }
	if rpcErr, ok := rmq.AsErrRpcStatus(err); ok {
		code = rpcErr.GetCode()
	} else if errors.As(err, &grpcErr) {
		code = int(grpcErr.GRPCStatus().Code())
	}
	return fields{"type": fmt.Sprintf("%T", err), "code": code, "text": err.Error()}
}

// clientVersion is the client module's version as built in (go.mod pins it).
func clientVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == clientModule {
				return dep.Version
			}
		}
	}
	return "unknown"
}

// ------------------------------------------------------------------ JSON arguments

type obj = map[string]any

func asObj(v any) obj {
	if m, ok := v.(obj); ok {
		return m
	}
	return obj{}
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return nil
}

func str(m obj, key, otherwise string) string {
	if v, ok := m[key]; ok && v != nil {
		return fmt.Sprint(v)
	}
	return otherwise
}

func number(m obj, key string, otherwise float64) float64 {
	if v, ok := m[key].(float64); ok {
		return v
	}
	return otherwise
}

func integer(m obj, key string, otherwise int64) int64 {
	return int64(number(m, key, float64(otherwise)))
}

func flag(m obj, key string) bool {
	v, _ := m[key].(bool)
	return v
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second))
}

func nowMs() int64 {
	return time.Now().UnixMilli()
}

// ------------------------------------------------------------------ messages

// unexported reads a field the client keeps to itself. MessageView checks the body's
// digest and knows its queue, but exports neither; reflect reads (never writes) them, so
// the lines report what the client concluded, as the Java driver reads MessageViewImpl.
func unexported(view *rmq.MessageView, name string) reflect.Value {
	return reflect.ValueOf(view).Elem().FieldByName(name)
}

func describe(view *rmq.MessageView, index int) fields {
	keys := append([]string{}, view.GetKeys()...)
	sort.Strings(keys)
	properties := map[string]string{}
	for k, v := range view.GetProperties() {
		properties[k] = v
	}
	info := fields{
		"index":              index,
		"topic":              view.GetTopic(),
		"body":               string(view.GetBody()),
		"tag":                view.GetTag(),
		"keys":               keys,
		"properties":         properties,
		"message_id":         view.GetMessageId(),
		"message_group":      view.GetMessageGroup(),
		"delivery_attempt":   view.GetDeliveryAttempt(),
		"delivery_timestamp": nil,
		"born_timestamp":     nil,
		"born_host":          view.GetBornHost(),
		"corrupted":          unexported(view, "corrupted").Bool(),
		"receipt_handle":     view.GetReceiptHandle(),
		"offset":             view.GetOffset(),
		"queue_id":           nil,
		"at_ms":              nowMs(),
	}
	if t := view.GetDeliveryTimestamp(); t != nil {
		info["delivery_timestamp"] = t.UnixMilli()
	}
	if t := view.GetBornTimestamp(); t != nil {
		info["born_timestamp"] = t.UnixMilli()
	}
	if digest, ok := wireDigests.Load(view.GetReceiptHandle()); ok {
		info["digest"] = digest
	}
	// A checked half message comes without its queue.
	if queue := unexported(view, "messageQueue"); !queue.IsNil() {
		info["queue_id"] = queue.Elem().FieldByName("Id").Int()
	}
	return info
}

// message builds a spec's message; deliverAt is its delivery time in ms, 0 for none.
func message(topic string, spec obj) (msg *rmq.Message, deliverAt int64) {
	msg = &rmq.Message{Topic: topic, Body: []byte(str(spec, "body", ""))}
	if spec["tag"] != nil {
		msg.SetTag(str(spec, "tag", ""))
	}
	var keys []string
	for _, k := range asList(spec["keys"]) {
		keys = append(keys, fmt.Sprint(k))
	}
	if len(keys) > 0 {
		msg.SetKeys(keys...)
	}
	for k, v := range asObj(spec["properties"]) {
		msg.AddProperty(k, fmt.Sprint(v))
	}
	if spec["group"] != nil {
		msg.SetMessageGroup(str(spec, "group", ""))
	}
	if spec["delay_ms"] != nil {
		deliverAt = nowMs() + integer(spec, "delay_ms", 0)
		msg.SetDelayTimestamp(time.UnixMilli(deliverAt))
	}
	return msg, deliverAt
}

// ------------------------------------------------------------------ the steps

type session struct {
	config     func(group string) *rmq.Config
	clientFunc rmq.NewClientFunc
	producer   rmq.Producer
	consumer   rmq.SimpleConsumer
	received   []*rmq.MessageView
	started    []interface{ GracefulStop() error }

	checksMu sync.Mutex
	checks   int
	checked  chan struct{} // signalled on each check, for wait_checks
}

func newSession(args obj) *session {
	endpoint := str(args, "endpoint", "")
	timeout := time.Duration(integer(args, "request_timeout_ms", 5000)) * time.Millisecond
	return &session{
		config: func(group string) *rmq.Config {
			return &rmq.Config{
				Endpoint:      endpoint,
				ConsumerGroup: group,
				// Required: the client signs every request with these (HMAC-SHA1 of the
				// date), and dereferences them unchecked. Empty ones make a signature no
				// broker without ACL looks at.
				Credentials: &credentials.SessionCredentials{},
			}
		},
		// Producers and consumers take their client's options only through the function
		// that makes the client.
		clientFunc: func(config *rmq.Config, opts ...rmq.ClientOption) (rmq.Client, error) {
			return rmq.NewClient(config, append(opts, rmq.WithQueryRouteTimeout(timeout))...)
		},
		checked: make(chan struct{}, 1),
	}
}

// resolution maps a checker's answer to the client's, and its name.
func resolution(checker any, body string) (rmq.TransactionResolution, string) {
	answer, ok := checker.(string)
	if !ok {
		spec := asObj(checker)
		answer = str(asObj(spec["bodies"]), body, str(spec, "default", "UNKNOWN"))
	}
	switch answer {
	case "COMMIT":
		return rmq.COMMIT, answer
	case "ROLLBACK":
		return rmq.ROLLBACK, answer
	default:
		return rmq.UNKNOWN, "UNKNOWN"
	}
}

func (s *session) startProducer(step obj) error {
	var topics []string
	for _, t := range asList(step["topics"]) {
		topics = append(topics, fmt.Sprint(t))
	}
	opts := []rmq.ProducerOption{rmq.WithTopics(topics...), rmq.WithClientFunc(s.clientFunc)}
	if checker := step["checker"]; checker != nil {
		opts = append(opts, rmq.WithTransactionChecker(&rmq.TransactionChecker{
			Check: func(view *rmq.MessageView) rmq.TransactionResolution {
				info := describe(view, -1)
				answer, name := resolution(checker, string(view.GetBody()))
				info["answer"] = name
				emit("checked", info)
				s.checksMu.Lock()
				s.checks++
				s.checksMu.Unlock()
				select {
				case s.checked <- struct{}{}:
				default: // a wakeup is pending already
				}
				return answer
			},
		}))
	}
	producer, err := rmq.NewProducer(s.config(""), opts...)
	if err != nil {
		return err
	}
	// Start fetches the topics' routes: it fails as the Java builder's build() does.
	if err := producer.Start(); err != nil {
		return err
	}
	s.producer = producer
	s.started = append(s.started, producer)
	emit("producer_started", nil)
	return nil
}

func (s *session) send(step obj) {
	topic := str(step, "topic", "")
	for k, m := range asList(step["messages"]) {
		spec := asObj(m)
		msg, deliverAt := message(topic, spec)
		receipts, err := s.producer.Send(context.Background(), msg)
		if err != nil {
			out := errorFields(err)
			out["index"], out["body"] = k, spec["body"]
			emit("send_error", out)
			continue
		}
		var deliverAtMs any
		if deliverAt != 0 {
			deliverAtMs = deliverAt
		}
		emit("sent", fields{
			"index":         k,
			"body":          spec["body"],
			"message_id":    receipts[0].MessageID,
			"offset":        receipts[0].Offset,
			"deliver_at_ms": deliverAtMs,
			"at_ms":         nowMs(),
		})
	}
}

func (s *session) transaction(step obj) error {
	spec := asObj(step["message"])
	tx := s.producer.BeginTransaction()
	msg, _ := message(str(step, "topic", ""), spec)
	receipts, err := s.producer.SendWithTransaction(context.Background(), msg, tx)
	if err != nil {
		return err
	}
	emit("sent", fields{
		"body":           spec["body"],
		"message_id":     receipts[0].MessageID,
		"transaction_id": receipts[0].TransactionId,
		"offset":         receipts[0].Offset,
	})
	end := str(step, "end", "commit")
	switch end {
	case "commit":
		err = tx.Commit()
	case "rollback":
		err = tx.RollBack()
	}
	if err != nil { // never, in v5.1.2: kept for a client that reports it
		out := errorFields(err)
		out["end"] = end
		emit("end_error", out)
		return nil
	}
	emit("ended", fields{"end": end, "body": spec["body"]})
	return nil
}

func (s *session) waitChecks(step obj) {
	deadline := time.Now().Add(seconds(number(step, "within_s", 10)))
	want := int(integer(step, "count", 1))
	for {
		s.checksMu.Lock()
		got := s.checks
		s.checksMu.Unlock()
		left := time.Until(deadline)
		if got >= want || left <= 0 {
			emit("checks", fields{"count": got})
			return
		}
		select {
		case <-s.checked:
		case <-time.After(min(left, 200*time.Millisecond)):
		}
	}
}

func subscription(step obj) (map[string]*rmq.FilterExpression, error) {
	expression := str(step, "expression", "*")
	var kind rmq.FilterExpressionType
	switch t := str(step, "expression_type", "TAG"); t {
	case "TAG":
		kind = rmq.TAG
	case "SQL92":
		kind = rmq.SQL92
	default:
		return nil, fmt.Errorf("unknown expression_type %s", t)
	}
	return map[string]*rmq.FilterExpression{
		str(step, "topic", ""): rmq.NewFilterExpressionWithType(expression, kind),
	}, nil
}

func (s *session) simple(step obj) error {
	expressions, err := subscription(step)
	if err != nil {
		return err
	}
	consumer, err := rmq.NewSimpleConsumer(s.config(str(step, "group", "")),
		rmq.WithAwaitDuration(seconds(number(step, "await_s", 1))),
		rmq.WithSubscriptionExpressions(expressions),
		rmq.WithClientFuncForSimpleConsumer(s.clientFunc),
	)
	if err != nil {
		return err
	}
	if err := consumer.Start(); err != nil {
		return err
	}
	s.consumer = consumer
	s.started = append(s.started, consumer)
	emit("simple_started", nil)
	return nil
}

// notFound tells the client's answer to a receive that found nothing.
func notFound(err error) bool {
	rpcErr, ok := rmq.AsErrRpcStatus(err)
	return ok && rpcErr.GetCode() == int32(v2.Code_MESSAGE_NOT_FOUND)
}

func (s *session) receive(step obj) {
	until := int(integer(step, "until", 0))
	untilTotal := int(integer(step, "until_total", 0))
	deadline := time.Now().Add(seconds(number(step, "within_s", 0)))
	invisible := seconds(number(step, "invisible_s", 10))
	got, calls := 0, 0
	for {
		calls++
		batch, err := s.consumer.Receive(context.Background(), int32(integer(step, "max", 16)), invisible)
		if err != nil && !notFound(err) {
			emit("receive_error", errorFields(err))
			time.Sleep(200 * time.Millisecond) // a refusal comes back at once: not a busy loop
		}
		for _, view := range batch {
			index := len(s.received)
			s.received = append(s.received, view)
			got++
			emit("msg", describe(view, index))
			if flag(step, "ack") {
				s.ack(index)
			}
		}
		enough := got >= until && len(s.received) >= untilTotal
		if enough || !time.Now().Before(deadline) {
			break
		}
	}
	emit("received", fields{"count": got, "calls": calls})
}

func (s *session) ack(index int) {
	if err := s.consumer.Ack(context.Background(), s.received[index]); err != nil {
		out := errorFields(err)
		out["index"] = index
		emit("ack_error", out)
		return
	}
	emit("acked", fields{"index": index})
}

func (s *session) acks(step obj) {
	if indices, ok := step["indices"].(string); ok && indices == "all" {
		for k := range s.received {
			s.ack(k)
		}
		return
	}
	for _, k := range asList(step["indices"]) {
		s.ack(int(k.(float64)))
	}
}

func (s *session) change(step obj) {
	index := int(integer(step, "index", 0))
	view := s.received[index]
	old := view.GetReceiptHandle()
	// The client puts the answer's new receipt handle into the view.
	if err := s.consumer.ChangeInvisibleDuration(view, seconds(number(step, "invisible_s", 10))); err != nil {
		out := errorFields(err)
		out["index"] = index
		emit("change_error", out)
		return
	}
	emit("changed", fields{"index": index, "old": old, "new": view.GetReceiptHandle()})
}

func (s *session) close() {
	for k := len(s.started) - 1; k >= 0; k-- {
		if err := s.started[k].GracefulStop(); err != nil {
			emit("shutdown_error", errorFields(err))
		}
	}
}

func (s *session) run(step obj) error {
	switch op := str(step, "op", ""); op {
	case "producer":
		return s.startProducer(step)
	case "send":
		s.send(step)
	case "transaction":
		return s.transaction(step)
	case "wait_checks":
		s.waitChecks(step)
	case "simple":
		return s.simple(step)
	case "receive":
		s.receive(step)
	case "ack":
		s.acks(step)
	case "change":
		s.change(step)
	case "sleep":
		time.Sleep(seconds(number(step, "s", 0)))
	case "push":
		return fmt.Errorf("push: %s %s has no PushConsumer", clientModule, clientVersion())
	default:
		return fmt.Errorf("unknown op %s", op)
	}
	return nil
}

// ------------------------------------------------------------------ the digest on the wire

// wireDigest is a received message's body digest as the broker sent it, and whether it is
// the digest of the body the broker sent, hex compared in any case. The client (v5.1.2)
// compares its own lower-case hex exactly; RocketMQ's proxy sends the MD5 in upper case
// (BinaryUtil.generateMd5), so the client's "corrupted" is no verdict on the broker: this is.
type wireDigest struct {
	Type     string `json:"type"`
	Checksum string `json:"checksum"`
	Matches  bool   `json:"matches"`
}

// wireDigests holds each received message's wireDigest by its receipt handle.
var wireDigests sync.Map

// tapDigests is a stream interceptor: it notes the digest of each message a receive
// brings, before the client decodes (and maybe inflates) it.
func tapDigests(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	stream, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return digestTap{stream}, nil
}

type digestTap struct{ grpc.ClientStream }

func (t digestTap) RecvMsg(m any) error {
	err := t.ClientStream.RecvMsg(m)
	if response, ok := m.(*v2.ReceiveMessageResponse); ok && err == nil && response.GetMessage() != nil {
		msg := response.GetMessage()
		digest := msg.GetSystemProperties().GetBodyDigest()
		var want string
		switch digest.GetType() {
		case v2.DigestType_CRC32:
			want = strconv.FormatUint(uint64(crc32.ChecksumIEEE(msg.GetBody())), 16)
		case v2.DigestType_MD5:
			sum := md5.Sum(msg.GetBody())
			want = hex.EncodeToString(sum[:])
		case v2.DigestType_SHA1:
			sum := sha1.Sum(msg.GetBody())
			want = hex.EncodeToString(sum[:])
		}
		wireDigests.Store(msg.GetSystemProperties().GetReceiptHandle(), wireDigest{
			Type:     digest.GetType().String(),
			Checksum: digest.GetChecksum(),
			Matches:  want != "" && strings.EqualFold(want, digest.GetChecksum()),
		})
	}
	return err
}

// ------------------------------------------------------------------ the client's plumbing

// configureClient sends the client's logs under $HOME, taps the digests of received
// messages, and dials in plaintext when asked (see the header); it returns whether TLS is on.
// The exported NewRpcClient hook is the one way in: the client hands no options of its own
// to the connections it dials.
func configureClient(args obj) bool {
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	if os.Getenv(rmq.CLIENT_LOG_ROOT) == "" {
		os.Setenv(rmq.CLIENT_LOG_ROOT, filepath.Join(home, "logs", "rocketmqlogs"))
		rmq.ResetLogger() // the package's init made its logger from the environment already
	}
	grpcLog := filepath.Join(os.Getenv(rmq.CLIENT_LOG_ROOT), "rocketmq_grpc_go.log")
	conn := []rmq.ConnOption{
		rmq.WithZapLogger(zaplog.New(zaplog.WithFileName(grpcLog))),
		rmq.WithDialOptions(grpc.WithChainStreamInterceptor(tapDigests)),
	}
	tls := true
	if ssl, ok := args["ssl"].(bool); ok && !ssl {
		// Later dial options win: this one replaces the client's TLS credentials.
		conn = append(conn, rmq.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials())))
		tls = false
	}
	dial := rmq.NewRpcClient
	rmq.NewRpcClient = func(target string, opts ...rmq.RpcClientOption) (rmq.RpcClient, error) {
		return dial(target, append([]rmq.RpcClientOption{rmq.WithRpcClientConnOption(conn...)}, opts...)...)
	}
	return tls
}

// watchdog ends the program at its deadline, whatever the client is blocked in.
func watchdog(deadlineS float64) {
	time.AfterFunc(seconds(deadlineS), func() {
		setLabel("")
		emit("done", fields{"error": fmt.Sprintf("deadline of %g s passed", deadlineS)})
		os.Exit(3)
	})
}

func readArgs() (obj, error) {
	line, err := bufio.NewReader(os.Stdin).ReadBytes('\n')
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		return nil, errors.New("no arguments on stdin")
	}
	var args obj
	if err := json.Unmarshal(line, &args); err != nil {
		return nil, fmt.Errorf("arguments: %w", err)
	}
	return args, nil
}

func main() {
	command := "run"
	if len(os.Args) > 1 {
		command = os.Args[1]
	}
	switch command {
	case "version":
		emit("version", fields{"client_version": clientVersion()})
		return
	case "run":
	default:
		fmt.Fprintln(os.Stderr, "usage: go5client run|version")
		os.Exit(2)
	}
	args, err := readArgs()
	if err != nil {
		emit("done", fields{"error": err.Error()})
		os.Exit(2)
	}
	watchdog(number(args, "deadline_s", 60))
	// wire_version is what the client calls itself on the wire (x-mq-client-version).
	emit("started", fields{
		"client_version": clientVersion(),
		"wire_version":   metadata.VersionValue,
		"ssl":            args["ssl"],
	})
	emit("configured", fields{"ssl_enabled": configureClient(args)})
	s := newSession(args)
	for k, v := range asList(args["steps"]) {
		step := asObj(v)
		setLabel(str(step, "label", fmt.Sprintf("%d-%s", k, str(step, "op", ""))))
		emit("step", fields{"op": step["op"]})
		if err := s.run(step); err != nil {
			out := errorFields(err)
			emit("done", fields{"error": fmt.Sprintf("%s: %s", out["type"], out["text"]), "code": out["code"]})
			os.Exit(1)
		}
	}
	setLabel("")
	s.close()
	s.checksMu.Lock()
	checks := s.checks
	s.checksMu.Unlock()
	emit("done", fields{"received": len(s.received), "checks": checks})
	os.Exit(0)
}
