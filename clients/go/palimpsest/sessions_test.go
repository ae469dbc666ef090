package palimpsest

import (
	"bytes"
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"

	pb "palimpsest.dev/go/gen/palimpsest/v1"
)

func TestRepairForkAndListSessionsPaged(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	id := sid()
	labels := map[string]string{"suite": id}
	must[*pb.Session](t)(c.CreateSession(ctx, id, labels))
	must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{TurnStart(1), UserMessage("hi", "", nil, Placement{})}, AppendOptions{}))
	closers := must[[]*pb.SessionEvent](t)(c.Repair(ctx, id))
	if len(closers) == 0 || closers[len(closers)-1].GetType() != "turn/end" {
		t.Fatalf("closers %v", closers)
	}
	if again := must[[]*pb.SessionEvent](t)(c.Repair(ctx, id)); len(again) != 0 {
		t.Fatalf("a balanced log was repaired again: %v", again)
	}
	head := must[int64](t)(c.Head(ctx, id))
	child := must[*pb.Session](t)(c.Fork(ctx, id, ForkOptions{ChildID: id + "-child", Labels: labels}))
	if child.GetId() != id+"-child" || int64(child.GetSeedLength()) != head+1 || child.GetParentSession() != id {
		t.Fatalf("child %v", child)
	}
	must[*pb.Session](t)(c.CreateSession(ctx, id+"-third", labels))
	got := must[[]*pb.Session](t)(c.ListSessions(ctx, ListOptions{Labels: labels, PageSize: 1}))
	var ids []string
	for _, s := range got {
		ids = append(ids, s.GetId())
	}
	sort.Strings(ids)
	if !reflect.DeepEqual(ids, []string{id, id + "-child", id + "-third"}) {
		t.Fatalf("listed %v", ids)
	}
	_, err := c.Fork(ctx, id, ForkOptions{ChildID: id + "-child"})
	if e := asErr(t, err); e.Reason != "SESSION_ALREADY_EXISTS" {
		t.Fatalf("%+v", e)
	}
}

func TestExportThenImport(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	id := sid()
	must[*pb.Session](t)(c.CreateSession(ctx, id, nil))
	must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{TurnStart(1), UserMessage("hi", "u1", nil, Placement{}), TurnEnd(1, "completed")}, AppendOptions{}))
	var file bytes.Buffer
	if err := c.ExportSession(ctx, id, &file); err != nil {
		t.Fatal(err)
	}
	// The header, three events and the session metadata line (labels, pairing guard).
	if lines := strings.Count(file.String(), "\n"); lines != 5 {
		t.Fatalf("%d lines:\n%s", lines, file.String())
	}
	copyID := id + "-copy"
	s, tail, err := c.ImportSession(ctx, bytes.NewReader(file.Bytes()), ImportOptions{SessionID: copyID})
	if err != nil || s.GetId() != copyID || s.GetHeadSeq() != 2 || tail != 0 {
		t.Fatalf("%v %d %v", s, tail, err)
	}
	if a, b := must[[]int64](t)(c.GetSurface(ctx, id)), must[[]int64](t)(c.GetSurface(ctx, copyID)); !reflect.DeepEqual(a, b) {
		t.Fatalf("surfaces %v and %v", a, b)
	}
	// A second import under the same id is refused and leaves the copy as it was.
	_, _, err = c.ImportSession(ctx, bytes.NewReader(file.Bytes()), ImportOptions{SessionID: copyID})
	if e := asErr(t, err); e.Reason != "SESSION_ALREADY_EXISTS" {
		t.Fatalf("%+v", e)
	}
	if h := must[int64](t)(c.Head(ctx, copyID)); h != 2 {
		t.Fatalf("head %d", h)
	}
	// A file without a session header is refused and leaves no session behind.
	_, _, err = c.ImportSession(ctx, strings.NewReader("not json\n"), ImportOptions{SessionID: id + "-bad"})
	if e := asErr(t, err); e.Reason != "HEADER_INVALID" {
		t.Fatalf("%+v", e)
	}
	_, err = c.GetSession(ctx, id+"-bad")
	if e := asErr(t, err); e.Reason != "SESSION_NOT_FOUND" {
		t.Fatalf("%+v", e)
	}
}
