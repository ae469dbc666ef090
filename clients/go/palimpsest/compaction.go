package palimpsest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	pb "palimpsest.dev/go/gen/palimpsest/v1"
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

// ReadOption configures GetSurface and Messages (BlobRefs: also RenderedMessages and ExportSession).
type ReadOption func(*readOpts)

type readOpts struct {
	asOfSeq      *uint64
	format       string
	dropUnpaired bool
	blobRefs     bool
}

// BlobRefs makes Messages, RenderedMessages and ExportSession return blobbed
// values (images, large strings; docs/blobs.md) as their references
// {"$blob": "sha256:…", "bytes": N, "mediaType": …} (read them with GetBlob)
// instead of their bytes; an exported file with references imports back into a
// tenant that holds the blobs.
func BlobRefs() ReadOption { return func(o *readOpts) { o.blobRefs = true } }

// AsOf reads the surface or the messages as they were right after event seq
// (time travel; OUT_OF_RANGE / AS_OF_SEQ_AFTER_HEAD past the head).
func AsOf(seq int64) ReadOption {
	return func(o *readOpts) { s := seqOut(seq); o.asOfSeq = &s }
}

func readOptions(opts []ReadOption) readOpts {
	var o readOpts
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Budget is what a compaction keeps: RetainTokens(n), KeepTokens(n) or
// UpToSeq(seq).
type Budget struct {
	retainTokens, keepTokens, upToSeq *uint64
}

// RetainTokens is the reference's budget (retainTokens): keep the shortest
// recent tail of the surface whose tokens add up to at least n (at least one
// node).
func RetainTokens(n uint64) Budget { return Budget{retainTokens: &n} }

// KeepTokens keeps the most recent nodes of the surface whose tokens add up to
// at most n (Palimpsest's budget; the reference's is RetainTokens).
func KeepTokens(n uint64) Budget { return Budget{keepTokens: &n} }

// UpToSeq shadows from the start of the surface up to this surface seq.
func UpToSeq(seq int64) Budget { s := seqOut(seq); return Budget{upToSeq: &s} }

func (b Budget) isSet() bool { return b.retainTokens != nil || b.keepTokens != nil || b.upToSeq != nil }

// PlanOptions are PlanCompaction's optional fields.
type PlanOptions struct {
	// TokenCounts overrides the server's estimator per surface seq.
	TokenCounts map[int64]uint64
	// OmitMessages leaves the derived messages of the range out of the plan.
	OmitMessages bool
}

// Plan is a compaction plan with int64 seqs: Start and End (nil when there is
// nothing to compact), ShadowedSeqs, ExpectedLastSeq (the head it was made
// against), the derived Messages of the range (what to summarise, as JSON) and
// Blockers (empty = ready). Raw is the response as received.
type Plan struct {
	Start, End         *int64
	ShadowedSeqs       []int64
	ExpectedLastSeq    int64
	ShadowedTokenCount uint64
	KeptTokenCount     uint64
	Messages           []map[string]any
	Blockers           []Blocker
	Raw                *pb.PlanCompactionResponse
}

// Blocker is why a plan is not ready (COMPACTION_IN_PROGRESS, TOOL_CALLS_OPEN).
type Blocker struct {
	Reason, Description string
	Seqs                []int64
	CallIDs             []string
}

func optSeq(p *uint64) *int64 {
	if p == nil {
		return nil
	}
	v := int64(*p)
	return &v
}

func planOf(res *pb.PlanCompactionResponse) (*Plan, error) {
	p := &Plan{Start: optSeq(res.Start), End: optSeq(res.End), ShadowedSeqs: seqsIn(res.GetShadowedSeqs()), ExpectedLastSeq: res.GetExpectedLastSeq(),
		ShadowedTokenCount: res.GetShadowedTokenCount(), KeptTokenCount: res.GetKeptTokenCount(), Messages: []map[string]any{}, Raw: res}
	for _, m := range res.GetMessages() {
		var v map[string]any
		if err := json.Unmarshal([]byte(m.GetMessageJson()), &v); err != nil {
			return nil, err
		}
		p.Messages = append(p.Messages, v)
	}
	for _, b := range res.GetBlockers() {
		p.Blockers = append(p.Blockers, Blocker{Reason: b.GetReason(), Description: b.GetDescription(), Seqs: seqsIn(b.GetSeqs()), CallIDs: b.GetCallIds()})
	}
	return p, nil
}

// PlanCompaction plans a compaction (read-only); see Plan.
func (c *Client) PlanCompaction(ctx context.Context, id string, b Budget, o PlanOptions) (*Plan, error) {
	req := &pb.PlanCompactionRequest{SessionId: id, OmitMessages: o.OmitMessages}
	if o.TokenCounts != nil {
		req.TokenCounts = make(map[uint64]uint64, len(o.TokenCounts))
		for seq, n := range o.TokenCounts {
			req.TokenCounts[seqOut(seq)] = n
		}
	}
	switch {
	case b.retainTokens != nil:
		req.Budget = &pb.PlanCompactionRequest_RetainTokens{RetainTokens: *b.retainTokens}
	case b.keepTokens != nil:
		req.Budget = &pb.PlanCompactionRequest_KeepTokens{KeepTokens: *b.keepTokens}
	case b.upToSeq != nil:
		req.Budget = &pb.PlanCompactionRequest_UpToSeq{UpToSeq: *b.upToSeq}
	default:
		return nil, errors.New("palimpsest: PlanCompaction needs a budget: RetainTokens(n), KeepTokens(n) or UpToSeq(seq)")
	}
	res, err := c.Raw.PlanCompaction(c.ctx(ctx), req)
	if err != nil {
		return nil, AsError(err)
	}
	return planOf(res)
}

// ErrNothingToCompact is returned by Compact when the plan has no range.
var ErrNothingToCompact = errors.New("palimpsest: nothing to compact")

// CompactOptions describe a compaction. Give Plan (from PlanCompaction), or a
// Budget to plan first. Give the summary as Summary (text), SummaryBlocks
// (content blocks) or Summarise (called with the plan's messages as JSON).
// Compacted is what Compact wrote: the Seqs of compaction/start, compaction/summary, the
// replacing user/message and compaction/end (only start and end when Error is set: the
// summary was not smaller than the range). Raw is the response as received.
type Compacted struct {
	Seqs               []int64
	CompactionID       string
	SurfaceLength      uint64
	Replayed           bool
	ShadowedTokenCount uint64
	Error              string
	Raw                *pb.CompactResponse
}

type CompactOptions struct {
	Plan   *Plan
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
	// SourceCommandId is the command that asked for the compaction
	// (sourceCommandId in its events); "" = none.
	SourceCommandId string
}

// Compact compacts the oldest part of the surface into a summary: the server
// appends compaction/start, compaction/summary, the replacing user/message and
// compaction/end (CompactResponse.Seqs), conditional on the head the plan was
// made against. If another writer moved the session it fails with
// FAILED_PRECONDITION / HEAD_MISMATCH and nothing is written: plan again.
// As the reference does, a summary that is not smaller than the range is
// refused: Compacted.Error is set and only compaction/start and
// compaction/end were written.
func (c *Client) Compact(ctx context.Context, id string, o CompactOptions) (*Compacted, error) {
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
	req := &pb.CompactRequest{SessionId: id, Start: seqOut(*plan.Start), End: seqOut(*plan.End), ExpectedLastSeq: Expect(plan.ExpectedLastSeq),
		Provider: o.Provider, Model: o.Model, Usage: o.Usage, MaxTokens: o.MaxTokens, IdempotencyKey: o.IdempotencyKey,
		SourceCommandId: o.SourceCommandId}
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = newKey()
	}
	switch {
	case o.Summarise != nil:
		msgs := plan.Messages
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
	return &Compacted{Seqs: seqsIn(res.GetSeqs()), CompactionID: res.GetCompactionId(), SurfaceLength: res.GetSurfaceLength(),
		Replayed: res.GetReplayed(), ShadowedTokenCount: res.GetShadowedTokenCount(), Error: res.GetError(), Raw: res}, nil
}

// PruneOptions select the tool results to prune: Seqs, or by policy (MinChars
// and/or MinBytes, KeepRecent, ExcludeTools). HeadChars/TailChars: nil =
// 4096/1024. As the reference's pruner, a result is pruned when its text is
// over the threshold in code points (MinChars, else head + marker + tail), with
// the reference's fixed marker; MarkerWithCount and MinSavingChars are
// Palimpsest's options.
type PruneOptions struct {
	Seqs []int64
	// MinChars: text over this many code points (the reference's thresholdChars).
	MinChars uint64
	// MinBytes: text over this many UTF-8 bytes.
	MinBytes     uint64
	KeepRecent   uint32
	ExcludeTools []string
	HeadChars    *uint32
	TailChars    *uint32
	// MarkerWithCount writes a marker naming the removed count (not the
	// reference's).
	MarkerWithCount bool
	// MinSavingChars skips a prune that removes fewer code points (not the
	// reference's); nil = none.
	MinSavingChars *uint64
	// ExpectedLastSeq makes the prune conditional (HEAD_MISMATCH).
	ExpectedLastSeq *int64
	IdempotencyKey  string
}

// PruneToolResults shortens tool results on the surface in place (a
// compaction/prune, then a tool/result copy with the middle of its text cut).
// A seq that is not a tool result on the surface is refused with
// PRUNE_TARGET_INVALID (metadata seq).
// Pruned is what PruneToolResults did. Raw is the response as received.
type Pruned struct {
	Results       []PrunedResult
	BytesSaved    uint64
	Skipped       []int64
	SurfaceLength uint64
	Replayed      bool
	Raw           *pb.PruneToolResultsResponse
}

// PrunedResult is one pruned tool result: the original, the compaction/prune and the copy.
type PrunedResult struct {
	OriginalSeq, PruneSeq, ReplacementSeq int64
	CallID                                string
	BytesBefore, BytesAfter               uint64
}

func (c *Client) PruneToolResults(ctx context.Context, id string, o PruneOptions) (*Pruned, error) {
	if len(o.Seqs) == 0 && o.MinBytes == 0 && o.MinChars == 0 {
		return nil, errors.New("palimpsest: PruneToolResults needs Seqs or a policy (MinChars or MinBytes)")
	}
	marker := pb.PruneToolResultsRequest_MARKER_UNSPECIFIED
	if o.MarkerWithCount {
		marker = pb.PruneToolResultsRequest_MARKER_WITH_COUNT
	}
	key := o.IdempotencyKey
	if key == "" {
		key = newKey()
	}
	res, err := c.Raw.PruneToolResults(c.ctx(ctx), &pb.PruneToolResultsRequest{SessionId: id, Seqs: seqsOut(o.Seqs), MinBytes: o.MinBytes,
		KeepRecent: o.KeepRecent, ExcludeTools: o.ExcludeTools, HeadChars: o.HeadChars, TailChars: o.TailChars,
		ExpectedLastSeq: o.ExpectedLastSeq, IdempotencyKey: key, MinChars: o.MinChars, Marker: marker, MinSavingChars: o.MinSavingChars})
	if err != nil {
		return nil, AsError(err)
	}
	out := &Pruned{BytesSaved: res.GetBytesSaved(), Skipped: seqsIn(res.GetSkipped()), SurfaceLength: res.GetSurfaceLength(), Replayed: res.GetReplayed(), Raw: res}
	for _, r := range res.GetPruned() {
		out.Results = append(out.Results, PrunedResult{OriginalSeq: int64(r.GetOriginalSeq()), PruneSeq: int64(r.GetPruneSeq()), ReplacementSeq: int64(r.GetReplacementSeq()),
			CallID: r.GetCallId(), BytesBefore: r.GetBytesBefore(), BytesAfter: r.GetBytesAfter()})
	}
	return out, nil
}

func newKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "go-" + hex.EncodeToString(b)
}
