package palimpsest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	pb "palimpsest.dev/go/gen/palimpsest/v1"
)

type turnSeqs struct{ user, assistant, call, result, head int64 }

// toolTurn appends turn n (a user message, an assistant message calling a
// tool, the call, its result) guarded by the head and returns its seqs.
func toolTurn(t *testing.T, c *Client, id string, n int, output string) turnSeqs {
	t.Helper()
	ctx := context.Background()
	head := must[int64](t)(c.Head(ctx, id))
	base := head + 1
	callID := fmt.Sprintf("c%d", n)
	call := base + 4
	batch := []*pb.EventInput{TurnStart(n), StepStart(n, 1), UserMessage("What is here?", fmt.Sprintf("u%d", n), nil, Placement{}),
		AssistantMessage(Assistant{Turn: n, Step: 1, Provider: "p", Model: "m", ID: fmt.Sprintf("a%d", n), ToolCalls: []Block{ToolCallBlock(callID, "ls", "{}")}, Placement: Citing()}),
		ToolCall(n, 1, callID, "ls", "{}"), ToolResult(n, 1, callID, output, fmt.Sprintf("r%d", n), &call, Placement{}), StepEnd(n, 1), TurnEnd(n, "completed")}
	seqs := must[[]int64](t)(c.Append(ctx, id, batch, AppendOptions{ExpectedLastSeq: Expect(head)}))
	return turnSeqs{user: base + 2, assistant: base + 3, call: call, result: call + 1, head: seqs[len(seqs)-1]}
}

func textOf(m map[string]any) string {
	var b strings.Builder
	for _, blk := range m["content"].([]any) {
		if s, ok := blk.(map[string]any)["text"].(string); ok {
			b.WriteString(s)
		}
	}
	return b.String()
}

func TestCompactionShowsTheSummaryAndAsOfShowsBefore(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	id := sid()
	must[*pb.Session](t)(c.CreateSession(ctx, id, nil))
	// Long results: a summary must be smaller than the range it replaces (the reference's rule).
	t1 := toolTurn(t, c, id, 1, strings.Repeat("README.md\n", 100))
	t2 := toolTurn(t, c, id, 2, strings.Repeat("src/\n", 200))
	surfaceBefore := must[[]int64](t)(c.GetSurface(ctx, id))
	before := must[[]map[string]any](t)(c.Messages(ctx, id, false))

	plan := must[*Plan](t)(c.PlanCompaction(ctx, id, UpToSeq(t1.result), PlanOptions{}))
	if *plan.Start != t1.user || *plan.End != t1.result || plan.ExpectedLastSeq != t2.head || len(plan.Blockers) != 0 || len(plan.Messages) != 3 {
		t.Fatalf("plan %+v", plan)
	}
	if !reflect.DeepEqual(plan.ShadowedSeqs, []int64{t1.user, t1.assistant, t1.result}) {
		t.Fatalf("shadowed %v", plan.ShadowedSeqs)
	}
	var seen []map[string]any
	res := must[*Compacted](t)(c.Compact(ctx, id, CompactOptions{Plan: plan, Provider: "p", Model: "summariser",
		Summarise: func(msgs []map[string]any) (string, error) {
			seen = msgs
			return fmt.Sprintf("ls showed README.md (%d messages)", len(msgs)), nil
		}}))
	if len(res.Seqs) != 4 || res.CompactionID == "" || len(seen) != 3 || seen[0]["id"] != "u1" {
		t.Fatalf("compact %v, summariser saw %v", res, seen)
	}
	after := must[[]map[string]any](t)(c.Messages(ctx, id, false))
	src := after[0]["source"].(map[string]any)
	if src["plugin"] != "compact" || src["compactionId"] != res.CompactionID || !strings.Contains(textOf(after[0]), "ls showed README.md (3 messages)") {
		t.Fatalf("first message after compaction %v", after[0])
	}
	if !reflect.DeepEqual(after[1:], before[3:]) {
		t.Fatalf("kept messages differ:\n%v\n%v", after[1:], before[3:])
	}
	// Time travel: right after turn 2, the surface and history before the compaction.
	if got := must[[]int64](t)(c.GetSurface(ctx, id, AsOf(t2.head))); !reflect.DeepEqual(got, surfaceBefore) {
		t.Fatalf("surface as of %d: %v, want %v", t2.head, got, surfaceBefore)
	}
	if got := must[[]map[string]any](t)(c.Messages(ctx, id, false, AsOf(t2.head))); !reflect.DeepEqual(got, before) {
		t.Fatalf("messages as of %d: %v", t2.head, got)
	}
	_, err := c.GetSurface(ctx, id, AsOf(res.Seqs[3]+1))
	if e := asErr(t, err); e.CodeName != "OUT_OF_RANGE" || e.Reason != "AS_OF_SEQ_AFTER_HEAD" {
		t.Fatalf("%+v", e)
	}

	// A stale plan: HEAD_MISMATCH, nothing written; the Budget form plans again.
	head := must[int64](t)(c.Head(ctx, id))
	_, err = c.Compact(ctx, id, CompactOptions{Plan: plan, Summary: "again", Provider: "p", Model: "m"})
	if e := asErr(t, err); e.Reason != "HEAD_MISMATCH" {
		t.Fatalf("%+v", e)
	}
	if h := must[int64](t)(c.Head(ctx, id)); h != head {
		t.Fatalf("head %d after a refused Compact, want %d", h, head)
	}
	res2 := must[*Compacted](t)(c.Compact(ctx, id, CompactOptions{Budget: KeepTokens(1), SummaryBlocks: []Block{Text("both turns")}, Provider: "p", Model: "m"}))
	if res2.Seqs[0] != head+1 || !strings.Contains(textOf(must[[]map[string]any](t)(c.Messages(ctx, id, false))[0]), "both turns") {
		t.Fatalf("second compaction %v", res2)
	}
	if _, err := c.Compact(ctx, id, CompactOptions{Budget: KeepTokens(1 << 40), Summary: "x", Provider: "p", Model: "m"}); !errors.Is(err, ErrNothingToCompact) {
		t.Fatalf("want ErrNothingToCompact, got %v", err)
	}
}

func TestPruneToolResults(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	id := sid()
	must[*pb.Session](t)(c.CreateSession(ctx, id, nil))
	long := strings.Repeat("line of build output\n", 400)
	t1 := toolTurn(t, c, id, 1, long)
	// A seq that is not a tool result: refused, log untouched.
	_, err := c.PruneToolResults(ctx, id, PruneOptions{Seqs: []int64{t1.user}})
	if e := asErr(t, err); e.CodeName != "FAILED_PRECONDITION" || e.Reason != "PRUNE_TARGET_INVALID" || e.Metadata["seq"] != fmt.Sprint(t1.user) {
		t.Fatalf("%+v", e)
	}
	if h := must[int64](t)(c.Head(ctx, id)); h != t1.head {
		t.Fatalf("head %d after a refused prune", h)
	}
	head, tail := uint32(20), uint32(20)
	res := must[*Pruned](t)(c.PruneToolResults(ctx, id, PruneOptions{Seqs: []int64{t1.result}, HeadChars: &head, TailChars: &tail, ExpectedLastSeq: Expect(t1.head)}))
	if len(res.Results) != 1 || res.Results[0].OriginalSeq != t1.result || res.Results[0].BytesBefore != uint64(len(long)) || res.Results[0].ReplacementSeq != t1.head+2 {
		t.Fatalf("prune %v", res)
	}
	msgs := must[[]map[string]any](t)(c.Messages(ctx, id, false))
	inner := msgs[2]["content"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"].(string)
	if msgs[2]["id"] != "r1" || inner != long[:20]+"\n\n[... tool result middle pruned ...]\n\n"+long[len(long)-20:] {
		t.Fatalf("pruned result %q", inner)
	}
	// Palimpsest's options: a marker naming the count, by a code-point threshold.
	t2 := toolTurn(t, c, id, 2, long)
	minSaving := uint64(100)
	res2 := must[*Pruned](t)(c.PruneToolResults(ctx, id, PruneOptions{MinChars: 1000, HeadChars: &head, TailChars: &tail, MarkerWithCount: true, MinSavingChars: &minSaving, KeepRecent: 0}))
	if len(res2.Results) != 1 || res2.Results[0].OriginalSeq != t2.result {
		t.Fatalf("prune by min chars %v", res2)
	}
	msgs = must[[]map[string]any](t)(c.Messages(ctx, id, false))
	last := msgs[len(msgs)-1]["content"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"].(string)
	if !strings.Contains(last, "pruned: ") {
		t.Fatalf("with-count marker %q", last)
	}
}

func TestRetainTokensAndASummaryNotSmaller(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	id := sid()
	must[*pb.Session](t)(c.CreateSession(ctx, id, nil))
	t1 := toolTurn(t, c, id, 1, "a")
	t2 := toolTurn(t, c, id, 2, "b")
	// The shortest tail of at least 1 token is t2's result; its call stays with it.
	plan := must[*Plan](t)(c.PlanCompaction(ctx, id, RetainTokens(1), PlanOptions{}))
	if want := []int64{t1.user, t1.assistant, t1.result, t2.user}; !reflect.DeepEqual(plan.ShadowedSeqs, want) {
		t.Fatalf("shadowed %v, want %v", plan.ShadowedSeqs, want)
	}
	surface := must[[]int64](t)(c.GetSurface(ctx, id))
	res := must[*Compacted](t)(c.Compact(ctx, id, CompactOptions{Plan: plan, Summary: strings.Repeat("x", 4000), Provider: "p", Model: "m", SourceCommandId: "cmd-1"}))
	if !strings.HasPrefix(res.Error, "summary is not smaller than the shadowed content") || len(res.Seqs) != 2 {
		t.Fatalf("compact %v", res)
	}
	if got := must[[]int64](t)(c.GetSurface(ctx, id)); !reflect.DeepEqual(got, surface) {
		t.Fatalf("surface %v after a refused summary, want %v", got, surface)
	}
	s := must[*pb.Session](t)(c.GetSession(ctx, id))
	if s.GetSurfaceTokens() == 0 || s.GetUsage() == nil {
		t.Fatalf("session token counts %v", s)
	}
}

func TestToolPairingBrokenIsDecodedAndLeavesTheLogUntouched(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	id := sid()
	if s := must[*pb.Session](t)(c.CreateSession(ctx, id, nil)); !s.GetPairingGuard() {
		t.Fatal("the guard is on by default")
	}
	t1 := toolTurn(t, c, id, 1, "README.md")
	bad := []*pb.EventInput{UserMessage("the result is gone", "x1", nil, Replacing(t1.result, t1.result, t1.result))}
	_, err := c.Append(ctx, id, bad, AppendOptions{})
	e := asErr(t, err)
	if e.CodeName != "FAILED_PRECONDITION" || e.Reason != "TOOL_PAIRING_BROKEN" || e.Metadata["callId"] != "c1" ||
		e.Metadata["resultSeq"] != fmt.Sprint(t1.result) || e.Metadata["callSeq"] != fmt.Sprint(t1.assistant) {
		t.Fatalf("%+v", e)
	}
	if h := must[int64](t)(c.Head(ctx, id)); h != t1.head {
		t.Fatalf("head %d after a refused append", h)
	}
	// The same append to a session without the guard is accepted.
	other := sid()
	if s := must[*pb.Session](t)(c.CreateSession(ctx, other, nil, WithPairingGuard(false))); s.GetPairingGuard() {
		t.Fatal("WithPairingGuard(false) ignored")
	}
	o1 := toolTurn(t, c, other, 1, "README.md")
	if seqs := must[[]int64](t)(c.Append(ctx, other, bad, AppendOptions{})); !reflect.DeepEqual(seqs, []int64{o1.head + 1}) {
		t.Fatalf("seqs %v", seqs)
	}
}
