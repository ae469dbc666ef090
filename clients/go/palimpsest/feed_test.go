package palimpsest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pb "palimpsest.dev/go/gen/palimpsest/v1"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// nextChange is the next change of the feed (caught_up and heartbeats skipped).
func nextChange(t *testing.T, f *Feed) FeedItem {
	t.Helper()
	for {
		it, err := f.Next()
		if err != nil {
			t.Fatal(err)
		}
		if it.Kind != "caught_up" && it.Kind != "heartbeat" {
			return it
		}
	}
}

// untilCaughtUp is the changes before the next caught_up.
func untilCaughtUp(t *testing.T, f *Feed) []FeedItem {
	t.Helper()
	var out []FeedItem
	for {
		it, err := f.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch it.Kind {
		case "caught_up":
			return out
		case "heartbeat":
		default:
			out = append(out, it)
		}
	}
}

func TestUpdateSessionSetsAndRemovesLabels(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	id := sid()
	s := must[*pb.Session](t)(c.CreateSession(ctx, id, map[string]string{"team": "a", "stage": "draft"}))
	v0 := s.GetMetadataVersion()
	s = must[*pb.Session](t)(c.UpdateSession(ctx, id, UpdateOptions{SetLabels: map[string]string{"stage": "review", "owner": "kim"}, RemoveLabels: []string{"team"}}))
	if !reflect.DeepEqual(s.GetLabels(), map[string]string{"stage": "review", "owner": "kim"}) || s.GetMetadataVersion() <= v0 {
		t.Fatalf("%v v%d", s.GetLabels(), s.GetMetadataVersion())
	}
	s = must[*pb.Session](t)(c.UpdateSession(ctx, id, UpdateOptions{RemoveLabels: []string{"owner"}, ExpectedVersion: ExpectVersion(s.GetMetadataVersion())}))
	if got := must[*pb.Session](t)(c.GetSession(ctx, id)).GetLabels(); !reflect.DeepEqual(got, map[string]string{"stage": "review"}) || !reflect.DeepEqual(s.GetLabels(), got) {
		t.Fatalf("%v", got)
	}
	_, err := c.UpdateSession(ctx, id, UpdateOptions{SetLabels: map[string]string{"stage": "x"}, RemoveLabels: []string{"stage"}})
	if e := asErr(t, err); e.CodeName != "INVALID_ARGUMENT" {
		t.Fatalf("%v", e)
	}
	_, err = c.UpdateSession(ctx, id+"-missing", UpdateOptions{SetLabels: map[string]string{"a": "b"}})
	if e := asErr(t, err); e.CodeName != "NOT_FOUND" || e.Reason != "SESSION_NOT_FOUND" {
		t.Fatalf("%v", e)
	}
}

func TestStaleUpdateIsRefusedAndChangesNothing(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	id := sid()
	s := must[*pb.Session](t)(c.CreateSession(ctx, id, map[string]string{"stage": "draft", "team": "a"}))
	must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{UserMessage("hi", "", nil, Placement{})}, AppendOptions{}))
	stale := s.GetMetadataVersion()
	now := must[*pb.Session](t)(c.UpdateSession(ctx, id, UpdateOptions{SetLabels: map[string]string{"stage": "review"}, ExpectedVersion: ExpectVersion(stale)}))
	_, err := c.UpdateSession(ctx, id, UpdateOptions{SetLabels: map[string]string{"stage": "done"}, RemoveLabels: []string{"team"}, ExpectedVersion: ExpectVersion(stale)})
	if e := asErr(t, err); e.CodeName != "ABORTED" || e.Reason != "METADATA_VERSION_MISMATCH" {
		t.Fatalf("%v", e)
	}
	after := must[*pb.Session](t)(c.GetSession(ctx, id))
	if !reflect.DeepEqual(after.GetLabels(), map[string]string{"stage": "review", "team": "a"}) || after.GetMetadataVersion() != now.GetMetadataVersion() {
		t.Fatalf("%v v%d", after.GetLabels(), after.GetMetadataVersion())
	}
	if h := must[int64](t)(c.Head(ctx, id)); h != 0 {
		t.Fatalf("head %d", h)
	}
}

func TestFeedReportsEveryKindOfChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dial(t, addr(t))
	id := sid()
	suite := map[string]string{"suite": id}
	f := c.SubscribeSessions(ctx, SubscribeSessionsOptions{FromNow: true, Selector: suite})
	defer f.Close()
	if it, err := f.Next(); err != nil || it.Kind != "caught_up" {
		t.Fatalf("%+v %v", it, err)
	}
	must[*pb.Session](t)(c.CreateSession(ctx, id, suite))
	must[*pb.Session](t)(c.CreateSession(ctx, id+"-other", nil)) // not selected: never on this feed
	must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{TurnStart(1), UserMessage("hi", "", nil, Placement{}), UserMessage("again", "", nil, Placement{})}, AppendOptions{}))
	must[*pb.Session](t)(c.UpdateSession(ctx, id, UpdateOptions{SetLabels: map[string]string{"stage": "review"}}))
	if err := c.DeleteSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	created, appended, changed, deleted := nextChange(t, f), nextChange(t, f), nextChange(t, f), nextChange(t, f)
	if created.Kind != "created" || created.SessionID != id || created.HeadSeq != -1 || !reflect.DeepEqual(created.Labels, suite) || created.CreatedAt <= 0 {
		t.Fatalf("created %+v", created)
	}
	if appended.Kind != "appended" || appended.HeadSeq != 2 || appended.EventCount != 3 || appended.SurfaceLength != 2 ||
		!reflect.DeepEqual(appended.EventTypes, []string{"turn/start", "user/message"}) {
		t.Fatalf("appended %+v", appended)
	}
	if changed.Kind != "labels_changed" || !reflect.DeepEqual(changed.PreviousLabels, suite) ||
		!reflect.DeepEqual(changed.Labels, map[string]string{"suite": id, "stage": "review"}) {
		t.Fatalf("labels_changed %+v", changed)
	}
	if deleted.Kind != "deleted" || deleted.SessionID != id {
		t.Fatalf("deleted %+v", deleted)
	}
	if !(created.Position < appended.Position && appended.Position < changed.Position && changed.Position < deleted.Position) {
		t.Fatalf("positions %d %d %d %d", created.Position, appended.Position, changed.Position, deleted.Position)
	}
}

type change struct {
	Position uint64
	Kind, ID string
	HeadSeq  int64
}

func changes(items []FeedItem) []change {
	out := make([]change, len(items))
	for i, it := range items {
		out[i] = change{it.Position, it.Kind, it.SessionID, it.HeadSeq}
	}
	return out
}

func TestFeedResumesExactlyOnceAfterDroppedConnections(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dial(t, addr(t))
	id := sid()
	suite := map[string]string{"suite": id}
	first := c.SubscribeSessions(ctx, SubscribeSessionsOptions{FromNow: true, Selector: suite})
	start, err := first.Next()
	first.Close()
	if err != nil || start.Kind != "caught_up" {
		t.Fatalf("%+v %v", start, err)
	}
	p := startProxy(t, addr(t))
	sc := dial(t, p.ln.Addr().String())
	f := sc.SubscribeSessions(ctx, SubscribeSessionsOptions{After: &start.Position, Selector: suite})
	defer f.Close()
	if got := untilCaughtUp(t, f); len(got) != 0 {
		t.Fatalf("%+v", got)
	}
	var seen []FeedItem
	var want []change
	for round := 0; round < 3; round++ {
		s := id + "-" + string(rune('a'+round))
		must[*pb.Session](t)(c.CreateSession(ctx, s, suite))
		must[[]int64](t)(c.Append(ctx, s, []*pb.EventInput{UserMessage("x", "", nil, Placement{})}, AppendOptions{}))
		seen = append(seen, nextChange(t, f), nextChange(t, f))
		if p.drop() < 1 { // cut the connection; the next change comes over a new one
			t.Fatal("nothing to drop")
		}
		must[[]int64](t)(c.Append(ctx, s, []*pb.EventInput{UserMessage("y", "", nil, Placement{})}, AppendOptions{}))
		seen = append(seen, nextChange(t, f))
		want = append(want, change{0, "created", s, -1}, change{0, "appended", s, 0}, change{0, "appended", s, 1})
	}
	got := changes(seen)
	for i := range got {
		want[i].Position = got[i].Position
	}
	if !reflect.DeepEqual(got, want) || f.Subscriptions < 4 {
		t.Fatalf("got %+v over %d subscriptions, want %+v", got, f.Subscriptions, want)
	}
	// The same range read again in one piece: the same items, each once, in the same order.
	again := c.SubscribeSessions(ctx, SubscribeSessionsOptions{After: &start.Position, Selector: suite})
	defer again.Close()
	if all := changes(untilCaughtUp(t, again)); !reflect.DeepEqual(all, got) {
		t.Fatalf("read again %+v, resumed %+v", all, got)
	}
}

func TestFeedContinuesAfterTheLastPosition(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dial(t, addr(t))
	id := sid()
	suite := map[string]string{"suite": id}
	f := c.SubscribeSessions(ctx, SubscribeSessionsOptions{FromNow: true, Selector: suite})
	if it, err := f.Next(); err != nil || it.Kind != "caught_up" {
		t.Fatalf("%+v %v", it, err)
	}
	must[*pb.Session](t)(c.CreateSession(ctx, id, suite))
	created := nextChange(t, f)
	f.Close() // nothing is read while no one subscribes
	must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{UserMessage("while away", "", nil, Placement{})}, AppendOptions{}))
	must[*pb.Session](t)(c.UpdateSession(ctx, id, UpdateOptions{SetLabels: map[string]string{"stage": "review"}}))
	last := *f.Position()
	if created.Kind != "created" || last != created.Position {
		t.Fatalf("%+v, position %d", created, last)
	}
	resumed := c.SubscribeSessions(ctx, SubscribeSessionsOptions{After: &last, Selector: suite})
	defer resumed.Close()
	missed := changes(untilCaughtUp(t, resumed))
	if len(missed) != 2 || missed[0].Kind != "appended" || missed[0].HeadSeq != 0 || missed[1].Kind != "labels_changed" || missed[0].Position <= last {
		t.Fatalf("%+v", missed)
	}
	if err := c.DeleteSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	if d := nextChange(t, resumed); d.Kind != "deleted" || d.SessionID != id {
		t.Fatalf("%+v", d)
	}
}

func TestFeedWithoutReconnectReturnsUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := startProxy(t, addr(t))
	sc := dial(t, p.ln.Addr().String())
	f := sc.SubscribeSessions(ctx, SubscribeSessionsOptions{FromNow: true, Selector: map[string]string{"suite": sid()}, NoReconnect: true})
	defer f.Close()
	if it, err := f.Next(); err != nil || it.Kind != "caught_up" {
		t.Fatalf("%+v %v", it, err)
	}
	p.drop()
	_, err := f.Next()
	if e := asErr(t, err); e.CodeName != "UNAVAILABLE" {
		t.Fatalf("%v", e)
	}
}

// serverProcess is `palimpsest serve` of this repository (its built dist/) on a
// SQLite file, as a child process: restart stops it with SIGTERM (open streams
// end with UNAVAILABLE / SERVER_SHUTDOWN) and starts it again on the same port
// and database.
type serverProcess struct {
	t       *testing.T
	db      string
	address string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd has exited
}

// listening watches the server's output for its address.
type listening struct {
	mu   sync.Mutex
	out  strings.Builder
	addr chan string
	sent bool
}

func (l *listening) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.out.Write(p)
	const prefix = "palimpsest listening on "
	if s := l.out.String(); !l.sent && strings.Contains(s, prefix) {
		rest := s[strings.Index(s, prefix)+len(prefix):]
		if j := strings.IndexByte(rest, '\n'); j >= 0 {
			l.sent = true
			l.addr <- strings.TrimSpace(rest[:j])
		}
	}
	return len(p), nil
}

func startServerProcess(t *testing.T) *serverProcess {
	s := &serverProcess{t: t, db: filepath.Join(t.TempDir(), "palimpsest.db")}
	s.address = s.start("127.0.0.1:0")
	t.Cleanup(s.stop)
	return s
}

func (s *serverProcess) start(listen string) string {
	node := os.Getenv("PALIMPSEST_NODE")
	if node == "" {
		node = "node"
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		s.t.Fatal(err)
	}
	out := &listening{addr: make(chan string, 1)}
	s.cmd = exec.Command(node, filepath.Join(root, "bin", "palimpsest.mjs"), "serve", "--listen", listen, "--db", s.db, "--log-level", "silent")
	s.cmd.Dir, s.cmd.Stdout, s.cmd.Stderr = root, out, out
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	exited := make(chan struct{})
	s.exited = exited
	go func() { _ = s.cmd.Wait(); close(exited) }()
	select {
	case a := <-out.addr:
		return a
	case <-exited:
		s.t.Fatalf("the server exited: %s", out.out.String())
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		s.t.Fatalf("the server did not start: %s", out.out.String())
	}
	return ""
}

func (s *serverProcess) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		s.t.Error("the server did not stop within 30 s of SIGTERM")
	}
}

func (s *serverProcess) restart() {
	s.stop()
	s.start(s.address)
}

func TestFeedResumesAcrossAServerRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := startServerProcess(t)
	fast := grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, MaxDelay: 250 * time.Millisecond}})
	c := dial(t, srv.address, WithDialOptions(fast))
	id := sid()
	f := c.SubscribeSessions(ctx, SubscribeSessionsOptions{MaxBackoff: 250 * time.Millisecond})
	defer f.Close()
	if got := untilCaughtUp(t, f); len(got) != 0 {
		t.Fatalf("%+v", got)
	}
	must[*pb.Session](t)(c.CreateSession(ctx, id, nil))
	must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{UserMessage("before", "", nil, Placement{})}, AppendOptions{}))
	seen := []FeedItem{nextChange(t, f), nextChange(t, f)}
	// SIGTERM: the stream ends with UNAVAILABLE / SERVER_SHUTDOWN; then the same port and database.
	srv.restart()
	must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{UserMessage("after", "", nil, Placement{})}, AppendOptions{}))
	if err := c.DeleteSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	seen = append(seen, nextChange(t, f), nextChange(t, f))
	got := changes(seen)
	want := []change{{got[0].Position, "created", id, -1}, {got[1].Position, "appended", id, 0}, {got[2].Position, "appended", id, 1}, {got[3].Position, "deleted", id, 1}}
	if !reflect.DeepEqual(got, want) || f.Subscriptions < 2 {
		t.Fatalf("got %+v over %d subscriptions", got, f.Subscriptions)
	}
	// Positions survive the restart: the whole feed read again is the same items, each once.
	again := c.SubscribeSessions(ctx, SubscribeSessionsOptions{})
	defer again.Close()
	if all := changes(untilCaughtUp(t, again)); !reflect.DeepEqual(all, got) {
		t.Fatalf("read again %+v, resumed %+v", all, got)
	}
}

// rawKinds reads a raw SubscribeSessions stream up to caught_up: the kinds of its messages and the batch's changes.
func rawKinds(t *testing.T, ctx context.Context, c *Client, req *pb.SubscribeSessionsRequest) ([]string, []*pb.SessionChange) {
	t.Helper()
	sctx, cancel := context.WithCancel(c.ctx(ctx))
	defer cancel()
	stream, err := c.Raw.SubscribeSessions(sctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var batch []*pb.SessionChange
	for {
		res, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		switch k := res.Kind.(type) {
		case *pb.SubscribeSessionsResponse_Change:
			kinds = append(kinds, "change")
		case *pb.SubscribeSessionsResponse_Changes:
			kinds = append(kinds, "changes")
			batch = append(batch, k.Changes.GetChanges()...)
			if last := k.Changes.GetChanges(); res.GetPosition() != last[len(last)-1].GetPosition() {
				t.Fatalf("batch position %d", res.GetPosition())
			}
		case *pb.SubscribeSessionsResponse_CaughtUp:
			return append(kinds, "caught_up"), batch
		}
	}
}

func TestFeedBatchIsReturnedOneChangeAtATimeAndResumesAfterAnyOfThem(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dial(t, addr(t))
	id := sid()
	suite := map[string]string{"suite": id}
	f := c.SubscribeSessions(ctx, SubscribeSessionsOptions{FromNow: true, Selector: suite})
	start, err := f.Next()
	if err != nil || start.Kind != "caught_up" {
		t.Fatalf("%+v %v", start, err)
	}
	f.Close()
	for i := 0; i < 4; i++ {
		must[*pb.Session](t)(c.CreateSession(ctx, id+"-"+string(rune('a'+i)), suite))
	}
	after := start.Position
	// With batch the four changes read together come in one message; without it (an older client) one per message.
	kinds, batch := rawKinds(t, ctx, c, &pb.SubscribeSessionsRequest{After: &after, LabelSelector: suite, Batch: true})
	if !reflect.DeepEqual(kinds, []string{"changes", "caught_up"}) || len(batch) != 4 {
		t.Fatalf("%v %d", kinds, len(batch))
	}
	if kinds, _ := rawKinds(t, ctx, c, &pb.SubscribeSessionsRequest{After: &after, LabelSelector: suite}); !reflect.DeepEqual(kinds, []string{"change", "change", "change", "change", "caught_up"}) {
		t.Fatalf("%v", kinds)
	}
	all := c.SubscribeSessions(ctx, SubscribeSessionsOptions{After: &after, Selector: suite})
	items := untilCaughtUp(t, all)
	all.Close()
	if len(items) != 4 {
		t.Fatalf("%+v", items)
	}
	for k, it := range items {
		if it.SessionID != batch[k].GetSessionId() || it.Position != batch[k].GetPosition() {
			t.Fatalf("%d: %+v vs %v", k, it, batch[k])
		}
		p := it.Position
		rest := c.SubscribeSessions(ctx, SubscribeSessionsOptions{After: &p, Selector: suite})
		got := untilCaughtUp(t, rest)
		rest.Close()
		if len(got) != 3-k || (len(got) > 0 && got[0].Position != items[k+1].Position) {
			t.Fatalf("after %d: %+v", p, got)
		}
	}
}
