package palimpsest

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	pb "palimpsest.dev/go/gen/palimpsest/v1"
)

func user(text string) []*pb.EventInput {
	return []*pb.EventInput{UserMessage(text, "", nil, Placement{})}
}

func TestWriterPipelinesBatchesInOrder(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	w := must[*Writer](t)(c.AppendStream(ctx))
	// 16 sessions written side by side over one stream, 8 two-event batches each.
	ids := make([]string, 16)
	for i := range ids {
		ids[i] = sid()
		must[*pb.Session](t)(c.CreateSession(ctx, ids[i], nil))
	}
	got := make([][][]int64, len(ids))
	errs := make(chan error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func(i int, id string) {
			defer wg.Done()
			for b := 0; b < 8; b++ {
				seqs, err := w.Append(ctx, id, append(user(fmt.Sprint("q", b)), user(fmt.Sprint("r", b))...), AppendOptions{})
				if err != nil {
					errs <- err
					return
				}
				got[i] = append(got[i], seqs)
			}
		}(i, id)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, id := range ids {
		for b, seqs := range got[i] {
			if want := []int64{int64(2 * b), int64(2*b + 1)}; !reflect.DeepEqual(seqs, want) {
				t.Fatalf("session %d batch %d: seqs %v, want %v", i, b, seqs, want)
			}
		}
		if h := must[int64](t)(c.Head(ctx, id)); h != 15 {
			t.Fatalf("head %d", h)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, ids[0], user("late"), AppendOptions{}); err != ErrWriterClosed {
		t.Fatalf("append after Close: %v", err)
	}
}

func TestWriterRefusedBatchFailsAlone(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	id := sid()
	must[*pb.Session](t)(c.CreateSession(ctx, id, nil))
	w := must[*Writer](t)(c.AppendStream(ctx))
	defer w.Close()
	if seqs := must[[]int64](t)(w.Append(ctx, id, user("one"), AppendOptions{ExpectedLastSeq: Expect(-1)})); !reflect.DeepEqual(seqs, []int64{0}) {
		t.Fatalf("seqs %v", seqs)
	}
	_, err := w.Append(ctx, id, user("two"), AppendOptions{ExpectedLastSeq: Expect(-1)})
	e := asErr(t, err)
	if e.CodeName != "FAILED_PRECONDITION" || e.Reason != "HEAD_MISMATCH" || e.Domain != "palimpsest.dev" || e.Metadata["expected"] != "-1" || e.Metadata["actual"] != "0" {
		t.Fatalf("%+v", e)
	}
	if len(e.Violations) != 1 || e.Violations[0].Kind != "precondition" || e.Violations[0].Type != "HEAD_MISMATCH" {
		t.Fatalf("violations %+v", e.Violations)
	}
	if h := must[int64](t)(c.Head(ctx, id)); h != 0 {
		t.Fatalf("head %d after a refused batch", h)
	}
	if seqs := must[[]int64](t)(w.Append(ctx, id, user("two"), AppendOptions{ExpectedLastSeq: Expect(0)})); !reflect.DeepEqual(seqs, []int64{1}) {
		t.Fatalf("seqs %v after the refused batch", seqs)
	}
	// The same key is the same batch (derived message ids): answered from the stored result.
	first := must[[]int64](t)(w.Append(ctx, id, user("three"), AppendOptions{IdempotencyKey: "go-stream-k"}))
	again := must[[]int64](t)(w.Append(ctx, id, user("three"), AppendOptions{IdempotencyKey: "go-stream-k"}))
	if !reflect.DeepEqual(first, again) || !reflect.DeepEqual(first, must[[]int64](t)(c.Append(ctx, id, user("three"), AppendOptions{IdempotencyKey: "go-stream-k"}))) {
		t.Fatalf("replay %v %v", first, again)
	}
}

func TestWriterCloseWaitsForOutstandingBatches(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	id := sid()
	must[*pb.Session](t)(c.CreateSession(ctx, id, nil))
	w := must[*Writer](t)(c.AppendStream(ctx))
	const n = 40
	var answered atomic.Int32
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := w.Append(ctx, id, user(fmt.Sprint("m", i)), AppendOptions{})
			answered.Add(1)
			errs <- err
		}(i)
	}
	// Every batch is sent (outstanding or already answered) before Close.
	for w.Outstanding()+int(answered.Load()) < n {
		runtime.Gosched()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if o := w.Outstanding(); o != 0 {
		t.Fatalf("%d batches outstanding after Close", o)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if h := must[int64](t)(c.Head(ctx, id)); h != n-1 {
		t.Fatalf("head %d", h)
	}
}

func TestWriterBrokenStreamFailsOutstandingBatches(t *testing.T) {
	c := dial(t, addr(t))
	id := sid()
	must[*pb.Session](t)(c.CreateSession(context.Background(), id, nil))
	ctx, cancel := context.WithCancel(context.Background())
	w := must[*Writer](t)(c.AppendStream(ctx))
	cancel()
	_, err := w.Append(context.Background(), id, user("after"), AppendOptions{})
	if e := asErr(t, err); e.CodeName != "CANCELLED" {
		t.Fatalf("%+v", e)
	}
	if e := asErr(t, w.Close()); e.CodeName != "CANCELLED" {
		t.Fatalf("Close: %+v", e)
	}
}
