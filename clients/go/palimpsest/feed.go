package palimpsest

import (
	"context"
	"errors"
	"io"
	"time"

	pb "palimpsest.dev/go/gen/palimpsest/v1"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// UpdateOptions change a session's labels: SetLabels are added or
// overwritten, RemoveLabels removed (absent keys are ignored; a key both set
// and removed is INVALID_ARGUMENT). ExpectedVersion (ExpectVersion) makes the
// change conditional on the session's metadata_version; nil = unconditionally.
type UpdateOptions struct {
	SetLabels       map[string]string
	RemoveLabels    []string
	ExpectedVersion *uint64
}

// ExpectVersion is a pointer for UpdateOptions.ExpectedVersion.
func ExpectVersion(v uint64) *uint64 { return &v }

// UpdateSession sets and removes labels of a session and returns it with its
// new metadata_version. The limits of CreateSession apply to the result. With
// ExpectedVersion, a session whose metadata moved on is refused with ABORTED /
// METADATA_VERSION_MISMATCH and nothing changes (read it again and retry).
// Reported on the session feed as labels_changed.
func (c *Client) UpdateSession(ctx context.Context, id string, o UpdateOptions) (*pb.Session, error) {
	res, err := c.Raw.UpdateSession(c.ctx(ctx), &pb.UpdateSessionRequest{
		SessionId: id, SetLabels: o.SetLabels, RemoveLabels: o.RemoveLabels, ExpectedVersion: o.ExpectedVersion})
	return res.GetSession(), AsError(err)
}

// FeedItem is one message of the session feed. Kind is a change, "created",
// "deleted", "labels_changed" or "appended" (with SessionID, HeadSeq (-1 for
// an empty log), EventCount, SurfaceLength, EventTypes (appended: the distinct
// types appended, in order), Labels (after the change; deleted: before it),
// PreviousLabels (labels_changed), CreatedAt and Time (Unix epoch ms)), or a
// signal: "caught_up" (what follows is live) or "heartbeat". Position is the
// feed position after this item: resume with After = Position.
type FeedItem struct {
	Kind           string
	Position       uint64
	SessionID      string
	HeadSeq        int64
	EventCount     uint64
	SurfaceLength  uint64
	EventTypes     []string
	Labels         map[string]string
	PreviousLabels map[string]string
	CreatedAt      int64
	Time           int64
}

// SubscribeSessionsOptions: After = resume after this feed position (nil =
// from the beginning of the feed); FromNow = only changes from now on;
// Selector = only sessions carrying every one of these labels; NoReconnect =
// return UNAVAILABLE instead of resuming.
type SubscribeSessionsOptions struct {
	After       *uint64
	FromNow     bool
	Selector    map[string]string
	HeartbeatMs uint32
	NoReconnect bool
	MaxBackoff  time.Duration
}

// Feed follows the session feed; Next resumes by itself after UNAVAILABLE.
type Feed struct {
	c        *Client
	ctx      context.Context
	o        SubscribeSessionsOptions
	position *uint64
	stream   pb.SessionService_SubscribeSessionsClient
	cancel   context.CancelFunc
	backoff  time.Duration
	// pending holds the rest of a batch (a `changes` message), handed out one
	// change at a time before the next message is read.
	pending []FeedItem
	// Subscriptions counts the streams opened (1 + the reconnects).
	Subscriptions int
}

// SubscribeSessions starts following the session feed: one item per change of
// any session the caller may see, then caught_up and heartbeats. Cancel ctx
// (or call Close) to stop.
func (c *Client) SubscribeSessions(ctx context.Context, o SubscribeSessionsOptions) *Feed {
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 5 * time.Second
	}
	return &Feed{c: c, ctx: ctx, o: o, position: o.After, backoff: 50 * time.Millisecond}
}

// Position is the feed position of the last item delivered (nil before any).
func (f *Feed) Position() *uint64 { return f.position }

// Close ends the current stream.
func (f *Feed) Close() {
	if f.cancel != nil {
		f.cancel()
	}
}

func (f *Feed) open() error {
	// Batch: changes ready together come in one message (Next still returns one at a time).
	req := &pb.SubscribeSessionsRequest{LabelSelector: f.o.Selector, HeartbeatIntervalMs: f.o.HeartbeatMs, Batch: true}
	if f.position != nil {
		after := *f.position
		req.After = &after
	} else {
		req.FromNow = f.o.FromNow
	}
	ctx, cancel := context.WithCancel(f.c.ctx(f.ctx))
	stream, err := f.c.Raw.SubscribeSessions(ctx, req)
	if err != nil {
		cancel()
		return err
	}
	f.stream, f.cancel = stream, cancel
	f.Subscriptions++
	return nil
}

// Next blocks until the next item. It reconnects (with backoff) after
// UNAVAILABLE (a dropped connection, a server restart or shutdown), resuming
// after the last position delivered, so every change is delivered exactly
// once; any other failure (ctx cancelled) is returned. Changes the server sent
// together (a batch) are returned one per call, each with its own Position.
func (f *Feed) Next() (FeedItem, error) {
	for {
		if len(f.pending) > 0 {
			it := f.pending[0]
			f.pending = f.pending[1:]
			p := it.Position
			f.position = &p
			return it, nil
		}
		if f.stream == nil {
			if err := f.open(); err != nil {
				if e := f.retryable(err); e != nil {
					return FeedItem{}, e
				}
				continue
			}
		}
		res, err := f.stream.Recv()
		if err == nil {
			f.backoff = 50 * time.Millisecond
			f.pending = toFeedItems(res)
			continue
		}
		f.cancel()
		f.stream = nil
		if errors.Is(err, io.EOF) {
			return FeedItem{}, io.EOF
		}
		if e := f.retryable(err); e != nil {
			return FeedItem{}, e
		}
	}
}

func (f *Feed) retryable(err error) error {
	if f.o.NoReconnect || status.Code(err) != codes.Unavailable || f.ctx.Err() != nil {
		return AsError(err)
	}
	select {
	case <-f.ctx.Done():
		return AsError(err)
	case <-time.After(f.backoff):
	}
	if f.backoff *= 2; f.backoff > f.o.MaxBackoff {
		f.backoff = f.o.MaxBackoff
	}
	return nil
}

var feedKinds = map[pb.SessionChangeKind]string{
	pb.SessionChangeKind_SESSION_CHANGE_KIND_CREATED:        "created",
	pb.SessionChangeKind_SESSION_CHANGE_KIND_DELETED:        "deleted",
	pb.SessionChangeKind_SESSION_CHANGE_KIND_LABELS_CHANGED: "labels_changed",
	pb.SessionChangeKind_SESSION_CHANGE_KIND_APPENDED:       "appended",
}

func changeItem(ch *pb.SessionChange, position uint64) FeedItem {
	kind, ok := feedKinds[ch.GetKind()]
	if !ok {
		kind = "unspecified"
	}
	it := FeedItem{Kind: kind, Position: position, SessionID: ch.GetSessionId(), HeadSeq: -1}
	if ch.HeadSeq != nil {
		it.HeadSeq = int64(ch.GetHeadSeq())
	}
	it.EventCount, it.SurfaceLength, it.EventTypes = ch.GetEventCount(), ch.GetSurfaceLength(), ch.GetEventTypes()
	it.Labels, it.PreviousLabels, it.CreatedAt, it.Time = ch.GetLabels(), ch.GetPreviousLabels(), ch.GetCreatedAt(), ch.GetTime()
	return it
}

// toFeedItems: the items of one message; a batch's changes in order, each at
// its own position (a lone change from a server before batching has none of
// its own: the message's is used).
func toFeedItems(res *pb.SubscribeSessionsResponse) []FeedItem {
	switch k := res.Kind.(type) {
	case *pb.SubscribeSessionsResponse_Change:
		p := k.Change.GetPosition()
		if p == 0 {
			p = res.GetPosition()
		}
		return []FeedItem{changeItem(k.Change, p)}
	case *pb.SubscribeSessionsResponse_Changes:
		out := make([]FeedItem, 0, len(k.Changes.GetChanges()))
		for _, ch := range k.Changes.GetChanges() {
			out = append(out, changeItem(ch, ch.GetPosition()))
		}
		return out
	case *pb.SubscribeSessionsResponse_CaughtUp:
		return []FeedItem{{Kind: "caught_up", Position: res.GetPosition()}}
	default:
		return []FeedItem{{Kind: "heartbeat", Position: res.GetPosition()}}
	}
}
