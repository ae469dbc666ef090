package palimpsest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	pb "palimpsest.dev/go/gen/palimpsest/v1"
)

// searchCorpus appends two sessions that mention a word of their own (the server is shared with
// the other tests): a tool round in red, a user message (after an emoji) in blue.
func searchCorpus(t *testing.T, c *Client) (word, red, blue string) {
	ctx := context.Background()
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	word, red, blue = "zq"+hex.EncodeToString(b), sid()+"-red", sid()+"-blue"
	must[*pb.Session](t)(c.CreateSession(ctx, red, map[string]string{"team": "red"}))
	callSeq := int64(1)
	must[[]int64](t)(c.Append(ctx, red, []*pb.EventInput{
		UserMessage("Please ship "+word+" to production", "", nil, Placement{}),
		AssistantMessage(Assistant{Turn: 1, Step: 1, Provider: "p", Model: "m", Text: "Deploying " + word + ".",
			ToolCalls: []Block{ToolCallBlock("c1", "deploy", `{"ref":"`+word+`"}`)}}),
		ToolResult(1, 1, "c1", "deploy failed: "+word+" is locked", "r1", &callSeq, Placement{}),
	}, AppendOptions{}))
	must[*pb.Session](t)(c.CreateSession(ctx, blue, map[string]string{"team": "blue"}))
	must[[]int64](t)(c.Append(ctx, blue, []*pb.EventInput{UserMessage("🙂 where is "+word+" now?", "", nil, Placement{})}, AppendOptions{}))
	return word, red, blue
}

func searchAll(t *testing.T, c *Client, query string, o SearchOptions) []string {
	t.Helper()
	var out []string
	it := c.Search(context.Background(), query, o)
	for it.Next() {
		out = append(out, fmt.Sprintf("%s#%d", it.Hit().GetSessionId(), it.Hit().GetSeq()))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSearchFindsHitsNewestFirstWithMarkedSnippets(t *testing.T) {
	c := dial(t, addr(t))
	word, red, blue := searchCorpus(t, c)
	want := []string{blue + "#0", red + "#2", red + "#1", red + "#0"}
	if got := searchAll(t, c, word, SearchOptions{}); !reflect.DeepEqual(got, want) {
		t.Fatalf("hits %v, want %v", got, want)
	}
	it := c.Search(context.Background(), word, SearchOptions{})
	if !it.Next() {
		t.Fatal(it.Err())
	}
	h := it.Hit()
	if h.GetType() != "user/message" || time.Since(time.UnixMilli(h.GetTime())) > time.Minute {
		t.Fatalf("hit %v", h)
	}
	// Runes, not bytes: the emoji (4 bytes) before the word does not shift the mark.
	parts := SnippetParts(h)
	if !reflect.DeepEqual(parts, []SnippetPart{{Text: "🙂 where is "}, {Text: word, Match: true}, {Text: " now?"}}) {
		t.Fatalf("parts %+v of %q %v", parts, h.GetSnippet(), h.GetMatches())
	}
	if got := searchAll(t, c, `"ship `+word+`" -locked`, SearchOptions{}); !reflect.DeepEqual(got, []string{red + "#0"}) {
		t.Fatalf("phrase hits %v", got)
	}
	if got := searchAll(t, c, word+"x", SearchOptions{}); len(got) != 0 {
		t.Fatalf("hits for an absent word: %v", got)
	}
}

func TestSearchAppliesEveryFilter(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	word, red, blue := searchCorpus(t, c)
	check := func(name string, o SearchOptions, want ...string) {
		t.Helper()
		if got := searchAll(t, c, word, o); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: hits %v, want %v", name, got, want)
		}
	}
	check("labels", SearchOptions{Labels: map[string]string{"team": "blue"}}, blue+"#0")
	check("session ids", SearchOptions{SessionIDs: []string{red}}, red+"#2", red+"#1", red+"#0")
	check("event types", SearchOptions{EventTypes: []string{"tool/result"}}, red+"#2")
	check("tool name", SearchOptions{ToolName: "deploy"}, red+"#2", red+"#1")
	it := c.Search(ctx, word, SearchOptions{SessionIDs: []string{blue}})
	if !it.Next() {
		t.Fatal(it.Err())
	}
	at := time.UnixMilli(it.Hit().GetTime())
	check("after the newest", SearchOptions{StartTime: at.Add(time.Millisecond)})
	check("time range", SearchOptions{SessionIDs: []string{blue}, StartTime: at, EndTime: at.Add(time.Millisecond)}, blue+"#0")
	scored := searchAll(t, c, word, SearchOptions{SessionIDs: []string{red}, Order: pb.SearchOrder_SEARCH_ORDER_SCORE})
	sort.Strings(scored)
	if !reflect.DeepEqual(scored, []string{red + "#0", red + "#1", red + "#2"}) {
		t.Fatalf("by score %v", scored)
	}
	// A prune takes the result off the surface: left out by default, back with IncludeShadowed;
	// SurfaceOnly sees the stub.
	must[[]int64](t)(c.Append(ctx, red, []*pb.EventInput{
		NewEvent("compaction/prune", map[string]any{"shadowedRange": map[string]int{"start": 2, "end": 2}, "shadowedSeqs": []int{2}, "shadowedTokenCount": 5}, false, Placement{}),
		ToolResult(1, 1, "c1", "[pruned "+word+"]", "r1", nil, Replacing(2, 2, 2)),
	}, AppendOptions{}))
	check("default (no shadowed)", SearchOptions{SessionIDs: []string{red}}, red+"#4", red+"#1", red+"#0")
	check("include shadowed", SearchOptions{SessionIDs: []string{red}, IncludeShadowed: true}, red+"#4", red+"#2", red+"#1", red+"#0")
	check("surface only", SearchOptions{SessionIDs: []string{red}, SurfaceOnly: true}, red+"#4", red+"#1", red+"#0")
}

func TestSearchPages(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	word, red, blue := searchCorpus(t, c)
	first, token, err := c.SearchPage(ctx, word, SearchOptions{PageSize: 3}, "")
	if err != nil || len(first) != 3 || token == "" {
		t.Fatalf("first page %v %q %v", first, token, err)
	}
	second, last, err := c.SearchPage(ctx, word, SearchOptions{PageSize: 3}, token)
	if err != nil || len(second) != 1 || last != "" || second[0].GetSessionId() != red || second[0].GetSeq() != 0 {
		t.Fatalf("second page %v %q %v", second, last, err)
	}
	want := []string{blue + "#0", red + "#2", red + "#1", red + "#0"}
	if got := searchAll(t, c, word, SearchOptions{PageSize: 1}); !reflect.DeepEqual(got, want) {
		t.Fatalf("paged by one %v", got)
	}
}

func TestSearchMalformedQueryNamesItsPosition(t *testing.T) {
	c := dial(t, addr(t))
	it := c.Search(context.Background(), "deploy fo*o", SearchOptions{})
	if it.Next() {
		t.Fatalf("a hit for a malformed query: %v", it.Hit())
	}
	e := asErr(t, it.Err())
	if e.CodeName != "INVALID_ARGUMENT" || e.Reason != "SEARCH_QUERY_INVALID" || e.Metadata["position"] != "9" || !strings.Contains(e.Message, "position 9") {
		t.Fatalf("%+v", e)
	}
	if it.Next() {
		t.Fatal("Next after an error")
	}
	_, _, err := c.SearchPage(context.Background(), "deploy", SearchOptions{SurfaceOnly: true, IncludeShadowed: true}, "")
	if e := asErr(t, err); e.CodeName != "INVALID_ARGUMENT" || e.Reason != "SEARCH_REQUEST_INVALID" {
		t.Fatalf("%+v", e)
	}
}
