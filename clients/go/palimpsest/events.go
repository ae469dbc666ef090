package palimpsest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	pb "palimpsest.dev/go/gen/palimpsest/v1"
)

// Placement is a message event's surface op and citations: Replace set = replace
// the surface range [Replace[0], Replace[1]] (compaction, prune) instead of
// appending; Cites = sourceEventSeqs (nil = absent).
type Placement struct {
	Replace *[2]int64
	Cites   []int64
}

// Replacing is a Placement that replaces [start, end] citing seqs.
func Replacing(start, end int64, cites ...int64) Placement {
	r := [2]int64{start, end}
	return Placement{Replace: &r, Cites: cites}
}

// Citing is an appending Placement with citations; Citing() cites nothing
// explicitly (sourceEventSeqs: [], an assistant message from a known empty
// stream), where a zero Placement leaves sourceEventSeqs out.
func Citing(seqs ...int64) Placement {
	if seqs == nil {
		seqs = []int64{}
	}
	return Placement{Cites: seqs}
}

// messageIDPrefix is the id prefix of each message type whose builder leaves the id to Append.
var messageIDPrefix = map[string]string{"user/message": "u", "assistant/message": "a", "tool/result": "r"}

// DerivedID is the message id Append gives the message at index in a batch sent with key when its
// builder was given no id: prefix-<24 hex of sha256(key "/" index)>. The same key and batch give
// the same ids, so a retry that rebuilds its batch is answered from the stored result instead of
// IDEMPOTENCY_KEY_REUSED.
func DerivedID(prefix, key string, index int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", key, index)))
	return prefix + "-" + hex.EncodeToString(h[:12])
}

// withIDs returns events with every message id a builder left empty set to DerivedID(key, index);
// events that need none are shared, the others copied (the caller's are not changed).
func withIDs(key string, events []*pb.EventInput) ([]*pb.EventInput, error) {
	out, copied := events, false
	for i, e := range events {
		prefix, ok := messageIDPrefix[e.GetType()]
		raw := e.GetData().GetJson()
		if !ok || !strings.Contains(raw, `"id":""`) {
			continue
		}
		var data map[string]any
		if err := json.Unmarshal([]byte(raw), &data); err != nil {
			return nil, fmt.Errorf("palimpsest: events[%d] data: %w", i, err)
		}
		msg := data
		if e.GetType() != "user/message" {
			msg, _ = data["message"].(map[string]any)
		}
		if id, _ := msg["id"].(string); msg == nil || id != "" {
			continue
		}
		msg["id"] = DerivedID(prefix, key, i)
		b, err := json.Marshal(data)
		if err != nil {
			return nil, err
		}
		c := proto.Clone(e).(*pb.EventInput)
		c.Data = &pb.EventData{Kind: &pb.EventData_Json{Json: string(b)}}
		if !copied {
			out, copied = append([]*pb.EventInput(nil), events...), true
		}
		out[i] = c
	}
	return out, nil
}

// NewEvent is any event with JSON data; surface is "" (log-only), "append", or
// set through p.Replace.
func NewEvent(typ string, data any, appendToSurface bool, p Placement) *pb.EventInput {
	raw, err := json.Marshal(data)
	if err != nil {
		panic("palimpsest: event data is not JSON: " + err.Error())
	}
	e := &pb.EventInput{Type: typ, Data: &pb.EventData{Kind: &pb.EventData_Json{Json: string(raw)}}}
	if p.Replace != nil {
		e.SurfaceOp = &pb.EventInput_Replace{Replace: &pb.SurfaceReplace{Start: seqOut(p.Replace[0]), End: seqOut(p.Replace[1])}}
	} else if appendToSurface {
		e.SurfaceOp = &pb.EventInput_Append{Append: &pb.SurfaceAppend{}}
	}
	if p.Cites != nil {
		e.SourceEventSeqs = &pb.SourceEventSeqs{Seqs: seqsOut(p.Cites)}
	}
	return e
}

// Block is a content block.
type Block = map[string]any

// Text is a text block.
func Text(t string) Block { return Block{"type": "text", "text": t} }

// ToolCallBlock is a tool-call block (arguments: the raw JSON string the model produced).
func ToolCallBlock(id, name, arguments string) Block {
	return Block{"type": "tool-call", "id": id, "name": name, "arguments": arguments}
}

// UserMessage is a user/message with text; source nil = {kind: user}. id "" leaves the id to
// Append, which derives it from the batch's idempotency key and the event's index (DerivedID).
func UserMessage(text, id string, source map[string]any, p Placement) *pb.EventInput {
	if source == nil {
		source = map[string]any{"kind": "user"}
	}
	return NewEvent("user/message", map[string]any{"id": id, "role": "user", "content": []Block{Text(text)}, "source": source}, true, p)
}

// Assistant describes an assistant/message.
type Assistant struct {
	Turn, Step      int
	Provider, Model string
	ID              string
	Text            string
	ToolCalls       []Block
	Usage           map[string]int
	Placement       Placement
}

// AssistantMessage is an assistant/message: the text, then the tool-call blocks.
func AssistantMessage(a Assistant) *pb.EventInput {
	id := a.ID
	content := []Block{}
	if a.Text != "" {
		content = append(content, Text(a.Text))
	}
	content = append(content, a.ToolCalls...)
	data := map[string]any{"turn": a.Turn, "step": a.Step, "message": map[string]any{
		"id": id, "role": "assistant", "content": content, "source": map[string]any{"kind": "model", "provider": a.Provider, "model": a.Model}}}
	if a.Usage != nil {
		data["usage"] = a.Usage
	}
	return NewEvent("assistant/message", data, true, a.Placement)
}

// ToolResult is a tool/result for callID with text output, citing callSeq when
// p.Cites is nil. A prune keeps id and uses Replacing(seq, seq, seq).
func ToolResult(turn, step int, callID, output, id string, callSeq *int64, p Placement) *pb.EventInput {
	if p.Cites == nil && callSeq != nil {
		p.Cites = []int64{*callSeq}
	}
	block := Block{"type": "tool-result", "toolCallId": callID, "content": []Block{Text(output)}}
	return NewEvent("tool/result", map[string]any{"turn": turn, "step": step, "message": map[string]any{
		"id": id, "role": "user", "content": []Block{block}, "source": map[string]any{"kind": "tool", "callId": callID}}}, true, p)
}

// ToolCall is a tool/call (log-only).
func ToolCall(turn, step int, callID, name, arguments string) *pb.EventInput {
	return NewEvent("tool/call", map[string]any{"turn": turn, "step": step, "callId": callID, "name": name, "arguments": arguments}, false, Placement{})
}

// TurnStart is turn/start.
func TurnStart(turn int) *pb.EventInput {
	return NewEvent("turn/start", map[string]any{"turn": turn}, false, Placement{})
}

// TurnEnd is turn/end with a reason kind ("completed", "blocked", ...).
func TurnEnd(turn int, reason string) *pb.EventInput {
	return NewEvent("turn/end", map[string]any{"turn": turn, "reason": map[string]any{"kind": reason}}, false, Placement{})
}

// StepStart is step/start.
func StepStart(turn, step int) *pb.EventInput {
	return NewEvent("step/start", map[string]any{"turn": turn, "step": step}, false, Placement{})
}

// StepEnd is step/end.
func StepEnd(turn, step int) *pb.EventInput {
	return NewEvent("step/end", map[string]any{"turn": turn, "step": step}, false, Placement{})
}

// Chunk is one assistant/chunk carrying a StreamChunk.
func Chunk(turn, step int, chunk map[string]any) *pb.EventInput {
	return NewEvent("assistant/chunk", map[string]any{"turn": turn, "step": step, "chunk": chunk}, false, Placement{})
}

// TextChunks is a streamed text block: block-start, one text-delta, block-end.
func TextChunks(turn, step, index int, text string) []*pb.EventInput {
	return []*pb.EventInput{
		Chunk(turn, step, map[string]any{"type": "block-start", "index": index, "blockType": "text"}),
		Chunk(turn, step, map[string]any{"type": "text-delta", "index": index, "text": text}),
		Chunk(turn, step, map[string]any{"type": "block-end", "index": index, "block": Text(text)}),
	}
}

// Seqs are int64 in this package (the proto's uint64 seqs, and -1 for "no event yet" in Head and
// Expect); these convert at the wire. A negative seq is a caller's bug: the conversion panics.
func seqOut(seq int64) uint64 {
	if seq < 0 {
		panic(fmt.Sprintf("palimpsest: seq %d is negative", seq))
	}
	return uint64(seq)
}

func seqsOut(seqs []int64) []uint64 {
	if seqs == nil {
		return nil
	}
	out := make([]uint64, len(seqs))
	for i, s := range seqs {
		out[i] = seqOut(s)
	}
	return out
}

func seqsIn(seqs []uint64) []int64 {
	if seqs == nil {
		return nil
	}
	out := make([]int64, len(seqs))
	for i, s := range seqs {
		out[i] = int64(s)
	}
	return out
}
