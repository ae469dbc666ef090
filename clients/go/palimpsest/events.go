package palimpsest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	pb "palimpsest/gen/go/palimpsest/v1"
)

// Placement is a message event's surface op and citations: Replace set = replace
// the surface range [Replace[0], Replace[1]] (compaction, prune) instead of
// appending; Cites = sourceEventSeqs (nil = absent).
type Placement struct {
	Replace *[2]uint64
	Cites   []uint64
}

// Replacing is a Placement that replaces [start, end] citing seqs.
func Replacing(start, end uint64, cites ...uint64) Placement {
	r := [2]uint64{start, end}
	return Placement{Replace: &r, Cites: cites}
}

// Citing is an appending Placement with citations; Citing() cites nothing
// explicitly (sourceEventSeqs: [], an assistant message from a known empty
// stream), where a zero Placement leaves sourceEventSeqs out.
func Citing(seqs ...uint64) Placement {
	if seqs == nil {
		seqs = []uint64{}
	}
	return Placement{Cites: seqs}
}

func newID(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
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
		e.SurfaceOp = &pb.EventInput_Replace{Replace: &pb.SurfaceReplace{Start: p.Replace[0], End: p.Replace[1]}}
	} else if appendToSurface {
		e.SurfaceOp = &pb.EventInput_Append{Append: &pb.SurfaceAppend{}}
	}
	if p.Cites != nil {
		e.SourceEventSeqs = &pb.SourceEventSeqs{Seqs: p.Cites}
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

// UserMessage is a user/message with text; id "" = generated; source nil = {kind: user}.
func UserMessage(text, id string, source map[string]any, p Placement) *pb.EventInput {
	if id == "" {
		id = newID("u")
	}
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
	if id == "" {
		id = newID("a")
	}
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
func ToolResult(turn, step int, callID, output, id string, callSeq *uint64, p Placement) *pb.EventInput {
	if id == "" {
		id = newID("r")
	}
	if p.Cites == nil && callSeq != nil {
		p.Cites = []uint64{*callSeq}
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
