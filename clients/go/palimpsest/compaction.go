package palimpsest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	pb "palimpsest/gen/go/palimpsest/v1"
)

// SessionOption configures CreateSession.
type SessionOption func(*pb.CreateSessionRequest)

// WithPairingGuard turns the tool-pairing guard on or off (the server's default:
// on). With it on, an append that would leave a tool result on the surface
// without its call, or shadow a result while its call stays, is refused with
// FAILED_PRECONDITION / TOOL_PAIRING_BROKEN (metadata callId, callSeq, resultSeq).
func WithPairingGuard(on bool) SessionOption {
	return func(r *pb.CreateSessionRequest) { r.PairingGuard = &on }
}

// WithStrict turns on the optional strict invariants.
func WithStrict() SessionOption { return func(r *pb.CreateSessionRequest) { r.Strict = true } }

// ReadOption configures GetSurface and Messages.
type ReadOption func(*readOpts)

type readOpts struct {
	asOfSeq      *uint64
	format       string
	dropUnpaired bool
}

// AsOf reads the surface or the messages as they were right after event seq
// (time travel; OUT_OF_RANGE / AS_OF_SEQ_AFTER_HEAD past the head).
func AsOf(seq uint64) ReadOption { return func(o *readOpts) { o.asOfSeq = &seq } }

func readOptions(opts []ReadOption) readOpts {
	var o readOpts
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Budget is what a compaction keeps: KeepTokens(n) or UpToSeq(seq).
type Budget struct {
	keepTokens, upToSeq *uint64
}

// KeepTokens keeps the most recent nodes of the surface whose tokens add up to
// at most n.
func KeepTokens(n uint64) Budget { return Budget{keepTokens: &n} }

// UpToSeq shadows from the start of the surface up to this surface seq.
func UpToSeq(seq uint64) Budget { return Budget{upToSeq: &seq} }

func (b Budget) isSet() bool { return b.keepTokens != nil || b.upToSeq != nil }

// PlanOptions are PlanCompaction's optional fields.
type PlanOptions struct {
	// TokenCounts overrides the server's estimator per surface seq.
	TokenCounts map[uint64]uint64
	// OmitMessages leaves the derived messages of the range out of the plan.
	OmitMessages bool
}

// PlanCompaction plans a compaction (read-only). The plan holds Start, End,
// ShadowedSeqs, ExpectedLastSeq (the head it was made against), the derived
// Messages of the range (what to summarise) and Blockers (empty = ready);
// Start is nil when there is nothing to compact.
func (c *Client) PlanCompaction(ctx context.Context, id string, b Budget, o PlanOptions) (*pb.PlanCompactionResponse, error) {
	req := &pb.PlanCompactionRequest{SessionId: id, TokenCounts: o.TokenCounts, OmitMessages: o.OmitMessages}
	switch {
	case b.keepTokens != nil:
		req.Budget = &pb.PlanCompactionRequest_KeepTokens{KeepTokens: *b.keepTokens}
	case b.upToSeq != nil:
		req.Budget = &pb.PlanCompactionRequest_UpToSeq{UpToSeq: *b.upToSeq}
	default:
		return nil, errors.New("palimpsest: PlanCompaction needs a budget: KeepTokens(n) or UpToSeq(seq)")
	}
	res, err := c.Raw.PlanCompaction(c.ctx(ctx), req)
	if err != nil {
		return nil, AsError(err)
	}
	return res, nil
}

// ErrNothingToCompact is returned by Compact when the plan has no range.
var ErrNothingToCompact = errors.New("palimpsest: nothing to compact")

// CompactOptions describe a compaction. Give Plan (from PlanCompaction), or a
// Budget to plan first. Give the summary as Summary (text), SummaryBlocks
// (content blocks) or Summarise (called with the plan's messages as JSON).
type CompactOptions struct {
	Plan   *pb.PlanCompactionResponse
	Budget Budget
	// PlanOptions apply when Compact plans (Budget).
	PlanOptions PlanOptions

	Summary       string
	SummaryBlocks []Block
	Summarise     func(messages []map[string]any) (string, error)

	Provider, Model string
	Usage           *pb.TokenUsage
	MaxTokens       *uint64
	// IdempotencyKey: "" = a generated one (a retry cannot compact twice).
	IdempotencyKey string
}

// Compact compacts the oldest part of the surface into a summary: the server
// appends compaction/start, compaction/summary, the replacing user/message and
// compaction/end (CompactResponse.Seqs), conditional on the head the plan was
// made against. If another writer moved the session it fails with
// FAILED_PRECONDITION / HEAD_MISMATCH and nothing is written: plan again.
func (c *Client) Compact(ctx context.Context, id string, o CompactOptions) (*pb.CompactResponse, error) {
	plan := o.Plan
	if plan != nil && o.Budget.isSet() {
		return nil, errors.New("palimpsest: Compact takes Plan or Budget, not both")
	}
	if plan == nil {
		var err error
		if plan, err = c.PlanCompaction(ctx, id, o.Budget, o.PlanOptions); err != nil {
			return nil, err
		}
	}
	if plan.Start == nil || plan.End == nil {
		return nil, ErrNothingToCompact
	}
	req := &pb.CompactRequest{SessionId: id, Start: plan.GetStart(), End: plan.GetEnd(), ExpectedLastSeq: Expect(plan.GetExpectedLastSeq()),
		Provider: o.Provider, Model: o.Model, Usage: o.Usage, MaxTokens: o.MaxTokens, IdempotencyKey: o.IdempotencyKey}
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = newKey()
	}
	switch {
	case o.Summarise != nil:
		msgs := make([]map[string]any, 0, len(plan.GetMessages()))
		for _, m := range plan.GetMessages() {
			var v map[string]any
			if err := json.Unmarshal([]byte(m.GetMessageJson()), &v); err != nil {
				return nil, err
			}
			msgs = append(msgs, v)
		}
		text, err := o.Summarise(msgs)
		if err != nil {
			return nil, fmt.Errorf("palimpsest: summarise: %w", err)
		}
		req.Summary = &pb.CompactRequest_SummaryText{SummaryText: text}
	case o.SummaryBlocks != nil:
		b, err := json.Marshal(o.SummaryBlocks)
		if err != nil {
			return nil, err
		}
		req.Summary = &pb.CompactRequest_SummaryJson{SummaryJson: string(b)}
	default:
		req.Summary = &pb.CompactRequest_SummaryText{SummaryText: o.Summary}
	}
	res, err := c.Raw.Compact(c.ctx(ctx), req)
	if err != nil {
		return nil, AsError(err)
	}
	return res, nil
}

// PruneOptions select the tool results to prune: Seqs, or by policy (MinBytes,
// KeepRecent, ExcludeTools). HeadChars/TailChars: nil = 4096/1024.
type PruneOptions struct {
	Seqs         []uint64
	MinBytes     uint64
	KeepRecent   uint32
	ExcludeTools []string
	HeadChars    *uint32
	TailChars    *uint32
	// ExpectedLastSeq makes the prune conditional (HEAD_MISMATCH).
	ExpectedLastSeq *int64
	IdempotencyKey  string
}

// PruneToolResults shortens tool results on the surface in place (a
// compaction/prune, then a tool/result copy with the middle of its text cut).
// A seq that is not a tool result on the surface is refused with
// PRUNE_TARGET_INVALID (metadata seq).
func (c *Client) PruneToolResults(ctx context.Context, id string, o PruneOptions) (*pb.PruneToolResultsResponse, error) {
	if len(o.Seqs) == 0 && o.MinBytes == 0 {
		return nil, errors.New("palimpsest: PruneToolResults needs Seqs or a policy (MinBytes)")
	}
	key := o.IdempotencyKey
	if key == "" {
		key = newKey()
	}
	res, err := c.Raw.PruneToolResults(c.ctx(ctx), &pb.PruneToolResultsRequest{SessionId: id, Seqs: o.Seqs, MinBytes: o.MinBytes,
		KeepRecent: o.KeepRecent, ExcludeTools: o.ExcludeTools, HeadChars: o.HeadChars, TailChars: o.TailChars,
		ExpectedLastSeq: o.ExpectedLastSeq, IdempotencyKey: key})
	if err != nil {
		return nil, AsError(err)
	}
	return res, nil
}

func newKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "go-" + hex.EncodeToString(b)
}
