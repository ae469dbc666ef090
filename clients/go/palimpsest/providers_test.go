package palimpsest

import (
	"context"
	"reflect"
	"testing"

	pb "palimpsest.dev/go/gen/palimpsest/v1"
)

func TestMessagesInAProviderFormatAndImportMessages(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	id := sid()
	must[*pb.Session](t)(c.CreateSession(ctx, id, nil))
	toolTurn(t, c, id, 1, "README.md")
	msgs := must[[]map[string]any](t)(c.Messages(ctx, id, false, Format("anthropic")))
	if len(msgs) != 3 || msgs[0]["role"] != "user" || msgs[1]["role"] != "assistant" || msgs[2]["role"] != "user" {
		t.Fatalf("anthropic messages %v", msgs)
	}
	use := msgs[1]["content"].([]any)[0].(map[string]any)
	result := msgs[2]["content"].([]any)[0].(map[string]any)
	if use["type"] != "tool_use" || result["type"] != "tool_result" || use["id"] != result["tool_use_id"] || use["id"] != "c1" {
		t.Fatalf("ids do not pair: %v %v", use, result)
	}
	rendered := must[[]RenderedMessage](t)(c.RenderedMessages(ctx, id, "openai-chat"))
	if len(rendered) != 3 || rendered[2].Message["tool_call_id"] != "c1" || len(rendered[2].Seqs) != 1 {
		t.Fatalf("openai-chat %v", rendered)
	}
	// One Chat message per DSH message here: the tokens add up to the session's surface_tokens.
	var sum int64
	for _, r := range rendered {
		if r.Tokens <= 4 {
			t.Fatalf("tokens %d of %v", r.Tokens, r.Message)
		}
		sum += r.Tokens
	}
	if s := must[*pb.Session](t)(c.GetSession(ctx, id)); uint64(sum) != s.GetSurfaceTokens() {
		t.Fatalf("rendered tokens %d, surface_tokens %d", sum, s.GetSurfaceTokens())
	}
	if _, err := c.Messages(ctx, id, false, Format("cohere")); err == nil {
		t.Fatal("an unknown format must fail")
	}

	chat := []map[string]any{
		{"role": "user", "content": "hi"},
		{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "k", "type": "function", "function": map[string]any{"name": "read", "arguments": "{}"}}}},
		{"role": "tool", "tool_call_id": "k", "content": "out"},
		{"role": "assistant", "content": "done"},
	}
	other := sid()
	must[*pb.Session](t)(c.CreateSession(ctx, other, nil))
	seqs := must[[]int64](t)(c.ImportMessages(ctx, other, "openai-chat", chat))
	if !reflect.DeepEqual(seqs, []int64{0, 1, 2, 3, 4}) {
		t.Fatalf("seqs %v", seqs)
	}
	back := must[[]map[string]any](t)(c.Messages(ctx, other, false, Format("openai-chat")))
	if len(back) != 4 || back[2]["tool_call_id"] != "k" || back[3]["content"] != "done" {
		t.Fatalf("round trip %v", back)
	}
	_, err := c.ImportMessages(ctx, other, "openai-chat", []any{map[string]any{"role": "system", "content": "x"}})
	if e := asErr(t, err); e.Reason != "IMPORT_MESSAGES_INVALID" {
		t.Fatalf("want IMPORT_MESSAGES_INVALID, got %v", e)
	}
}
