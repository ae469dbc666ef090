package palimpsest

// Run against a real server: PALIMPSEST_ADDR=HOST:PORT (clients/run.sh test go
// ADDR; test/e2e/go-client.test.ts runs it in the suite).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "palimpsest.dev/go/gen/palimpsest/v1"

	"google.golang.org/grpc"
)

func addr(t *testing.T) string {
	a := os.Getenv("PALIMPSEST_ADDR")
	if a == "" {
		t.Fatal("PALIMPSEST_ADDR is not set: these tests run against a real server (npx vitest run test/e2e/go-client.test.ts)")
	}
	return a
}

func sid() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "go-" + hex.EncodeToString(b)
}

func dial(t *testing.T, address string, opts ...Option) *Client {
	c, err := Dial(address, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func asErr(t *testing.T, err error) *Error {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("want *Error, got %v", err)
	}
	return pe
}

func TestTurnWithBuilders(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	id := sid()
	must[*pb.Session](t)(c.CreateSession(ctx, id, map[string]string{"client": "go"}))
	batch := []*pb.EventInput{TurnStart(1), StepStart(1, 1), UserMessage("What is here?", "u1", nil, Placement{})}
	batch = append(batch, TextChunks(1, 1, 0, "Let me look.")...)
	batch = append(batch, AssistantMessage(Assistant{Turn: 1, Step: 1, Provider: "p", Model: "m", ID: "a1", Text: "Let me look.",
		ToolCalls: []Block{ToolCallBlock("c1", "ls", "{}")}, Usage: map[string]int{"inputTokens": 1, "outputTokens": 2}, Placement: Citing(3, 4, 5)}))
	call := int64(len(batch))
	batch = append(batch, ToolCall(1, 1, "c1", "ls", "{}"), ToolResult(1, 1, "c1", "README.md", "r1", &call, Placement{}), StepEnd(1, 1), TurnEnd(1, "completed"))
	seqs := must[[]int64](t)(c.Append(ctx, id, batch, AppendOptions{ExpectedLastSeq: Expect(-1)}))
	if len(seqs) != len(batch) || seqs[0] != 0 {
		t.Fatalf("seqs %v", seqs)
	}
	if got := must[[]int64](t)(c.GetSurface(ctx, id)); !reflect.DeepEqual(got, []int64{2, 6, 8}) {
		t.Fatalf("surface %v", got)
	}
	msgs := must[[]map[string]any](t)(c.Messages(ctx, id, false))
	want := `[{"content":[{"text":"What is here?","type":"text"}],"id":"u1","role":"user","source":{"kind":"user"}},` +
		`{"content":[{"text":"Let me look.","type":"text"},{"arguments":"{}","id":"c1","name":"ls","type":"tool-call"}],"id":"a1","role":"assistant","source":{"kind":"model","model":"m","provider":"p"}},` +
		`{"content":[{"content":[{"text":"README.md","type":"text"}],"toolCallId":"c1","type":"tool-result"}],"id":"r1","role":"user","source":{"callId":"c1","kind":"tool"}}]`
	if got, _ := json.Marshal(msgs); string(got) != want {
		t.Fatalf("messages\n got %s\nwant %s", got, want)
	}
	// A prune: same data, other output, same id, replacing the original.
	must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{
		NewEvent("compaction/prune", map[string]any{"shadowedRange": map[string]any{"start": 8, "end": 8}, "shadowedSeqs": []int{8}, "shadowedTokenCount": 2}, false, Placement{}),
		ToolResult(1, 1, "c1", "[pruned]", "r1", nil, Replacing(8, 8, 8)),
	}, AppendOptions{}))
	if got := must[[]int64](t)(c.GetSurface(ctx, id)); !reflect.DeepEqual(got, []int64{2, 6, 12}) {
		t.Fatalf("surface after prune %v", got)
	}
}

func TestErrorsAreDecodedAndLeaveTheLogUntouched(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	id := sid()
	must[*pb.Session](t)(c.CreateSession(ctx, id, nil))
	must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{UserMessage("one", "", nil, Placement{})}, AppendOptions{ExpectedLastSeq: Expect(-1)}))
	_, err := c.Append(ctx, id, []*pb.EventInput{UserMessage("two", "", nil, Placement{})}, AppendOptions{ExpectedLastSeq: Expect(-1)})
	e := asErr(t, err)
	if e.CodeName != "FAILED_PRECONDITION" || e.Reason != "HEAD_MISMATCH" || e.Domain != "palimpsest.dev" || e.Metadata["expected"] != "-1" || e.Metadata["actual"] != "0" {
		t.Fatalf("%+v", e)
	}
	if len(e.Violations) != 1 || e.Violations[0].Kind != "precondition" || e.Violations[0].Type != "HEAD_MISMATCH" {
		t.Fatalf("violations %+v", e.Violations)
	}
	if !IsReason(err, "HEAD_MISMATCH") {
		t.Fatal("IsReason")
	}
	if h := must[int64](t)(c.Head(ctx, id)); h != 0 {
		t.Fatalf("head %d after a rejection", h)
	}
	must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{UserMessage("two", "", nil, Placement{})}, AppendOptions{ExpectedLastSeq: Expect(0)}))

	_, err = c.Append(ctx, id, []*pb.EventInput{UserMessage("ok", "", nil, Placement{}), NewEvent("turn/start", map[string]any{"turn": 1}, true, Placement{})}, AppendOptions{})
	e = asErr(t, err)
	if e.CodeName != "INVALID_ARGUMENT" || e.Reason != "SURFACE_OP_FORBIDDEN" || e.Metadata["index"] != "1" || len(e.Violations) != 1 || e.Violations[0].Field != "events[1]" {
		t.Fatalf("%+v", e)
	}
	if h := must[int64](t)(c.Head(ctx, id)); h != 1 {
		t.Fatalf("head %d after a rejected batch", h)
	}
	_, err = c.GetSurface(ctx, "go-no-such-session")
	if e := asErr(t, err); e.CodeName != "NOT_FOUND" || e.Reason != "SESSION_NOT_FOUND" {
		t.Fatalf("%+v", e)
	}
}

func TestAppendsCarryIdempotencyKeys(t *testing.T) {
	ctx := context.Background()
	var keys []string
	rec := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*pb.AppendEventsRequest); ok {
			keys = append(keys, r.GetIdempotencyKey())
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	c := dial(t, addr(t), WithDialOptions(rec))
	id := sid()
	must[*pb.Session](t)(c.CreateSession(ctx, id, nil))
	must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{UserMessage("a", "", nil, Placement{})}, AppendOptions{}))
	must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{UserMessage("b", "", nil, Placement{})}, AppendOptions{}))
	if len(keys) != 2 || keys[0] == "" || keys[0] == keys[1] {
		t.Fatalf("keys %v", keys)
	}
	batch := []*pb.EventInput{UserMessage("c", "", nil, Placement{})}
	for i := 0; i < 2; i++ {
		if s := must[[]int64](t)(c.Append(ctx, id, batch, AppendOptions{IdempotencyKey: "k"})); !reflect.DeepEqual(s, []int64{2}) {
			t.Fatalf("replayed seqs %v", s)
		}
	}
	if h := must[int64](t)(c.Head(ctx, id)); h != 2 {
		t.Fatalf("head %d", h)
	}
}

func TestTokenRefusedInPlaintextOffLoopback(t *testing.T) {
	if _, err := Dial("10.1.2.3:50051", WithToken("secret")); err == nil {
		t.Fatal("a token in plaintext to a non-loopback address must be refused")
	}
	c, err := Dial("127.0.0.1:1", WithToken("secret"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// proxy forwards TCP to target; refuse closes the next N connections; drop cuts every open one.
type proxy struct {
	ln       net.Listener
	target   string
	refuse   atomic.Int32
	accepted atomic.Int32
	mu       sync.Mutex
	open     []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			if p.refuse.Add(-1) >= 0 {
				conn.Close()
				continue
			}
			p.refuse.Store(0)
			up, err := net.Dial("tcp", target)
			if err != nil {
				conn.Close()
				continue
			}
			p.mu.Lock()
			p.open = append(p.open, conn, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, conn); up.Close(); conn.Close() }()
			go func() { _, _ = io.Copy(conn, up); up.Close(); conn.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.drop() })
	return p
}

func (p *proxy) drop() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.open) / 2
	for _, c := range p.open {
		c.Close()
	}
	p.open = nil
	return n
}

func TestUnavailableIsRetried(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := startProxy(t, addr(t))
	c := dial(t, p.ln.Addr().String())
	p.refuse.Store(1)
	id := sid()
	must[*pb.Session](t)(c.CreateSession(ctx, id, nil))
	if p.accepted.Load() < 2 {
		t.Fatalf("accepted %d: the first attempt was not refused", p.accepted.Load())
	}
	// Refuse first: the client connects as soon as it is dialled.
	p.refuse.Store(1)
	plain := dial(t, p.ln.Addr().String(), WithRetries(1))
	if _, err := plain.GetSurface(ctx, id); asErr(t, err).CodeName != "UNAVAILABLE" {
		t.Fatalf("without retries: %v", err)
	}
}

func nextOp(t *testing.T, s *Subscription, op string) Delta {
	t.Helper()
	for {
		d, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch d.Op {
		case "heartbeat", "caught_up", "checkpoint":
			continue
		}
		if d.Op != op {
			t.Fatalf("want %s, got %+v", op, d)
		}
		return d
	}
}

func TestSubscribeSurfaceResumes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dial(t, addr(t))
	id := sid()
	must[*pb.Session](t)(c.CreateSession(ctx, id, nil))
	must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{UserMessage("before", "", nil, Placement{})}, AppendOptions{}))
	p := startProxy(t, addr(t))
	sc := dial(t, p.ln.Addr().String())
	sub := sc.SubscribeSurface(ctx, id, SubscribeOptions{IncludeMessages: true})
	defer sub.Close()
	d := nextOp(t, sub, "append")
	if d.Seq != 0 || *d.Cursor != 0 || d.Message["id"] == nil {
		t.Fatalf("%+v", d)
	}
	var seen []int64
	for round := 0; round < 3; round++ {
		seqs := must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{
			UserMessage("x", "", nil, Placement{}), UserMessage("y", "", nil, Placement{}), UserMessage("z", "", nil, Placement{})}, AppendOptions{}))
		for _, s := range seqs {
			d := nextOp(t, sub, "append")
			if d.Seq != s || *d.Cursor != s {
				t.Fatalf("want %d, got %+v", s, d)
			}
			seen = append(seen, s)
		}
		if p.drop() < 1 {
			t.Fatal("nothing to drop")
		}
	}
	must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{UserMessage("summary", "", map[string]any{"kind": "plugin", "plugin": "compact"}, Replacing(0, 3, 0, 1, 2, 3))}, AppendOptions{}))
	r := nextOp(t, sub, "replace")
	if r.Seq != 10 || r.Start != 0 || r.End != 3 || !reflect.DeepEqual(r.Shadowed, []int64{0, 1, 2, 3}) {
		t.Fatalf("%+v", r)
	}
	if !reflect.DeepEqual(seen, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}) || sub.Subscriptions < 4 {
		t.Fatalf("seen %v over %d subscriptions", seen, sub.Subscriptions)
	}
}

func TestSubscribeSurfaceEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dial(t, addr(t))
	id := sid()
	must[*pb.Session](t)(c.CreateSession(ctx, id, nil))
	p := startProxy(t, addr(t))
	sc := dial(t, p.ln.Addr().String())
	sub := sc.SubscribeSurface(ctx, id, SubscribeOptions{NoReconnect: true})
	if d, err := sub.Next(); err != nil || d.Op != "caught_up" {
		t.Fatalf("%+v %v", d, err)
	}
	p.drop()
	if _, err := sub.Next(); asErr(t, err).CodeName != "UNAVAILABLE" {
		t.Fatalf("%v", err)
	}
	snap := c.SubscribeSurface(ctx, id, SubscribeOptions{Snapshot: true})
	defer snap.Close()
	if d, err := snap.Next(); err != nil || d.Op != "snapshot" || d.Cursor != nil || len(d.Seqs) != 0 {
		t.Fatalf("%+v %v", d, err)
	}
	if d, err := snap.Next(); err != nil || d.Op != "caught_up" {
		t.Fatalf("%+v %v", d, err)
	}
	if err := c.DeleteSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	_, err := snap.Next()
	if e := asErr(t, err); e.CodeName != "NOT_FOUND" || e.Reason != "SESSION_NOT_FOUND" {
		t.Fatalf("%+v", e)
	}
}

// The retry pattern: a failed append is retried by rebuilding the batch with the same key. The
// builders leave message ids to Append, which derives them from the key and the event's index, so
// the rebuilt batch is the same request and the server answers with the stored seqs.
func TestRetryRebuildsTheBatchWithTheSameKey(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	id := sid()
	must[*pb.Session](t)(c.CreateSession(ctx, id, nil))
	batch := func(answer string) []*pb.EventInput {
		return []*pb.EventInput{TurnStart(1), UserMessage("What is here?", "", nil, Placement{}),
			AssistantMessage(Assistant{Turn: 1, Step: 1, Provider: "p", Model: "m", Text: answer}),
			UserMessage("explicit", "mine", nil, Placement{}), TurnEnd(1, "completed")}
	}
	key := "retry-" + id
	first := must[[]int64](t)(c.Append(ctx, id, batch("README.md"), AppendOptions{IdempotencyKey: key, ExpectedLastSeq: Expect(-1)}))
	again := must[[]int64](t)(c.Append(ctx, id, batch("README.md"), AppendOptions{IdempotencyKey: key, ExpectedLastSeq: Expect(-1)}))
	if !reflect.DeepEqual(first, again) || !reflect.DeepEqual(first, []int64{0, 1, 2, 3, 4}) {
		t.Fatalf("first %v, retry %v", first, again)
	}
	if h := must[int64](t)(c.Head(ctx, id)); h != 4 {
		t.Fatalf("head %d: the retry appended again", h)
	}
	var ids []any
	for _, m := range must[[]map[string]any](t)(c.Messages(ctx, id, false)) {
		ids = append(ids, m["id"])
	}
	want := []any{DerivedID("u", key, 1), DerivedID("a", key, 2), "mine"}
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
	// Another batch under the same key is still refused, and leaves the log as it was.
	_, err := c.Append(ctx, id, batch("src/"), AppendOptions{IdempotencyKey: key})
	if e := asErr(t, err); e.Reason != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("%+v", e)
	}
	if h := must[int64](t)(c.Head(ctx, id)); h != 4 {
		t.Fatalf("head %d after a refused batch", h)
	}
}
