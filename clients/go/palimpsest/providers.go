package palimpsest

import (
	"context"
	"encoding/json"
	"fmt"

	pb "palimpsest.dev/go/gen/palimpsest/v1"
)

// The provider formats of Format and ImportMessages (docs/providers.md).
var messageFormats = map[string]pb.MessageFormat{
	"openai-chat":      pb.MessageFormat_MESSAGE_FORMAT_OPENAI_CHAT,
	"openai-responses": pb.MessageFormat_MESSAGE_FORMAT_OPENAI_RESPONSES,
	"anthropic":        pb.MessageFormat_MESSAGE_FORMAT_ANTHROPIC,
	"gemini":           pb.MessageFormat_MESSAGE_FORMAT_GEMINI,
}

func messageFormat(name string) (pb.MessageFormat, error) {
	f, ok := messageFormats[name]
	if !ok {
		return 0, fmt.Errorf("palimpsest: unknown format %q; use openai-chat, openai-responses, anthropic or gemini", name)
	}
	return f, nil
}

// Format makes Messages return the model history as a provider's request
// messages: "openai-chat", "openai-responses", "anthropic" or "gemini".
func Format(name string) ReadOption { return func(o *readOpts) { o.format = name } }

// DropUnpaired makes a Format read repair in the rendering (orphan results
// left out, unanswered calls answered) instead of failing with
// HISTORY_NOT_RENDERABLE.
func DropUnpaired() ReadOption { return func(o *readOpts) { o.dropUnpaired = true } }

// RenderedMessage is one provider message, the seqs it was rendered from and
// its estimated tokens (the server's estimator over what the message carries,
// plus its role framing; docs/providers.md "Token counts").
type RenderedMessage struct {
	Seqs    []int64
	Message map[string]any
	Tokens  int64
}

// RenderedMessages returns the model history rendered for format (AsOf and
// DropUnpaired apply).
func (c *Client) RenderedMessages(ctx context.Context, id string, format string, opts ...ReadOption) ([]RenderedMessage, error) {
	f, err := messageFormat(format)
	if err != nil {
		return nil, err
	}
	o := readOptions(opts)
	res, err := c.Raw.GetMessages(c.ctx(ctx), &pb.GetMessagesRequest{SessionId: id, View: pb.MessageView_MESSAGE_VIEW_MODEL_HISTORY, AsOfSeq: o.asOfSeq, Format: f, DropUnpaired: o.dropUnpaired, BlobRefs: o.blobRefs})
	if err != nil {
		return nil, AsError(err)
	}
	out := make([]RenderedMessage, 0, len(res.GetRendered()))
	for _, m := range res.GetRendered() {
		var v map[string]any
		if err := json.Unmarshal([]byte(m.GetProviderJson()), &v); err != nil {
			return nil, err
		}
		out = append(out, RenderedMessage{Seqs: seqsIn(m.GetSeqs()), Message: v, Tokens: int64(m.GetTokens())})
	}
	return out, nil
}

// ImportMessages appends a conversation given in a provider's format (its
// messages, input items or contents; anything encoding/json turns into a JSON
// array) to an existing session as the events the reference writes, and
// returns their seqs.
func (c *Client) ImportMessages(ctx context.Context, id string, format string, messages any) ([]int64, error) {
	f, err := messageFormat(format)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(messages)
	if err != nil {
		return nil, err
	}
	res, err := c.Raw.ImportMessages(c.ctx(ctx), &pb.ImportMessagesRequest{SessionId: id, Format: f, MessagesJson: string(body)})
	if err != nil {
		return nil, AsError(err)
	}
	return seqsIn(res.GetSeqs()), nil
}
