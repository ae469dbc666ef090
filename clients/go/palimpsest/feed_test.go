package palimpsest

import (
	"context"
	"reflect"
	"testing"
	"time"

	pb "palimpsest.dev/go/gen/palimpsest/v1"
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
